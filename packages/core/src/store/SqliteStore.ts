/**
 * The embedded store: one better-sqlite3 connection in WAL mode. Statements are prepared once
 * and kept by the driver. The same connection backs an `@effect/sql` `SqlClient` (for the
 * migrator and cold paths), so an in-memory database works as well as a file.
 */
import { mkdirSync } from "node:fs"
import { dirname } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import type * as SqlConnection from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as SqlStatement from "@effect/sql/Statement"
import Database from "better-sqlite3"
import { Context, Effect, Exit, Layer, Runtime, Stream } from "effect"
import { toStoreError } from "./errors.js"
import { checkpointInBackground, fileDescriptorSlot } from "./SqliteCheckpointer.js"
import {
  afterCommit,
  collectAfterCommit,
  LATER,
  type SqlParam,
  type Statement,
  type Store,
  StoreError,
  StoreTag,
  transactionHooks
} from "./Store.js"
import { type Call, drive, type Outcome, outcomeExit, type Work } from "./Unit.js"

export interface SqliteStoreConfig {
  /** A file path, or `:memory:`. */
  readonly filename: string
}

/**
 * Pages of log between the request connection's own checkpoints (about 160 MiB of log). Measured on
 * the bench's seed, alternating with 10,000 (SQLite's default is 1,000): POST 6,782 against 6,371
 * req/s with p99 14.7 against 15.8 ms, with two labels 5,893 against 5,634 (15.6 against 16.5 ms),
 * DELETE 10,099 against 9,817 (11.6 against 12.7 ms). Fewer pages waited on those fsyncs more often
 * (at 2,000 and 4,000 about 6,150 req/s); more pages leave more log on disk for a while.
 */
const LOG_PAGES = 40_000

/** The size the log file is cut back to when it restarts; above {@link LOG_PAGES} pages of 4 KiB. */
const LOG_SIZE_LIMIT = 192 * 1024 * 1024

const openDatabase = (filename: string) =>
  Effect.try({
    try: () => {
      if (filename !== ":memory:") mkdirSync(dirname(filename), { recursive: true })
      const db = new Database(filename)
      db.pragma("journal_mode = WAL")
      db.pragma("synchronous = NORMAL")
      db.pragma("foreign_keys = ON")
      db.pragma("busy_timeout = 5000")
      if (filename !== ":memory:") {
        // Checkpoints mostly run beside the requests (SqliteCheckpointer). This connection's own
        // only finishes what the worker copied already and lets the log start again, but it waits
        // on three fsyncs to do so (about 2 ms): under steady writes, once per LOG_PAGES pages.
        db.pragma(`wal_autocheckpoint = ${LOG_PAGES}`)
        // Above the log's usual size, so that a restart never truncates it (truncating a log that
        // outgrew this under a burst costs tens of ms); the worker empties it when writes stop.
        db.pragma(`journal_size_limit = ${LOG_SIZE_LIMIT}`)
      }
      return db
    },
    catch: (cause) => new StoreError({ kind: "unavailable", message: `cannot open SQLite database ${filename}`, cause })
  })

/** How often another process's writes are looked for (`changes.epoch`). */
const DATA_VERSION_INTERVAL_MS = 5

type RowBuilder = (values: ReadonlyArray<unknown>) => unknown

/**
 * better-sqlite3 builds each row object from C++, one named property at a time, and that costs
 * more than the query itself on the hot paths (measured: most of `Statement.all` on a task read).
 * Readers are therefore run in raw mode (rows as arrays) and turned into objects by a function
 * compiled once per statement: an object literal, so every row of a statement shares one shape.
 * The keys are the statement's own column names, quoted with `JSON.stringify`, never user input.
 */
const rowBuilder = (columns: ReadonlyArray<{ readonly name: string }>): RowBuilder => {
  const fields = columns.map((c, i) => `${JSON.stringify(c.name)}: values[${i}]`).join(", ")
  return new Function("values", `return { ${fields} }`) as RowBuilder
}

interface Prepared {
  readonly statement: Database.Statement
  /** For statements that return rows. */
  readonly build: RowBuilder | undefined
  /** The statement changes the database (an `INSERT ... RETURNING` both writes and returns rows). */
  readonly writes: boolean
}

