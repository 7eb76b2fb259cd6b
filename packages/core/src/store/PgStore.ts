/**
 * The PostgreSQL store over one `pg` pool. Hot statements run as named prepared statements
 * (parsed once per connection), and none holds a connection past the answer timeout. A small pool
 * of its own backs an `@effect/sql` `PgClient` for the migrator.
 */

import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Context, Effect, Exit, FiberRef, Layer, Option } from "effect"
import pg from "pg"
import { toStoreError } from "./errors.js"
import {
  afterCommit,
  collectAfterCommit,
  type SqlParam,
  type Statement,
  type Store,
  StoreError,
  StoreTag,
  statement,
  transactionHooks
} from "./Store.js"
import { type Call, drive, fromOutcome, outcomeExit, type Work } from "./Unit.js"

export interface PgStoreConfig {
  readonly url: string
  readonly maxConnections?: number
  /** How long a statement or a transaction may hold a pooled connection (default {@link DEFAULT_ANSWER_TIMEOUT_MS}). */
  readonly answerTimeoutMs?: number
}

/**
 * A PostgreSQL that stops answering (frozen, or cut off without a reset, as in a failover) would
 * otherwise hold each request and its connection until TCP gives up, hours later. A statement or
 * a transaction that holds its connection longer than this fails as "unavailable" (a 503), and
 * the connection is dropped from the pool, so the service recovers as soon as PostgreSQL answers.
 */
export const DEFAULT_ANSWER_TIMEOUT_MS = 10_000

/** The connection of the transaction the current fiber is in. */
const TransactionClient = FiberRef.unsafeMake<Option.Option<pg.PoolClient>>(Option.none())

// COUNT/SUM answer int8 or numeric; every such figure here fits a JS number.
const types = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === 20 || oid === 1700
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format ?? "text")) as pg.CustomTypesConfig["getTypeParser"]
}

/** pg reads `query_timeout` from a query's config; its type declarations leave it out. */
interface TimedQuery extends pg.QueryConfig {
  readonly query_timeout: number
}

const CHANNEL = "taskwright_changes"

interface ChangeListener {
  readonly epoch: () => number
  /** Calls `listener` when another process (or this one) appends events, and after every (re)connection. */
  readonly onEvents: (listener: () => void) => void
  readonly close: () => Promise<void>
}

const EVENTS_CHANNEL = "taskwright_events"

/** How often the listening connection checks that PostgreSQL still answers. */
const HEARTBEAT_MS = 5_000

/**
 * A dedicated connection that LISTENs for other processes' change announcements. While it is not
 * listening (not yet connected, or lost and reconnecting), `epoch()` moves on every call, so
 * caches that rely on it are bypassed instead of trusted.
 */
const listenForChanges = (url: string, answerTimeoutMs: number, connectTimeoutMs: number): ChangeListener => {
  const eventListeners: Array<() => void> = []
  const eventsAppended = () => {
    for (const listener of eventListeners) listener()
  }
  let counter = 0
  let live = false
  let closed = false
  let client: pg.Client | undefined
  let retry: ReturnType<typeof setTimeout> | undefined
  let heartbeat: ReturnType<typeof setInterval> | undefined
  const reconnectSoon = () => {
    live = false
    if (heartbeat !== undefined) clearInterval(heartbeat)
    heartbeat = undefined
    if (closed || retry !== undefined) return
    retry = setTimeout(() => {
      retry = undefined
      client?.end().catch(() => {})
      connect()
    }, 1_000)
    retry.unref()
  }
  const connect = () => {
    const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: connectTimeoutMs })
    client = c
    // A connection already replaced may still end or fail late (a frozen server): not this one's news.
    const lost = () => {
      if (client === c) reconnectSoon()
    }
    c.on("notification", (message) => {
      if (message.channel === EVENTS_CHANNEL) eventsAppended()
      else counter++
    })
    c.on("error", lost)
    c.on("end", lost)
    c.connect()
      .then(() => c.query(`LISTEN ${CHANNEL}; LISTEN ${EVENTS_CHANNEL}`))
      .then(() => {
        if (client !== c || closed) return
        counter++
        live = true
        // A listening connection sends nothing, so it would not notice a server that stopped
        // answering, and caches would go on trusting it: it asks every few seconds.
        heartbeat = setInterval(() => {
          const ping: TimedQuery = { text: "SELECT 1", query_timeout: answerTimeoutMs }
          c.query(ping).catch(lost)
        }, HEARTBEAT_MS)
        heartbeat.unref()
        // Whatever was appended while this connection was away is read now.
        eventsAppended()
      }, lost)
  }
  connect()
  return {
    epoch: () => (live ? counter : ++counter),
    onEvents: (listener) => {
      eventListeners.push(listener)
    },
    close: async () => {
      closed = true
      live = false
      if (retry !== undefined) clearTimeout(retry)
      if (heartbeat !== undefined) clearInterval(heartbeat)
      await client?.end().catch(() => {})
    }
  }
}

