/**
 * Keeps the SQLite write-ahead log small without pausing requests.
 *
 * SQLite's automatic checkpoint runs inside the connection that commits, so on the embedded
 * store it would run on the request thread: copying pages back into the database and two
 * fsyncs every thousand pages of log, about ninety task inserts (measured: a third of the
 * insert rate, p99 3 ms per insert). A worker thread with its own connection runs passive
 * checkpoints instead: they copy what is committed while writes go on. The request connection
 * still checkpoints, rarely (SqliteStore), because a passive checkpoint never catches up with a
 * steady stream of commits, and the log only starts again after one that did.
 * Measured on 20,000 task inserts: 15,200/s with p99 0.33 ms and a log under 50 MB, against
 * 10,400/s and p99 3.2 ms with SQLite's default alone.
 *
 * The worker also syncs the database file after each checkpoint that copied pages. SQLite syncs it
 * only when a checkpoint completes, and under steady writes only the request connection's do, so
 * that sync had everything the worker copied since to flush, and waited on the request thread
 * behind the disk's writeback throttling: about 20 ms, three times a second, 4% of the request
 * thread's time (measured on a status PATCH under load, p99 42 ms against 28 ms synced as it goes).
 *
 * Sparse writes are left in the log for a while ({@link LAZY_MS}, or until {@link BUSY_WRITES}
 * writes have come). A log the worker has copied whole starts again at the next write, and SQLite
 * syncs the new log's header before that write goes on: on the request thread, an fsync. Copied
 * within 20 ms of each write, a server that writes once a second (an API key's usage, under a
 * load of reads) paid that sync every second, with every request in flight behind it.
 */
import { closeSync, openSync, realpathSync } from "node:fs"
import { createRequire } from "node:module"
import { Worker } from "node:worker_threads"
import { Effect, type Scope } from "effect"

/** The least time between two copies of the log under a steady stream of writes. */
const INTERVAL_MS = 20

/** Writes since the last checkpoint that make the worker copy them at once. */
export const BUSY_WRITES = 64

/** How long fewer writes than {@link BUSY_WRITES} wait in the log before they are copied. */
export const LAZY_MS = 10_000

/**
 * How long without a write before the worker is stopped: a worker is a V8 isolate of its own,
 * about 10 MiB resident (an idle server that had written sat at 81 to 88 MiB against 73), and the
 * next write starts another (some 50 ms of another thread's time). It stops after one to two of
 * these periods without a write, with a last checkpoint.
 */
export const IDLE_STOP_MS = 10_000

/** Slots of the array the request thread and the worker share. */
const WRITES = 0 // writes so far, counted by the request thread after each write that changed something
const COPIED = 1 // the count of writes when the worker last copied the log
const BELL = 2 // set by the request thread to wake a sleeping worker: writes to copy at once, or stop
const STOP = 3 // set by the request thread to stop the worker