/** Builds the {@link Store} over an open connection; `wrote` hears of every write that changed something. */
export const makeStore = (db: Database.Database, wrote: () => void = () => {}): Store => {
  const prepared = new Map<string, Prepared>()
  const prepare = (stmt: Statement<unknown>): Prepared => {
    let p = prepared.get(stmt.name)
    if (p === undefined) {
      const statement = db.prepare(stmt.sqlite)
      const writes = !statement.readonly
      p = statement.reader
        ? { statement: statement.raw(true), build: rowBuilder(statement.columns()), writes }
        : { statement, build: undefined, writes }
      prepared.set(stmt.name, p)
    }
    return p
  }
  const rows = (p: Prepared, params: ReadonlyArray<SqlParam>): Array<unknown> => {
    const values = p.statement.all(...params) as Array<ReadonlyArray<unknown>>
    if (p.writes && values.length > 0) wrote()
    const build = p.build
    if (build === undefined) return values
    const out = new Array<unknown>(values.length)
    for (let i = 0; i < values.length; i++) out[i] = build(values[i] as ReadonlyArray<unknown>)
    return out
  }
  const row = (p: Prepared, params: ReadonlyArray<SqlParam>): unknown => {
    // A write (`INSERT ... RETURNING`) is stepped to its end: SQLite runs its automatic checkpoint
    // only then, and `get()` stops at the first row.
    const values = (p.writes ? p.statement.all(...params)[0] : p.statement.get(...params)) as
      | ReadonlyArray<unknown>
      | undefined
    if (p.writes && values !== undefined) wrote()
    return values === undefined || p.build === undefined ? values : p.build(values)
  }
  // One transaction at a time. A transaction's body may cross an async boundary, so others wait
  // their turn in line; the lock is handed straight to the next in line. Written by hand rather
  // than with a Semaphore: it is on every write, and this costs a fraction of `withPermits`.
  let locked = false
  const waiting: Array<() => void> = []
  // Uninterruptible: a waiter is never abandoned in the line (the wait is one transaction long).
  const lock: Effect.Effect<void> = Effect.uninterruptible(
    Effect.suspend(() => {
      if (!locked) {
        locked = true
        return Effect.void
      }
      return Effect.async<void>((resume) => {
        waiting.push(() => resume(Effect.void))
      })
    })
  )
  const unlock = () => {
    const next = waiting.shift()
    if (next === undefined) locked = false
    else next()
  }
  let transactionOpen = false
  const begin = db.prepare("BEGIN IMMEDIATE")
  const commit = db.prepare("COMMIT")
  const rollback = db.prepare("ROLLBACK")

  const attempt = <A>(f: () => A): Exit.Exit<A, StoreError> => {
    try {
      return Exit.succeed(f())
    } catch (cause) {
      return Exit.fail(toStoreError(cause))
    }
  }

  // Statements are synchronous, so outside a transaction they run at once. While another
  // fiber holds a transaction open (across an async boundary) they wait for it to finish,
  // so they never land inside someone else's transaction.
  const exec = <A>(f: () => A): Effect.Effect<A, StoreError> =>
    Effect.suspend(() =>
      transactionOpen
        ? Effect.withFiberRuntime<A, StoreError>((fiber) =>
            transactionHooks(fiber) !== null
              ? attempt(f)
              : Effect.flatMap(lock, () => {
                  const result = attempt(f)
                  unlock()
                  return result
                })
          )
        : attempt(f)
    )

  /** Ends the open transaction as `exit` says; a COMMIT that fails rolls back and fails the transaction. */
  const end = <A, E>(exit: Exit.Exit<A, E>, hooks: ReadonlyArray<() => void>): Exit.Exit<A, E | StoreError> => {
    transactionOpen = false
    try {
      if (!db.inTransaction) return exit
      if (Exit.isFailure(exit)) {
        rollback.run()
        return exit
      }
      try {
        commit.run()
      } catch (cause) {
        if (db.inTransaction) rollback.run()
        return Exit.fail(toStoreError(cause))
      }
      for (const hook of hooks) hook()
      return exit
    } finally {
      unlock()
    }
  }

  const transaction = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreError, R> =>
    Effect.withFiberRuntime((fiber) => {
      if (transactionHooks(fiber) !== null) return self
      const hooks: Array<() => void> = []
      return Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(lock, () => {
          try {
            begin.run()
          } catch (cause) {
            unlock()
            return Effect.fail(toStoreError(cause))
          }
          transactionOpen = true
          return Effect.flatMap(Effect.exit(restore(collectAfterCommit(self, hooks))), (exit) => end(exit, hooks))
        })
      )
    })

  const execute = (call: Call): unknown => {
    const p = prepare(call.stmt)
    if (call.kind === "all") return rows(p, call.params)
    if (call.kind === "get") return row(p, call.params)
    const changes = p.statement.run(...call.params).changes
    if (changes > 0) wrote()
    return changes
  }

  /** A unit of work in a transaction of its own, the lock held: begun, run and ended in one synchronous step. */
  const runUnit = <A, E>(work: () => Work<A, E>): Exit.Exit<A, E | StoreError> => {
    try {
      begin.run()
    } catch (cause) {
      unlock()
      return Exit.fail(toStoreError(cause))
    }
    const hooks: Array<() => void> = []
    return end(outcomeExit(drive(work(), execute, hooks) as Outcome<A, E>), hooks)
  }

  const unit = <A, E>(work: () => Work<A, E>): Effect.Effect<A, E | StoreError> =>
    Effect.withFiberRuntime((fiber) => {
      // Inside a transaction of this fiber: its statements, its commit hooks.
      const outer = transactionHooks(fiber)
      if (outer !== null) return outcomeExit(drive(work(), execute, outer) as Outcome<A, E>)
      if (!locked) {
        locked = true
        return runUnit(work)
      }
      // Another fiber's transaction is open across an async boundary: after it, in line.
      return Effect.flatMap(lock, () => runUnit(work))
    })

  // Another process's commit bumps `data_version`. Reading it costs about as much as a small query
  // (2-3 us a request when read every millisecond under load), so it is read at most every 5 ms: a
  // write made elsewhere (the CLI revoking a key) is seen within 5 ms.
  const dataVersion = db.prepare("PRAGMA data_version").pluck()
  let version = Number(dataVersion.get())
  let versionReadAt = 0
  const epoch = () => {
    const now = performance.now()
    if (now - versionReadAt >= DATA_VERSION_INTERVAL_MS) {
      versionReadAt = now
      version = Number(dataVersion.get())
    }
    return version
  }

  return {
    dialect: "sqlite",
    changes: { epoch, announce: Effect.void },
    // One service process per SQLite file: this process's own commits are all there is.
    onEventsAppended: () => {},
    all: <Row>(stmt: Statement<Row>, params: ReadonlyArray<SqlParam> = []) =>
      exec(() => rows(prepare(stmt), params) as ReadonlyArray<Row>),
    allNow: <Row>(stmt: Statement<Row>, params: ReadonlyArray<SqlParam> = []) =>
      transactionOpen ? LATER : attempt(() => rows(prepare(stmt), params) as ReadonlyArray<Row>),
    get: <Row>(stmt: Statement<Row>, params: ReadonlyArray<SqlParam> = []) =>
      exec(() => row(prepare(stmt), params) as Row | undefined),
    run: (stmt, params = []) =>
      exec(() => {
        const changes = prepare(stmt).statement.run(...params).changes
        if (changes > 0) wrote()
        return changes
      }),
    transaction,
    unit,
    unitNow: <A, E>(work: () => Work<A, E>) => {
      if (locked) return LATER
      locked = true
      return runUnit(work)
    },
    afterCommit
  }
}

