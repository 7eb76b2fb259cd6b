/**
 * The narrow seam between repositories and a database engine. Repositories are written once
 * against this interface; `SqliteStore` and `PgStore` implement it. Hot statements run as
 * driver-held prepared statements (better-sqlite3 statements, PostgreSQL named statements),
 * because `@effect/sql`'s per-statement machinery costs several times the query itself on
 * these paths; `@effect/sql` runs the migrations.
 */
import { Context, Data, Effect, Exit, FiberRef } from "effect"
import type { Work } from "./Unit.js"

export type Dialect = "sqlite" | "pg"
export type SqlParam = string | number | bigint | null

/**
 * One SQL statement with a stable name. The text uses `?` placeholders; the PostgreSQL text is
 * derived (`$1`, `$2`, ...) unless given. The name keys the prepared-statement caches, so two
 * different texts must never share a name.
 */
export interface Statement<Row> {
  readonly name: string
  readonly sqlite: string
  readonly pg: string
  /** Phantom: the row shape this statement returns. */
  readonly _row?: () => Row
}

/** `?` placeholders as PostgreSQL's `$1`, `$2`, ... */
export const toPgPlaceholders = (text: string): string => {
  let i = 0
  return text.replace(/\?/g, () => `$${++i}`)
}

/** Declares a statement; pass `pg` only where the dialects differ. */
export const statement = <Row = never>(name: string, sqlite: string, pg?: string): Statement<Row> => ({
  name,
  sqlite,
  pg: pg ?? toPgPlaceholders(sqlite)
})

/** The store cannot answer without a fiber now: ask it through an Effect. */
export const LATER: unique symbol = Symbol.for("@taskwright/core/Store/LATER")

/**
 * An answer given without a fiber: at once (an Exit: SQLite) or as one promise (PostgreSQL). The
 * hottest requests are answered so; the Effect path serves the rest and every other face.
 */
export type Direct<A, E> = Exit.Exit<A, E> | Promise<Exit.Exit<A, E>>

/**
 * A value already written as JSON, `A` being what the text parses to. SQLite writes a list's page
 * with its JSON functions (in C, in half the time of rows made into objects and stringified); the
 * HTTP dispatcher sends the text as it is.
 */
export class JsonText<A> {
  declare readonly parsesTo: A
  constructor(readonly text: string) {}
}

/** `f` applied to a direct answer's value. */
export const mapDirect = <A, E, B, E2>(answer: Direct<A, E>, f: (a: A) => Exit.Exit<B, E2>): Direct<B, E | E2> =>
  answer instanceof Promise ? answer.then((exit) => mapExit(exit, f)) : mapExit(answer, f)

const mapExit = <A, E, B, E2>(exit: Exit.Exit<A, E>, f: (a: A) => Exit.Exit<B, E2>): Exit.Exit<B, E | E2> =>
  exit._tag === "Success" ? f(exit.value) : Exit.failCause(exit.cause)

/** `f` of a direct answer's value, itself answered directly. */
export const flatMapDirect = <A, E, B, E2>(answer: Direct<A, E>, f: (a: A) => Direct<B, E2>): Direct<B, E | E2> =>
  answer instanceof Promise
    ? answer.then((exit) => (exit._tag === "Success" ? f(exit.value) : Exit.failCause(exit.cause)))
    : answer._tag === "Success"
      ? f(answer.value)
      : Exit.failCause(answer.cause)

/** Two direct answers as one (side by side on PostgreSQL's pool). */
export const bothDirect = <A, B, E>(a: Direct<A, E>, b: Direct<B, E>): Direct<readonly [A, B], E> =>
  a instanceof Promise || b instanceof Promise ? Promise.all([a, b]).then(([x, y]) => zipExits(x, y)) : zipExits(a, b)

const zipExits = <A, B, E>(a: Exit.Exit<A, E>, b: Exit.Exit<B, E>): Exit.Exit<readonly [A, B], E> =>
  a._tag === "Failure"
    ? Exit.failCause(a.cause)
    : b._tag === "Failure"
      ? Exit.failCause(b.cause)
      : Exit.succeed([a.value, b.value] as const)

/**
 * The rows of a statement run on its own, mapped by `f`: as an Effect (inside the caller's
 * transaction when there is one) and without a fiber (`now`; `LATER`: ask the Effect).
 */
export const effectAndNow = <Row, A>(
  store: Store,
  stmt: Statement<Row>,
  params: ReadonlyArray<SqlParam>,
  f: (rows: ReadonlyArray<Row>) => A
) => ({
  effect: Effect.map(store.all(stmt, params), f),
  now: (): Direct<A, StoreError> | typeof LATER => {
    const rows = store.allNow(stmt, params)
    return rows === LATER ? LATER : mapDirect(rows, (r) => Exit.succeed(f(r)))
  }
})