// Plain CommonJS evaluated in the worker (the CLI ships as one bundle, so there is no file to
// point the worker at). It loads the same driver the store uses, by absolute path.
// The worker sleeps in Atomics.wait rather than on a timer: a timer that looked every 20 ms woke
// it 50 times a second through a run of reads with one usage write a second (measured: 170 ms of
// CPU per 20 s, on the CPU the request thread shares), where now it wakes for the write that
// makes the log busy, at the end of the lazy while, or to stop.
const workerSource = `
const { parentPort, workerData } = require("node:worker_threads")
const Database = require(workerData.driver)
const { fdatasyncSync } = require("node:fs")
const { intervalMs, busyWrites, lazyMs } = workerData
const shared = new Int32Array(workerData.shared)
const db = new Database(workerData.filename, { fileMustExist: true })
db.pragma("busy_timeout = 5000")
let fd = workerData.fd
let copied = 0
const checkpoint = () => {
  try {
    const { checkpointed } = db.pragma("wal_checkpoint(PASSIVE)")[0]
    if (fd !== undefined && checkpointed !== copied && checkpointed > 0) fdatasyncSync(fd)
    copied = checkpointed
  } catch (e) {
    // A failed sync costs speed, not safety (SQLite still syncs when a checkpoint completes): stop trying.
    if (e && e.syscall === "fdatasync") fd = undefined
    parentPort.postMessage(String(e && e.message))
  }
}
let copiedAt = Date.now()
// What to do now: copy the log, or sleep (how long, in ms; Infinity until woken).
const next = () => {
  const waiting = (Atomics.load(shared, ${WRITES}) - Atomics.load(shared, ${COPIED})) | 0
  if (waiting === 0) return Infinity
  const lazyLeft = lazyMs - (Date.now() - copiedAt)
  return waiting >= busyWrites || lazyLeft <= 0 ? 0 : lazyLeft
}
for (;;) {
  // Cleared before looking, so that a bell rung after the look ends the sleep below at once.
  Atomics.store(shared, ${BELL}, 0)
  if (Atomics.load(shared, ${STOP}) !== 0) break
  const sleepMs = next()
  if (sleepMs > 0) {
    Atomics.wait(shared, ${BELL}, 0, sleepMs)
    continue
  }
  Atomics.store(shared, ${COPIED}, Atomics.load(shared, ${WRITES}))
  copiedAt = Date.now()
  checkpoint()
  // At most one copy per interval under a steady stream of writes.
  Atomics.wait(shared, ${STOP}, 0, intervalMs)
}
checkpoint()
// Writes have stopped, or the store closes: the log's file is emptied, so that what a burst wrote
// does not stay on disk. Never waited for: busy (a transaction open, a reader on the log), SQLite
// makes this one more passive checkpoint at once. A write that comes meanwhile, rare after a quiet
// while, waits for it: SQLite's busy handler looks again after 1 ms.
try {
  db.pragma("busy_timeout = 0")
  db.pragma("wal_checkpoint(TRUNCATE)")
} catch (e) {
  parentPort.postMessage(String(e && e.message))
}
db.close()
`

/**
 * Descriptors of database files, one per file for every store of this process on it. Closing any
 * descriptor of a file drops every POSIX lock the process holds on the file, SQLite's own included,
 * and another process could then take the log for unused and remove it. So a descriptor is closed
 * only once every store that uses it has closed its connection.
 */
const descriptors = new Map<string, { readonly fd: number; users: number }>()

/** The worker's descriptor of the database file, opened when the worker starts. */
export interface FileDescriptorSlot {
  /** The descriptor, opened on the first call; `undefined` when the file cannot be opened. */
  readonly open: () => number | undefined
}

/**
 * A slot for the file's shared descriptor, given back when the scope closes. Take it before the
 * connection, so that it is given back after the connection has closed.
 */
export const fileDescriptorSlot = (filename: string): Effect.Effect<FileDescriptorSlot, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => {
        let path: string | undefined
        return {
          open: (): number | undefined => {
            if (path !== undefined) return descriptors.get(path)?.fd
            try {
              const real = realpathSync(filename)
              const shared = descriptors.get(real) ?? { fd: openSync(real, "r"), users: 0 }
              shared.users++
              descriptors.set(real, shared)
              path = real
              return shared.fd
            } catch {
              return undefined
            }
          },
          release: () => {
            if (path === undefined) return
            const shared = descriptors.get(path)
            if (shared === undefined || --shared.users > 0) return
            descriptors.delete(path)
            closeSync(shared.fd)
          }
        }
      }),
      (slot) => Effect.sync(slot.release)
    ),
    ({ open }): FileDescriptorSlot => ({ open })
  )

/**
 * Starts the worker on the first write: a store that is only read needs none (nor its memory);
 * stops it once writes stop for a while ({@link IDLE_STOP_MS}).
 */
export interface Checkpointer {
  /** Called after every write that changed something; cheap once the worker runs. */
  readonly wrote: () => void
  /** Whether a worker runs now. */
  readonly running: () => boolean
}