/** An `@effect/sql` client on the same connection, for the migrator and cold paths. */
const makeSqlClient = (db: Database.Database, wrote: () => void = () => {}) => {
  const run = (sql: string, params: ReadonlyArray<unknown>, raw: boolean) =>
    Effect.try({
      try: () => {
        const s = db.prepare(sql)
        if (s.reader) return s.all(...params) as ReadonlyArray<unknown>
        const result = s.run(...params)
        if (result.changes > 0) wrote()
        return raw ? [result] : []
      },
      catch: (cause) => new SqlError({ cause, message: "Failed to execute statement" })
    })
  const connection: SqlConnection.Connection = {
    execute: (sql, params, transformRows) =>
      Effect.map(run(sql, params, false), (rows) => (transformRows ? transformRows(rows as Array<object>) : rows)),
    executeRaw: (sql, params) => run(sql, params, true),
    executeValues: (sql, params) =>
      Effect.try({
        try: () => {
          const s = db.prepare(sql)
          if (s.reader) return s.raw(true).all(...params) as ReadonlyArray<ReadonlyArray<unknown>>
          s.run(...params)
          return []
        },
        catch: (cause) => new SqlError({ cause, message: "Failed to execute statement" })
      }),
    executeUnprepared: (sql, params, transformRows) =>
      Effect.map(run(sql, params, false), (rows) => (transformRows ? transformRows(rows as Array<object>) : rows)),
    executeStream: () => Stream.die("streaming is not supported by the embedded store")
  }
  const semaphore = Effect.unsafeMakeSemaphore(1)
  return SqlClient.make({
    acquirer: semaphore.withPermits(1)(Effect.succeed(connection)),
    compiler: SqlStatement.makeCompilerSqlite(),
    spanAttributes: [["db.system.name", "sqlite"]]
  })
}

/** The SQLite store and an `@effect/sql` client sharing its connection; closed with the layer's scope. */
export const layer = (config: SqliteStoreConfig): Layer.Layer<StoreTag | SqlClient.SqlClient, StoreError> =>
  Layer.scopedContext(
    Effect.gen(function* () {
      // Taken before the connection, given back after it closed (SqliteCheckpointer).
      const file = config.filename === ":memory:" ? undefined : yield* fileDescriptorSlot(config.filename)
      const db = yield* Effect.acquireRelease(openDatabase(config.filename), (db) => Effect.sync(() => db.close()))
      const runtime = yield* Effect.runtime<never>()
      const checkpointer =
        file === undefined
          ? undefined
          : yield* checkpointInBackground(config.filename, file, (message) =>
              Runtime.runFork(runtime)(Effect.logWarning(`SQLite checkpoint failed: ${message}`))
            )
      const sql = yield* makeSqlClient(db, checkpointer?.wrote).pipe(Effect.provide(Reactivity.layer))
      return Context.make(StoreTag, makeStore(db, checkpointer?.wrote)).pipe(Context.add(SqlClient.SqlClient, sql))
    })
  )
