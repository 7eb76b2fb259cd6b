/**
 * Rate-limit counters in the store, shared by every server process on it. One row per bucket.
 *
 * Hits that arrive in the same turn of the event loop are written together: one atomic
 * `INSERT ... SELECT ... ON CONFLICT DO UPDATE ... RETURNING` adds each bucket's hits and
 * answers its new count, and the hits of a bucket take the counts below it in arrival order.
 * The database's row lock serialises concurrent statements (of this process and of others), so
 * every hit sees an exact count, at the price of one round trip per batch rather than per
 * request. Rows are locked in bucket order, so two processes' batches cannot deadlock.
 */
import { Effect, Layer } from "effect"
import { type StoreError, StoreTag, statement } from "../store/Store.js"
import { type Hit, RateLimitStore, type RateLimitStoreShape } from "./RateLimitStore.js"

const q = {
  hits: statement<{ bucket: string; count: number | string; window_start: number | string }>(
    "ratelimit.hits",
    `INSERT INTO rate_limits (bucket, window_start, count)
     SELECT json_extract(value, '$.b'), json_extract(value, '$.w'), json_extract(value, '$.n')
     FROM json_each(?) WHERE true ORDER BY json_extract(value, '$.b')
     ON CONFLICT (bucket) DO UPDATE SET
       count = CASE WHEN rate_limits.window_start >= excluded.window_start
                    THEN rate_limits.count + excluded.count ELSE excluded.count END,
       window_start = MAX(rate_limits.window_start, excluded.window_start)
     RETURNING bucket, count, window_start`,
    `INSERT INTO rate_limits (bucket, window_start, count)
     SELECT b, w, n FROM json_to_recordset($1::json) AS x(b text, w bigint, n bigint) ORDER BY b
     ON CONFLICT (bucket) DO UPDATE SET
       count = CASE WHEN rate_limits.window_start >= EXCLUDED.window_start
                    THEN rate_limits.count + EXCLUDED.count ELSE EXCLUDED.count END,
       window_start = GREATEST(rate_limits.window_start, EXCLUDED.window_start)
     RETURNING bucket, count, window_start`
  ),
  prune: statement("ratelimit.prune", "DELETE FROM rate_limits WHERE window_start < ?")
}

type Resume = (effect: Effect.Effect<Hit, StoreError>) => void

interface Bucket {
  windowStart: number
  readonly waiters: Array<Resume>
}

/** The store-backed counters over the configured store. */
export const make = Effect.map(StoreTag, (store): RateLimitStoreShape => {
  let pending = new Map<string, Bucket>()
  let scheduled = false

  const flush = () => {
    scheduled = false
    const batch = pending
    pending = new Map()
    const rows = [...batch].map(([b, bucket]) => ({ b, w: bucket.windowStart, n: bucket.waiters.length }))
    Effect.runCallback(store.all(q.hits, [JSON.stringify(rows)]), {
      onExit: (exit) => {
        if (exit._tag === "Failure") {
          const failed = Effect.failCause(exit.cause)
          for (const bucket of batch.values()) for (const resume of bucket.waiters) resume(failed)
          return
        }
        for (const row of exit.value) {
          const bucket = batch.get(row.bucket)
          if (bucket === undefined) continue
          batch.delete(row.bucket)
          const count = Number(row.count)
          const windowStart = Number(row.window_start)
          const first = count - bucket.waiters.length + 1
          for (const [i, resume] of bucket.waiters.entries()) resume(Effect.succeed({ count: first + i, windowStart }))
        }
        // A row the database did not return (it never happens) must not leave a request waiting.
        for (const bucket of batch.values()) for (const resume of bucket.waiters) resume(Effect.die("no count"))
      }
    })
  }

  return {
    hit: (bucket, windowStart) =>
      Effect.async<Hit, StoreError>((resume) => {
        const b = pending.get(bucket)
        if (b === undefined) pending.set(bucket, { windowStart, waiters: [resume] })
        else {
          // A caller whose clock is behind counts in the newer window, as a single hit would.
          if (windowStart > b.windowStart) b.windowStart = windowStart
          b.waiters.push(resume)
        }
        if (!scheduled) {
          scheduled = true
          setImmediate(flush)
        }
      }),
    prune: (before) => Effect.asVoid(store.run(q.prune, [before]))
  }
})

export const layer: Layer.Layer<RateLimitStore, never, StoreTag> = Layer.effect(RateLimitStore, make)