/** When the worker copies the log and when it stops; the defaults are the server's. */
export interface CheckpointTiming {
  /** Without a write for this long (once or twice over), the worker stops. */
  readonly idleStopMs?: number
  /** Writes since the last copy that make the next look copy them at once. */
  readonly busyWrites?: number
  /** How long fewer writes wait in the log. */
  readonly lazyMs?: number
}

/**
 * The checkpointing worker for the database file `filename` (in WAL mode), for the life of the
 * scope, started by a write and stopped after `idleStopMs` without one; it syncs the file through
 * the descriptor of `file`. Checkpoint failures are reported through `onError` and retried on
 * the next tick.
 */
export const checkpointInBackground = (
  filename: string,
  file: FileDescriptorSlot,
  onError: (message: string) => void,
  { idleStopMs = IDLE_STOP_MS, busyWrites = BUSY_WRITES, lazyMs = LAZY_MS }: CheckpointTiming = {}
): Effect.Effect<Checkpointer, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => {
        interface Running {
          readonly worker: Worker
          readonly exited: Promise<void>
          readonly idleCheck: ReturnType<typeof setInterval>
          /**
           * Shared with this worker alone (slots {@link WRITES} to {@link STOP}): a worker told to
           * stop may still be at its last checkpoint while the next one starts.
           */
          readonly shared: Int32Array
        }
        let running: Running | undefined
        /** Workers told to stop that have not exited yet (the store's close waits for them). */
        const stopping = new Set<Running>()
        const ring = (shared: Int32Array) => {
          Atomics.store(shared, BELL, 1)
          Atomics.notify(shared, BELL)
        }
        const stopWorker = (stopped: Running) => {
          clearInterval(stopped.idleCheck)
          if (running === stopped) running = undefined
          // STOP before the bell: the worker clears the bell, then looks at STOP, then sleeps.
          Atomics.store(stopped.shared, STOP, 1)
          Atomics.notify(stopped.shared, STOP)
          ring(stopped.shared)
          stopping.add(stopped)
          void stopped.exited.then(() => stopping.delete(stopped))
        }
        const start = (): Running => {
          const shared = new Int32Array(new SharedArrayBuffer(4 * Int32Array.BYTES_PER_ELEMENT))
          const worker = new Worker(workerSource, {
            eval: true,
            workerData: {
              driver: createRequire(import.meta.url).resolve("better-sqlite3"),
              filename,
              fd: file.open(),
              intervalMs: INTERVAL_MS,
              shared: shared.buffer,
              busyWrites,
              lazyMs
            }
          })
          const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()))
          worker.on("message", (message: unknown) => onError(String(message)))
          worker.on("error", (error) => onError(error.message))
          // The worker must not keep a finished process alive.
          worker.unref()
          // The idle check compares counts, so that a write costs an increment.
          let seen = 1 // the write that started it
          const idleCheck = setInterval(() => {
            const now = Atomics.load(shared, WRITES)
            if (now !== seen) seen = now
            else if (running !== undefined) stopWorker(running)
          }, idleStopMs)
          idleCheck.unref()
          running = { worker, exited, idleCheck, shared }
          return running
        }
        return {
          wrote: () => {
            const { shared } = running ?? start()
            const waiting = (Atomics.add(shared, WRITES, 1) + 1 - Atomics.load(shared, COPIED)) | 0
            // The write that makes the log busy wakes the worker; the writes after it wait for
            // the worker's next look, at most an interval away.
            if (waiting === busyWrites) ring(shared)
          },
          running: () => running !== undefined,
          stop: (): Promise<void> => {
            if (running !== undefined) stopWorker(running)
            // Workers are unref'd while they run; waiting for them to exit must keep the process
            // alive, or a script that awaits close() ends (code 13) before the close settles.
            const left = [...stopping]
            for (const { worker } of left) worker.ref()
            return Promise.all(left.map(({ exited }) => exited)).then(() => undefined)
          }
        }
      }),
      (checkpointer) => Effect.promise(checkpointer.stop)
    ),
    ({ wrote, running }): Checkpointer => ({ wrote, running })
  )
