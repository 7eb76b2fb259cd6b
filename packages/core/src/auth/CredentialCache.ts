/**
 * Credential rows (an API key's, a session's) remembered by the SHA-256 of their secret: every
 * request authenticates, and a remembered row lets it do so without a query, synchronously.
 *
 * A change to such credentials (a revocation, a rotation, a logout) clears the cache once it has
 * committed, and is announced to other processes, whose store epoch then moves and clears theirs.
 * Not before the commit: until then a concurrent lookup still reads the old row and could remember
 * it after a clear made inside the transaction, so a revoked credential would keep working. A
 * lookup that raced with a change is not remembered (the generation check).
 */
import { Effect } from "effect"
import type { Store, StoreError } from "../store/Store.js"

/** Rows remembered at most; past this a cache miss is simply not remembered. */
const CAPACITY = 10_000

export interface CredentialCache<Row> {
  /** The remembered row for `hash`, if any: synchronous, for the request fast path. */
  readonly cached: (hash: string) => Row | undefined
  /** The row for `hash`: remembered, or read with `read` (and then remembered). */
  readonly lookup: (
    hash: string,
    read: Effect.Effect<Row | undefined, StoreError>
  ) => Effect.Effect<Row | undefined, StoreError>
  /** Runs a change to credentials of this kind, then forgets every remembered row here and elsewhere. */
  readonly changing: <A>(change: Effect.Effect<A, StoreError>) => Effect.Effect<A, StoreError>
}

export const makeCredentialCache = <Row>(store: Store): CredentialCache<Row> => {
  const rows = new Map<string, Row>()
  let generation = 0
  let seenEpoch = store.changes.epoch()
  const forget = () => {
    rows.clear()
    generation++
  }
  const cached = (hash: string): Row | undefined => {
    const epoch = store.changes.epoch()
    if (epoch !== seenEpoch) {
      seenEpoch = epoch
      forget()
    }
    return rows.get(hash)
  }
  return {
    cached,
    lookup: (hash, read) =>
      Effect.suspend(() => {
        const found = cached(hash)
        if (found !== undefined) return Effect.succeed(found)
        const before = generation
        return Effect.map(read, (row) => {
          if (row !== undefined && before === generation && rows.size < CAPACITY) rows.set(hash, row)
          return row
        })
      }),
    changing: (change) =>
      change.pipe(Effect.tap(() => Effect.zipRight(store.afterCommit(forget), store.changes.announce)))
  }
}