/** The direct answer of a pair such as {@link effectAndNow}'s, from its Effect when the store says `LATER`. */
export const directOrEffect = <A, E>(pair: {
  readonly effect: Effect.Effect<A, E>
  readonly now: () => Direct<A, E> | typeof LATER
}): Direct<A, E> => {
  const answer = pair.now()
  return answer === LATER ? Effect.runPromiseExit(pair.effect) : answer
}

/** A store failure. `unique`/`foreign_key` let services turn constraint violations into 409s. */
export class StoreError extends Data.TaggedError("StoreError")<{
  readonly kind: "unique" | "foreign_key" | "unavailable" | "other"
  readonly message: string
  readonly cause?: unknown
}> {}

export interface Store {
  readonly dialect: Dialect
  /** All rows of a query. */
  readonly all: <Row>(
    stmt: Statement<Row>,
    params?: ReadonlyArray<SqlParam>
  ) => Effect.Effect<ReadonlyArray<Row>, StoreError>
  /**
   * All rows of a read without a fiber ({@link Direct}): at once on SQLite, as a promise on
   * PostgreSQL; `LATER` while a transaction is open across an async boundary (then {@link all}).
   */
  readonly allNow: <Row>(
    stmt: Statement<Row>,
    params?: ReadonlyArray<SqlParam>
  ) => Direct<ReadonlyArray<Row>, StoreError> | typeof LATER
  /** The first row, or `undefined`. */
  readonly get: <Row>(
    stmt: Statement<Row>,
    params?: ReadonlyArray<SqlParam>
  ) => Effect.Effect<Row | undefined, StoreError>
  /** Runs a write; answers the number of rows changed. */
  readonly run: (stmt: Statement<unknown>, params?: ReadonlyArray<SqlParam>) => Effect.Effect<number, StoreError>
  /**
   * Runs a unit of work (`Unit.ts`) in one transaction, or in the current one when there is one:
   * the write path's statements without a fiber step each.
   */
  readonly unit: <A, E>(work: () => Work<A, E>) => Effect.Effect<A, E | StoreError>
  /**
   * {@link unit} run without a fiber ({@link Direct}); `LATER` while another transaction holds the
   * store (then {@link unit}).
   */
  readonly unitNow: <A, E>(work: () => Work<A, E>) => Direct<A, E | StoreError> | typeof LATER
  /** Runs `self` in one transaction (nested calls join the outer one). */
  readonly transaction: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | StoreError, R>
  /**
   * Runs `hook` once the current transaction has committed (not at all if it rolls back), or at
   * once outside a transaction: how a write tells others about what it wrote only when it is real.
   */
  readonly afterCommit: (hook: () => void) => Effect.Effect<void>
  /**
   * Calls `listener` when another process appended events (PostgreSQL `NOTIFY`), and after the
   * listening connection is (re)established: the cue to read the event log for what is new.
   */
  readonly onEventsAppended: (listener: () => void) => void
  /**
   * Lets in-memory caches notice writes made by other processes (another server on the same
   * PostgreSQL, or the CLI on the same SQLite file). `epoch()` moves whenever another process may
   * have changed cached data: on SQLite it is the file's `data_version`, on PostgreSQL a counter
   * of `NOTIFY taskwright_changes` messages (and it moves on every call while that listener is
   * down, so caches are bypassed rather than trusted). `announce` tells the other processes.
   */
  readonly changes: {
    readonly epoch: () => number
    readonly announce: Effect.Effect<void, StoreError>
  }
}

/** What the current transaction runs once it has committed; null outside a transaction. */
const AfterCommitHooks = FiberRef.unsafeMake<Array<() => void> | null>(null)

/** Runs `self` with a fresh list of after-commit hooks, which it answers with. */
export const collectAfterCommit = <A, E, R>(self: Effect.Effect<A, E, R>, hooks: Array<() => void>) =>
  Effect.locally(self, AfterCommitHooks, hooks)

/** The after-commit hooks of the transaction the fiber is in; null outside a transaction. */
export const transactionHooks = (fiber: { getFiberRef: <A>(ref: FiberRef.FiberRef<A>) => A }) =>
  fiber.getFiberRef(AfterCommitHooks)

/** {@link Store.afterCommit} for both stores: queued inside a transaction, run at once outside one. */
export const afterCommit = (hook: () => void): Effect.Effect<void> =>
  Effect.withFiberRuntime((fiber) => {
    const hooks = fiber.getFiberRef(AfterCommitHooks)
    if (hooks === null) hook()
    else hooks.push(hook)
    return Effect.void
  })

/** The store the services use, SQLite or PostgreSQL, chosen by configuration. */
export class StoreTag extends Context.Tag("@taskwright/core/Store")<StoreTag, Store>() {}
