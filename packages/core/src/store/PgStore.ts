/**
 * The PostgreSQL store over one `pg` pool. Hot statements run as named prepared statements
 * (parsed once per connection); the same pool backs an `@effect/sql` `PgClient` for the
 * migrator and cold paths.
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
}

/** The connection of the transaction the current fiber is in. */
const TransactionClient = FiberRef.unsafeMake<Option.Option<pg.PoolClient>>(Option.none())

// COUNT/SUM answer int8 or numeric; every such figure here fits a JS number.
const types = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === 20 || oid === 1700
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format ?? "text")) as pg.CustomTypesConfig["getTypeParser"]
}

const CHANNEL = "taskwright_changes"

interface ChangeListener {
  readonly epoch: () => number
  /** Calls `listener` when another process (or this one) appends events, and after every (re)connection. */
  readonly onEvents: (listener: () => void) => void
  readonly close: () => Promise<void>
}

const EVENTS_CHANNEL = "taskwright_events"

/**
 * A dedicated connection that LISTENs for other processes' change announcements. While it is not
 * listening (not yet connected, or lost and reconnecting), `epoch()` moves on every call, so
 * caches that rely on it are bypassed instead of trusted.
 */
const listenForChanges = (url: string): ChangeListener => {
  const eventListeners: Array<() => void> = []
  const eventsAppended = () => {
    for (const listener of eventListeners) listener()
  }
  let counter = 0
  let live = false
  let closed = false
  let client: pg.Client | undefined
  let retry: ReturnType<typeof setTimeout> | undefined
  const reconnectSoon = () => {
    live = false
    if (closed || retry !== undefined) return
    retry = setTimeout(() => {
      retry = undefined
      client?.end().catch(() => {})
      connect()
    }, 1_000)
    retry.unref()
  }
  const connect = () => {
    const c = new pg.Client({ connectionString: url })
    client = c
    c.on("notification", (message) => {
      if (message.channel === EVENTS_CHANNEL) eventsAppended()
      else counter++
    })
    c.on("error", reconnectSoon)
    c.on("end", reconnectSoon)
    c.connect()
      .then(() => c.query(`LISTEN ${CHANNEL}; LISTEN ${EVENTS_CHANNEL}`))
      .then(() => {
        counter++
        live = !closed
        // Whatever was appended while this connection was away is read now.
        eventsAppended()
      }, reconnectSoon)
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
      await client?.end().catch(() => {})
    }
  }
}

const announce = statement("changes.announce", `SELECT pg_notify('${CHANNEL}', '') AS sent`)

export const makeStore = (pool: pg.Pool, changes: ChangeListener = listenerDisabled): Store => {
  const query = <Row>(stmt: Statement<Row>, params: ReadonlyArray<SqlParam>) =>
    Effect.withFiberRuntime<pg.QueryResult, StoreError>((fiber) => {
      const client: pg.Pool | pg.PoolClient = Option.getOrElse(fiber.getFiberRef(TransactionClient), () => pool)
      return Effect.tryPromise({
        try: () => client.query({ name: stmt.name, text: stmt.pg, values: params as Array<SqlParam> }),
        catch: toStoreError
      })
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
        .query({ name: call.stmt.name, text: call.stmt.pg, values: call.params as Array<SqlParam> })
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
      pool.query({ name: stmt.name, text: stmt.pg, values: params as Array<SqlParam> }).then(
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
      const pool = yield* Effect.acquireRelease(
        Effect.sync(() => {
          // A server that does not answer at all (not even a refusal) must not hold requests forever.
          const pool = new pg.Pool({
            connectionString: config.url,
            max: config.maxConnections ?? 10,
            connectionTimeoutMillis: 5_000,
            types
          })
          // When the server ends an idle connection (a restart, an administrator, a dropped
          // database), the pool emits "error"; unheard, that is an uncaught exception that ends
          // the process. The pool discards the connection and opens another when needed.
          pool.on("error", () => {})
          return pool
        }),
        (pool) => Effect.promise(() => pool.end())
      )
      // Fail fast with a clear error when the server is not there.
      yield* Effect.tryPromise({
        try: () => pool.query("SELECT 1"),
        catch: (cause) => new StoreError({ kind: "unavailable", message: "cannot reach PostgreSQL", cause })
      })
      const sqlLayer = PgClient.layerFromPool({ acquire: Effect.succeed(pool) }).pipe(
        Layer.mapError((cause: SqlError) => new StoreError({ kind: "unavailable", message: cause.message, cause }))
      )
      const changes = yield* Effect.acquireRelease(
        Effect.sync(() => listenForChanges(config.url)),
        (listener) => Effect.promise(() => listener.close())
      )
      return Layer.merge(Layer.succeedContext(Context.make(StoreTag, makeStore(pool, changes))), sqlLayer)
    })
  )
