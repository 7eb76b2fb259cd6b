/**
 * Where fixed-window rate-limit counters live. The limiter asks one thing of a store: add a hit
 * to a bucket's window and say how many hits that window now holds, atomically, so that no more
 * than the limit is ever admitted however many requests arrive at once. Two implementations:
 * {@link MemoryRateLimitStore} (one process, microseconds) and {@link SqlRateLimitStore} (the
 * database, shared by every server process on it).
 */
import { Context, type Effect } from "effect"
import type { StoreError } from "../store/Store.js"

/** A bucket's window after a hit. */
export interface Hit {
  /** Hits in the window, this one included. */
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
  readonly hit: (bucket: string, windowStart: number, windowMs: number) => Effect.Effect<Hit, StoreError>
  /** Synchronous variant for stores that need no I/O: the limiter's fast path. */
  readonly hitSync?: (bucket: string, windowStart: number, windowMs: number) => Hit
  /** Forgets windows that ended before `before` (ms); called now and then by the limiter. */
  readonly prune: (before: number) => Effect.Effect<void, StoreError>
}

export class RateLimitStore extends Context.Tag("@taskwright/core/RateLimitStore")<
  RateLimitStore,
  RateLimitStoreShape
>() {}
