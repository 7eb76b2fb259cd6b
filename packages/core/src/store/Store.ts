/**
 * The narrow seam between repositories and a database engine. Repositories are written once
 * against this interface; `SqliteStore` and `PgStore` implement it. Hot statements run as
 * driver-held prepared statements (better-sqlite3 statements, PostgreSQL named statements),
 * because `@effect/sql`'s per-statement machinery costs several times the query itself on
 * these paths; `@effect/sql` runs the migrations.
 */
import { Context, Data, type Effect } from "effect"

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

const toPgPlaceholders = (text: string): string => {
  let i = 0
  return text.replace(/\?/g, () => `$${++i}`)
}

/** Declares a statement; pass `pg` only where the dialects differ. */
export const statement = <Row = never>(name: string, sqlite: string, pg?: string): Statement<Row> => ({
  name,
  sqlite,
  pg: pg ?? toPgPlaceholders(sqlite)
})

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
  /** The first row, or `undefined`. */
  readonly get: <Row>(
    stmt: Statement<Row>,
    params?: ReadonlyArray<SqlParam>
  ) => Effect.Effect<Row | undefined, StoreError>
  /** Runs a write; answers the number of rows changed. */
  readonly run: (stmt: Statement<unknown>, params?: ReadonlyArray<SqlParam>) => Effect.Effect<number, StoreError>
  /** Runs `self` in one transaction (nested calls join the outer one). */
  readonly transaction: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | StoreError, R>
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

/** The store the services use, SQLite or PostgreSQL, chosen by configuration. */
export class StoreTag extends Context.Tag("@taskwright/core/Store")<StoreTag, Store>() {}
