import { StoreError } from "./Store.js"

interface DriverError {
  readonly code?: unknown
  readonly message?: unknown
}

const asDriverError = (cause: unknown): DriverError =>
  typeof cause === "object" && cause !== null ? (cause as DriverError) : {}

/** Classifies a better-sqlite3 or pg error; the driver's message stays in `cause`, never in a response. */
export const toStoreError = (cause: unknown): StoreError => {
  const { code } = asDriverError(cause)
  if (code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY" || code === "23505") {
    return new StoreError({ kind: "unique", message: "unique constraint violated", cause })
  }
  if (code === "SQLITE_CONSTRAINT_FOREIGNKEY" || code === "23503") {
    return new StoreError({ kind: "foreign_key", message: "foreign key constraint violated", cause })
  }
  if (code === "ECONNREFUSED" || code === "57P01" || code === "SQLITE_BUSY" || code === "SQLITE_CANTOPEN") {
    return new StoreError({ kind: "unavailable", message: "the store is unavailable", cause })
  }
  return new StoreError({ kind: "other", message: "store operation failed", cause })
}
