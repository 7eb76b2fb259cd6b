/**
 * Rate-limit counters in the store, shared by every server process on it. One row per bucket;
 * a hit is a single atomic `INSERT ... ON CONFLICT DO UPDATE ... RETURNING`: the database's row
 * lock serialises concurrent hits, so the count each request sees is exact across processes.
 */
import { Effect, Layer } from "effect"
import { StoreTag, statement } from "../store/Store.js"
import { RateLimitStore, type RateLimitStoreShape } from "./RateLimitStore.js"

const q = {
  hit: statement<{ count: number | string; window_start: number | string }>(
    "ratelimit.hit",
    `INSERT INTO rate_limits (bucket, window_start, count) VALUES (?, ?, 1)
     ON CONFLICT (bucket) DO UPDATE SET
       count = CASE WHEN rate_limits.window_start >= excluded.window_start THEN rate_limits.count + 1 ELSE 1 END,
       window_start = MAX(rate_limits.window_start, excluded.window_start)
     RETURNING count, window_start`,
    `INSERT INTO rate_limits (bucket, window_start, count) VALUES ($1, $2, 1)
     ON CONFLICT (bucket) DO UPDATE SET
       count = CASE WHEN rate_limits.window_start >= EXCLUDED.window_start THEN rate_limits.count + 1 ELSE 1 END,
       window_start = GREATEST(rate_limits.window_start, EXCLUDED.window_start)
     RETURNING count, window_start`
  ),
  prune: statement("ratelimit.prune", "DELETE FROM rate_limits WHERE window_start < ?")
}

/** The store-backed counters over the configured store. */
export const make = Effect.map(
  StoreTag,
  (store): RateLimitStoreShape => ({
    hit: (bucket, windowStart) =>
      Effect.map(store.get(q.hit, [bucket, windowStart]), (row) => ({
        count: Number(row?.count ?? 1),
        windowStart: Number(row?.window_start ?? windowStart)
      })),
    prune: (before) => Effect.asVoid(store.run(q.prune, [before]))
  })
)

export const layer: Layer.Layer<RateLimitStore, never, StoreTag> = Layer.effect(RateLimitStore, make)
