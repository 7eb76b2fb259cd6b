/**
 * Credential rows (an API key's, a session's, an access token's key) remembered by the SHA-256 of
 * their secret (a token's by its `jti`): every request authenticates, and a remembered row lets it
 * do so without a query, synchronously.
 *
 * A change to credentials (a revocation, a rotation, a logout) clears every cache of the store once
 * it has committed, and is announced to other processes, whose store epoch then moves and clears
 * theirs. Not before the commit: until then a concurrent lookup still reads the old row and could
 * remember it after a clear made inside the transaction, so a revoked credential would keep
 * working. A lookup that raced with a change is not remembered (the generation check).
 *
 * A change made outside the service (an operator demoting an admin or deleting a user in SQL) is
 * announced to nobody, so a row is trusted for {@link CREDENTIAL_FRESH_FOR_MS} at most, and a check
 * that must see the stored row as it is now (an event socket's periodic one) reads it
 * {@link readingFresh}.
 */
import { Effect, FiberRef } from "effect"
import type { Store, StoreError } from "../store/Store.js"

/** Rows remembered at most; past this a cache miss is simply not remembered. */
const CAPACITY = 10_000

/** How long a remembered row answers for the stored one: a change made in SQL counts within this. */
export const CREDENTIAL_FRESH_FOR_MS = 5_000

/** Set by {@link readingFresh}: lookups skip what is remembered (and remember what they read). */
const freshReads = FiberRef.unsafeMake(false)

/** Runs `effect` with every credential read from the store, none from memory. */
export const readingFresh = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.locally(effect, freshReads, true)

export interface CredentialCache<Row> {
  /** The remembered row for `hash`, if any and fresh: synchronous, for the request fast path. */
  readonly cached: (hash: string) => Row | undefined
  /** The row for `hash`: remembered, or read with `read` (and then remembered). */
  readonly lookup: (
    hash: string,
    read: Effect.Effect<Row | undefined, StoreError>
  ) => Effect.Effect<Row | undefined, StoreError>
  /** Runs a change to credentials, then forgets every remembered row of this store's caches, here and elsewhere. */
  readonly changing: <A>(change: Effect.Effect<A, StoreError>) => Effect.Effect<A, StoreError>
}

/** Each store's credential caches in this process, by their `forget`: a change clears them all. */
const cachesOfStore = new WeakMap<Store, Set<() => void>>()

const siblingsOf = (store: Store): Set<() => void> => {
  let group = cachesOfStore.get(store)
  if (group === undefined) {
    group = new Set()
    cachesOfStore.set(store, group)
  }
  return group
}

interface Remembered<Row> {
  readonly row: Row
  /** `Date.now()` when it was read from the store. */
  readonly readAt: number
}

export const makeCredentialCache = <Row>(store: Store): CredentialCache<Row> => {
  const rows = new Map<string, Remembered<Row>>()
  let generation = 0
  let seenEpoch = store.changes.epoch()
  const forget = () => {
    rows.clear()
    generation++
  }
  const siblings = siblingsOf(store)
  siblings.add(forget)
  const forgetAll = () => {
    for (const f of siblings) f()
  }
  const cached = (hash: string): Row | undefined => {
    const epoch = store.changes.epoch()
    if (epoch !== seenEpoch) {
      seenEpoch = epoch
      forget()
    }
    const remembered = rows.get(hash)
    if (remembered === undefined) return undefined
    if (Date.now() - remembered.readAt < CREDENTIAL_FRESH_FOR_MS) return remembered.row
    rows.delete(hash)
    return undefined
  }
  const readAndRemember = (hash: string, read: Effect.Effect<Row | undefined, StoreError>) =>
    Effect.suspend(() => {
      const before = generation
      const readAt = Date.now()
      return Effect.map(read, (row) => {
        if (row === undefined) rows.delete(hash)
        else if (before === generation && (rows.size < CAPACITY || rows.has(hash))) rows.set(hash, { row, readAt })
        return row
      })
    })
  return {
    cached,
    lookup: (hash, read) =>
      FiberRef.getWith(freshReads, (fresh) => {
        const found = fresh ? undefined : cached(hash)
        return found !== undefined ? Effect.succeed(found) : readAndRemember(hash, read)
      }),
    changing: (change) =>
      change.pipe(Effect.tap(() => Effect.zipRight(store.afterCommit(forgetAll), store.changes.announce)))
  }
}