const announce = statement("changes.announce", `SELECT pg_notify('${CHANNEL}', '') AS sent`)

export const makeStore = (pool: pg.Pool, changes: ChangeListener = listenerDisabled): Store => {
  const prepared = (stmt: Statement<unknown>, params: ReadonlyArray<SqlParam>): pg.QueryConfig => ({
    name: stmt.name,
    text: stmt.pg,
    values: params as Array<SqlParam>
  })

  const query = <Row>(stmt: Statement<Row>, params: ReadonlyArray<SqlParam>) =>
    Effect.withFiberRuntime<pg.QueryResult, StoreError>((fiber) => {
      const client: pg.Pool | pg.PoolClient = Option.getOrElse(fiber.getFiberRef(TransactionClient), () => pool)
      return Effect.tryPromise({ try: () => client.query(prepared(stmt, params)), catch: toStoreError })
    })

  const transaction = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreError, R> =>
    Effect.withFiberRuntime((fiber) => {
      if (Option.isSome(fiber.getFiberRef(TransactionClient))) return self
      const hooks: Array<() => void> = []
      let committed = false
      return Effect.acquireUseRelease(
        Effect.tryPromise({
          try: async () => {
            const client = await pool.connect()
            try {
              await client.query("BEGIN")
            } catch (cause) {
              client.release(true)
              throw cause
            }
            return client
          },
          catch: toStoreError
        }),
        (client) =>
          collectAfterCommit(Effect.locally(self, TransactionClient, Option.some(client)), hooks).pipe(
            // The commit is part of the work: a commit PostgreSQL refuses is the transaction's failure.
            Effect.zipLeft(Effect.tryPromise({ try: () => client.query("COMMIT"), catch: toStoreError })),
            Effect.zipLeft(
              Effect.sync(() => {
                committed = true
                for (const hook of hooks) hook()
              })
            )
          ),
        (client) => (committed ? Effect.sync(() => client.release()) : Effect.promise(() => rollbackAndRelease(client)))
      )
    })

  const executeOn =
    (client: pg.PoolClient) =>
    (call: Call): Promise<unknown> =>
      client
        .query(prepared(call.stmt, call.params))
        .then((r) => (call.kind === "all" ? r.rows : call.kind === "get" ? r.rows[0] : (r.rowCount ?? 0)))

  /** A unit of work in a transaction of its own: a pooled connection, BEGIN, its statements, COMMIT. */
  const runUnit = async <A, E>(work: () => Work<A, E>): Promise<Exit.Exit<A, E | StoreError>> => {
    let client: pg.PoolClient
    try {
      client = await pool.connect()
    } catch (cause) {
      return Exit.fail(toStoreError(cause))
    }
    try {
      await client.query("BEGIN")
    } catch (cause) {
      client.release(true)
      return Exit.fail(toStoreError(cause))
    }
    const hooks: Array<() => void> = []
    const outcome = await drive(work(), executeOn(client), hooks)
    if (outcome._tag === "Done") {
      try {
        // The commit is part of the work: a commit PostgreSQL refuses is the unit's failure.
        await client.query("COMMIT")
      } catch (cause) {
        await rollbackAndRelease(client)
        return Exit.fail(toStoreError(cause))
      }
      client.release()
      for (const hook of hooks) hook()
      return Exit.succeed(outcome.value)
    }
    await rollbackAndRelease(client)
    return outcomeExit(outcome)
  }

  const unit = <A, E>(work: () => Work<A, E>): Effect.Effect<A, E | StoreError> =>
    Effect.withFiberRuntime((fiber) => {
      const current = fiber.getFiberRef(TransactionClient)
      // Inside a transaction of this fiber: its connection, its commit hooks.
      if (Option.isSome(current)) {
        return fromOutcome(drive(work(), executeOn(current.value), transactionHooks(fiber) ?? []))
      }
      return Effect.flatten(Effect.promise(() => runUnit(work)))
    })

  return {
    dialect: "pg",
    all: <Row>(stmt: Statement<Row>, params: ReadonlyArray<SqlParam> = []) =>
      Effect.map(query(stmt, params), (r) => r.rows as ReadonlyArray<Row>),
    allNow: <Row>(stmt: Statement<Row>, params: ReadonlyArray<SqlParam> = []) =>
      pool.query(prepared(stmt, params)).then(
        (r) => Exit.succeed(r.rows as ReadonlyArray<Row>),
        (cause: unknown) => Exit.fail(toStoreError(cause))
      ),
    get: <Row>(stmt: Statement<Row>, params: ReadonlyArray<SqlParam> = []) =>
      Effect.map(query(stmt, params), (r) => r.rows[0] as Row | undefined),
    run: (stmt, params = []) => Effect.map(query(stmt, params), (r) => r.rowCount ?? 0),
    transaction,
    unit,
    unitNow: runUnit,
    afterCommit,
    changes: { epoch: changes.epoch, announce: Effect.asVoid(query(announce, [])) },
    onEventsAppended: changes.onEvents
  }
}

