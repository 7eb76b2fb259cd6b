/**
 * A run's log, written in batches. `append` is synchronous and cheap (it runs once per line of
 * agent output): it gives the entry the run's next `seq` and a timestamp that never goes
 * backwards, and buffers it. A flusher writes what is buffered every `flushMs`, or as soon as a
 * batch is full, each time in one transaction; a store that fails is retried, never dropped on
 * the floor.
 */
import { Deferred, Effect, Fiber } from "effect"
import type { LogLevel } from "../agents/AgentStreams.js"
import type { StoreError } from "../store/Store.js"
import type { LogTuple } from "./RunsRepo.js"

export interface RunLogOptions {
  /** The seq of the first entry appended (1 for a new run). */
  readonly firstSeq: number
  /** The newest timestamp already stored for the run (ms), so timestamps keep increasing. */
  readonly notBefore?: number
  /** Writes entries with one statement (at most 1000 at a time). */
  readonly write: (entries: ReadonlyArray<LogTuple>) => Effect.Effect<unknown, StoreError>
  /** Runs one flush's statements in one transaction. */
  readonly transaction: <A, E>(self: Effect.Effect<A, E>) => Effect.Effect<A, E | StoreError>
  /** Entries per statement (default 1000). */
  readonly batchSize?: number
  /** Longest an entry waits in the buffer (default 100 ms). */
  readonly flushMs?: number
  /**
   * Told `true` when more than `highWater` entries wait for the store (the producer should pause),
   * and `false` once fewer than a fifth of that are left.
   */
  readonly onPressure?: (high: boolean) => void
  /** Buffered entries that count as too many (default 50,000). */
  readonly highWater?: number
}

export interface RunLog {
  /** Buffers one entry. */
  readonly append: (level: LogLevel, message: string) => void
  /** The seq of the newest entry appended (0 before any). */
  readonly lastSeq: () => number
  /** Flushes everything appended so far. */
  readonly flush: Effect.Effect<void>
  /** Stops the flusher once everything appended so far is stored. */
  readonly close: Effect.Effect<void>
}

/** Entries written per statement when flushing a large backlog. */
const MAX_PER_STATEMENT = 1000
/** Entries taken per transaction. */
const MAX_PER_FLUSH = 20_000
/** Once the log is closed, failed writes retried before the rest is given up. */
const MAX_FAILURES_AFTER_CLOSE = 8

// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is what is replaced
const NUL = /\u0000/g
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g

/** PostgreSQL text holds neither NUL nor half a surrogate pair; both engines store the same text. */
export const sanitizeMessage = (message: string): string => {
  let out = message.includes("\u0000") ? message.replace(NUL, "\uFFFD") : message
  LONE_SURROGATE.lastIndex = 0
  if (LONE_SURROGATE.test(out)) out = out.replace(LONE_SURROGATE, "\uFFFD")
  return out
}

/** Starts a run's log and its flusher (a fiber in the caller's scope). */
export const makeRunLog = (options: RunLogOptions) =>
  Effect.gen(function* () {
    const batchSize = options.batchSize ?? 1000
    const flushMs = options.flushMs ?? 100
    let pending: Array<LogTuple> = []
    let nextSeq = options.firstSeq
    let lastMs = options.notBefore ?? 0
    let lastIso = new Date(lastMs).toISOString()
    let closed = false
    let wake: (() => void) | null = null
    let failures = 0
    let failuresSinceClose = 0
    const highWater = options.highWater ?? 50_000
    let pressed = false
    const relieve = (): void => {
      if (pressed && pending.length < highWater / 5) {
        pressed = false
        options.onPressure?.(false)
      }
    }
    const lock = yield* Effect.makeSemaphore(1)

    const append = (level: LogLevel, message: string): void => {
      const now = Date.now()
      if (now > lastMs) {
        lastMs = now
        lastIso = new Date(now).toISOString()
      }
      pending.push([nextSeq++, lastIso, level, sanitizeMessage(message)])
      if (pending.length >= batchSize && wake !== null) wake()
      if (!pressed && pending.length > highWater) {
        pressed = true
        options.onPressure?.(true)
      }
    }

    const writeBatch = (batch: ReadonlyArray<LogTuple>) => {
      if (batch.length <= MAX_PER_STATEMENT) return options.write(batch)
      const chunks: Array<ReadonlyArray<LogTuple>> = []
      for (let i = 0; i < batch.length; i += MAX_PER_STATEMENT) chunks.push(batch.slice(i, i + MAX_PER_STATEMENT))
      return options.transaction(Effect.forEach(chunks, options.write, { discard: true }))
    }

    /** Writes what is buffered; on failure puts it back and waits a little before the next try. */
    const flushOnce = lock.withPermits(1)(
      Effect.suspend(() => {
        if (pending.length === 0) return Effect.void
        const batch = pending.length <= MAX_PER_FLUSH ? pending : pending.slice(0, MAX_PER_FLUSH)
        pending = batch === pending ? [] : pending.slice(MAX_PER_FLUSH)
        relieve()
        return writeBatch(batch).pipe(
          Effect.tap(() =>
            Effect.sync(() => {
              failures = 0
            })
          ),
          Effect.catchAll((error) =>
            Effect.suspend(() => {
              pending = batch.concat(pending)
              failures += 1
              if (closed) failuresSinceClose += 1
              const pause = Effect.sleep(Math.min(5_000, 100 * 2 ** Math.min(failures, 6)))
              return failures === 1
                ? Effect.zipRight(
                    Effect.logWarning(`storing run log entries failed, retrying: ${error.message}`),
                    pause
                  )
                : pause
            })
          ),
          Effect.asVoid
        )
      })
    )

    /** Everything buffered, stored. Once closed, a store that keeps failing is given up on. */
    const drain: Effect.Effect<void> = Effect.suspend(() => {
      if (pending.length === 0) return Effect.void
      if (closed && failuresSinceClose >= MAX_FAILURES_AFTER_CLOSE) {
        const dropped = pending.length
        pending = []
        return Effect.logError(`dropping ${dropped} run log entries: the store keeps failing`)
      }
      return Effect.zipRight(flushOnce, drain)
    })

    const waitForWork = Effect.async<void>((resume) => {
      if (closed || pending.length >= batchSize) return resume(Effect.void)
      const done = () => {
        clearTimeout(timer)
        wake = null
        resume(Effect.void)
      }
      const timer = setTimeout(done, flushMs)
      wake = done
      return Effect.sync(() => {
        clearTimeout(timer)
        wake = null
      })
    })

    const stopped = yield* Deferred.make<void>()
    const loop: Effect.Effect<void> = Effect.suspend(() => {
      if (closed) return Effect.zipRight(drain, Deferred.succeed(stopped, undefined))
      return waitForWork.pipe(Effect.zipRight(flushOnce), Effect.zipRight(loop))
    })
    const fiber = yield* Effect.forkScoped(loop)

    return {
      append,
      lastSeq: () => nextSeq - 1,
      flush: drain,
      close: Effect.suspend(() => {
        closed = true
        if (wake !== null) wake()
        return Effect.zipRight(Deferred.await(stopped), Fiber.interrupt(fiber))
      })
    } satisfies RunLog
  })
