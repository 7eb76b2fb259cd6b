import { StoreError } from "./Store.js"

interface DriverError {
  readonly code?: unknown
  readonly message?: unknown
}

const asDriverError = (cause: unknown): DriverError =>
  typeof cause === "object" && cause !== null ? (cause as DriverError) : {}

/** Socket errors of a connection that could not be made or was lost. */
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "EAI_AGAIN"
])

/**
 * The store is not there (PostgreSQL down, restarting, unreachable, or a SQLite file locked past the
 * busy timeout): a 503 the client may retry, not a bug. PostgreSQL's class 08 is "connection
 * exception", 57P01-57P03 a server shutting down or starting; `pg` reports a lost connection by
 * message only.
 */
const isUnavailable = (code: unknown, message: unknown): boolean => {
  if (typeof code === "string") {
    if (NETWORK_CODES.has(code) || code.startsWith("08") || /^57P0[123]$/.test(code)) return true
    if (code === "SQLITE_BUSY" || code === "SQLITE_CANTOPEN") return true
  }
  return (
    typeof message === "string" &&
    /Connection terminated|connection error and is not queryable|timeout exceeded when trying to connect|Client was closed/i.test(
      message
    )
  )
}

/** Classifies a better-sqlite3 or pg error; the driver's message stays in `cause`, never in a response. */
export const toStoreError = (cause: unknown): StoreError => {
  const { code } = asDriverError(cause)
  if (code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY" || code === "23505") {
    return new StoreError({ kind: "unique", message: "unique constraint violated", cause })
  }
  if (code === "SQLITE_CONSTRAINT_FOREIGNKEY" || code === "23503") {
    return new StoreError({ kind: "foreign_key", message: "foreign key constraint violated", cause })
  }
  if (isUnavailable(code, asDriverError(cause).message)) {
    return new StoreError({ kind: "unavailable", message: "the store is unavailable", cause })
  }
  return new StoreError({ kind: "other", message: "store operation failed", cause })
}