const rollbackAndRelease = (client: pg.PoolClient): Promise<void> =>
  client.query("ROLLBACK").then(
    () => client.release(),
    (cause: unknown) => client.release(cause instanceof Error ? cause : true)
  )

/**
 * Ends every connection of `pool` that has been out of the pool longer than `answerTimeoutMs`:
 * its statement (or a transaction's) then fails as "Connection terminated", and the pool drops
 * it. One timer for the pool: pg's own per-statement `query_timeout` cost about 60 µs of CPU per
 * page of 50 tasks, a third of the statement's (alternating runs of 20,000 statements).
 */
const watchAnswers = (pool: pg.Pool, answerTimeoutMs: number): (() => void) => {
  const outSince = new Map<pg.PoolClient, number>()
  pool.on("acquire", (client) => outSince.set(client, Date.now()))
  pool.on("release", (_error, client) => outSince.delete(client))
  const timer = setInterval(
    () => {
      const overdue = Date.now() - answerTimeoutMs
      for (const [client, since] of outSince) {
        if (since > overdue) continue
        outSince.delete(client)
        client.end().catch(() => {})
      }
    },
    Math.max(50, answerTimeoutMs / 4)
  )
  timer.unref()
  return () => clearInterval(timer)
}

// Without a listener every call is a new epoch: nothing is ever served from a cache.
let disabledEpoch = 0
const listenerDisabled: ChangeListener = {
  epoch: () => ++disabledEpoch,
  onEvents: () => {},
  close: () => Promise.resolve()
}

/** The PostgreSQL store and an `@effect/sql` client on the same pool; the pool ends with the layer's scope. */
export const layer = (config: PgStoreConfig): Layer.Layer<StoreTag | SqlClient.SqlClient, StoreError> =>
  Layer.unwrapScoped(
    Effect.gen(function* () {
      const answerTimeoutMs = config.answerTimeoutMs ?? DEFAULT_ANSWER_TIMEOUT_MS
      const connectTimeoutMs = Math.min(5_000, answerTimeoutMs)
      const pool = yield* Effect.acquireRelease(
        Effect.sync(() => {
          // A server that does not answer at all (not even a refusal) must not hold requests forever.
          const pool = new pg.Pool({
            connectionString: config.url,
            max: config.maxConnections ?? 10,
            connectionTimeoutMillis: connectTimeoutMs,
            types
          })
          // When the server ends a connection (a restart, an administrator, a dropped database),
          // an "error" event unheard is an uncaught exception that ends the process: the pool's
          // for an idle connection, the connection's own for one out of the pool between
          // statements. The pool discards the connection (the latter's next statement fails) and
          // opens another when needed.
          pool.on("error", () => {})
          pool.on("connect", (client) => client.on("error", () => {}))
          return { pool, stopWatching: watchAnswers(pool, answerTimeoutMs) }
        }),
        ({ pool, stopWatching }) =>
          Effect.promise(() => {
            stopWatching()
            return pool.end()
          })
      ).pipe(Effect.map(({ pool }) => pool))
      // The migrator's own pool, outside the answer timeout: a migration may rightly take longer
      // (an index built on a large table). It connects only when a migration runs.
      const migratorPool = yield* Effect.acquireRelease(
        Effect.sync(() => {
          const migrator = new pg.Pool({ connectionString: config.url, max: 2, types })
          migrator.on("error", () => {})
          return migrator
        }),
        (migrator) => Effect.promise(() => migrator.end())
      )
      // Fail fast with a clear error when the server is not there.
      yield* Effect.tryPromise({
        try: () => pool.query("SELECT 1"),
        catch: (cause) => new StoreError({ kind: "unavailable", message: "cannot reach PostgreSQL", cause })
      })
      const sqlLayer = PgClient.layerFromPool({ acquire: Effect.succeed(migratorPool) }).pipe(
        Layer.mapError((cause: SqlError) => new StoreError({ kind: "unavailable", message: cause.message, cause }))
      )
      const changes = yield* Effect.acquireRelease(
        Effect.sync(() => listenForChanges(config.url, answerTimeoutMs, connectTimeoutMs)),
        (listener) => Effect.promise(() => listener.close())
      )
      return Layer.merge(Layer.succeedContext(Context.make(StoreTag, makeStore(pool, changes))), sqlLayer)
    })
  )
