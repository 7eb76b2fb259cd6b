/**
 * Where fixed-window rate-limit counters live. The limiter asks one thing of a store: add a hit
 * to a bucket's window and give it a count of its own in that window, atomically, so that no more
 * than the limit (the hits counted within it) is ever admitted however many requests arrive at once. Two implementations:
 * {@link MemoryRateLimitStore} (one process, microseconds) and {@link SqlRateLimitStore} (the
 * database, shared by every server process on it).
 */
import { Context, type Effect } from "effect"
import type { StoreError } from "../store/Store.js"

/** A bucket's window after a hit. */
export interface Hit {
  /**
   * Hits in the window, this one included. Past the limit a store may stop counting and answer
   * the last count it knew (any count over the limit refuses the same).
   */
  readonly count: number
  /** When the window the hit was counted in started, ms since the epoch. */
  readonly windowStart: number
}

export interface RateLimitStoreShape {
  /**
   * Counts one hit for `bucket` in the window that starts at `windowStart` (a multiple of
   * `windowMs`). A stored window older than `windowStart` starts again from one; a newer one
   * (another process's clock ahead of ours) takes the hit.
   */
  readonly hit: (bucket: string, windowStart: number, windowMs: number, limit: number) => Effect.Effect<Hit, StoreError>
  /**
   * The limiter's fast path: the hit counted at once, without I/O, or `undefined` when this store
   * cannot do so now (then {@link hit}). The in-memory store always can; the database's can while
   * its process holds counts it reserved before, or once the bucket is past its limit in the window.
   */
  readonly hitSync?: (bucket: string, windowStart: number, windowMs: number) => Hit | undefined
  /** Forgets windows that ended before `before` (ms); called now and then by the limiter. */
  readonly prune: (before: number) => Effect.Effect<void, StoreError>
}

export class RateLimitStore extends Context.Tag("@taskwright/core/RateLimitStore")<
  RateLimitStore,
  RateLimitStoreShape
>() {}
