/**
 * Rate-limit counters in the store, shared by every server process on it. One row per bucket.
 *
 * Hits that arrive in the same turn of the event loop are written together: one atomic
 * `INSERT ... SELECT ... ON CONFLICT DO UPDATE ... RETURNING` adds each bucket's hits and
 * answers its new count, and the hits of a bucket take the counts below it in arrival order.
 * The database's row lock serialises concurrent statements (of this process and of others), so
 * every hit gets a count of its own, and a hit is admitted only when its count is within the
 * limit: never more than the limit is admitted, however many processes share the budget. Rows
 * are locked in bucket order, so two processes' batches cannot deadlock. On PostgreSQL the
 * statement commits without waiting for its log to reach the disk (`synchronous_commit` off for
 * it alone): a counter is not data worth a flush on the request path, and what a crash of the
 * database could lose is the last fraction of a second of counts.
 *
 * A busy bucket also takes a lease: the same statement reserves twice as many further counts as
 * the bucket used since its last refill (at most {@link LEASE_MAX}, and at most an
 * eighth of what was left of the budget), and the next hits take them here, synchronously, with
 * no round trip. A count is still handed out once, so the limit stays exact; what a lease costs is
 * that counts it holds when its process stops getting requests are not used by another process
 * in that window (at most an eighth of the rest of a budget per refill). A bucket has one
 * reserving trip under way at a time, so a burst cannot strand many leases' worth of counts and
 * refuse requests well below the limit; it starts when half of the lease's recent use is
 * left, before the lease runs dry, and hits that find the lease spent meanwhile wait for it
 * rather than each writing to the database (a write per turn of the event loop costs PostgreSQL
 * a commit each).
 *
 * A bucket the database has counted past its limit stays refused until its window ends (counts
 * only grow within a window), so this process answers its further hits there without a trip:
 * a client flooding past its budget, with a key or without one, costs the database nothing.
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
     SELECT b, w, n FROM json_to_recordset($1::json) AS x(b text, w bigint, n bigint),
       (SELECT set_config('synchronous_commit', 'off', true)) AS relaxed ORDER BY b
     ON CONFLICT (bucket) DO UPDATE SET
       count = CASE WHEN rate_limits.window_start >= EXCLUDED.window_start
                    THEN rate_limits.count + EXCLUDED.count ELSE EXCLUDED.count END,
       window_start = GREATEST(rate_limits.window_start, EXCLUDED.window_start)
     RETURNING bucket, count, window_start`
  ),
  prune: statement("ratelimit.prune", "DELETE FROM rate_limits WHERE window_start < ?")
}

type Resume = (effect: Effect.Effect<Hit, StoreError>) => void

/** Counts a lease reserves at most per trip to the database. */
const LEASE_MAX = 256

interface Bucket {
  windowStart: number
  limit: number
  /** The hits waiting for this trip's counts; none when the trip only refills a lease. */
  readonly waiters: Array<Resume>
}

/**
 * Counts of a bucket's window reserved by this process, handed out lowest first (several trips to
 * the database may be under way at once: each adds a range).
 */
interface Lease {
  readonly windowStart: number
  readonly ranges: Array<{ next: number; readonly last: number }>
  /** Counts the ranges still hold. */
  remaining: number
  /** The highest count the database gave this bucket here: what is left of the budget, as far as we know. */
  highest: number
  /** Counts handed out from leases since the last reserving trip: how big the next lease is. */
  used: number
  /** A trip reserving counts for this lease is under way. */
  reserving: boolean
  /** The bucket's limit, as its last hit gave it. */
  limit: number
  /** Hits that found the lease spent while it was being refilled: they take the refill's counts. */
  readonly queue: Array<Resume>
}

/** The store-backed counters over the configured store. */
export const make = Effect.map(StoreTag, (store): RateLimitStoreShape => {
  let pending = new Map<string, Bucket>()
  let scheduled = false
  const leases = new Map<string, Lease>()
  /** Buckets counted past their limit: the window and the highest count the database gave there. */
  const exhausted = new Map<string, Hit>()

  /** Remembers that `bucket` is past its limit in `windowStart`'s window (a newer window replaces an older). */
  const markExhausted = (bucket: string, count: number, windowStart: number) => {
    const known = exhausted.get(bucket)
    if (known === undefined || known.windowStart < windowStart) exhausted.set(bucket, { count, windowStart })
  }

  /**
   * How many counts beyond its waiters a bucket reserves: twice its use since the last refill (so
   * the next refill, started at half, comes back before the lease runs dry), within an eighth of
   * what its budget had left.
   */
  const leaseSize = (bucket: string, b: Bucket): number => {
    const lease = leases.get(bucket)
    if (lease === undefined || lease.windowStart < b.windowStart || lease.reserving) return 0
    const left = Math.floor((b.limit - lease.highest) / 8)
    return Math.max(0, Math.min(LEASE_MAX, 2 * (lease.used + b.waiters.length), left))
  }

  /** Keeps what a trip to the database reserved beyond its waiters. */
  const keep = (bucket: string, windowStart: number, limit: number, next: number, last: number) => {
    const lease = leases.get(bucket)
    if (lease === undefined || lease.windowStart < windowStart) {
      leases.set(bucket, {
        windowStart,
        ranges: next <= last ? [{ next, last }] : [],
        remaining: Math.max(0, last - next + 1),
        highest: last,
        used: 0,
        reserving: false,
        limit,
        queue: lease?.queue ?? []
      })
      return
    }
    lease.limit = limit
    if (windowStart < lease.windowStart) return
    if (next <= last) {
      lease.ranges.push({ next, last })
      lease.ranges.sort((x, y) => x.next - y.next)
      lease.remaining += last - next + 1
    }
    lease.highest = Math.max(lease.highest, last)
  }

  /** Adds a trip for `bucket` to the next batch: for a hit (`resume`), or to refill its lease. */
  const enqueue = (bucket: string, windowStart: number, limit: number, resume: Resume | undefined) => {
    const b = pending.get(bucket)
    if (b === undefined) pending.set(bucket, { windowStart, limit, waiters: resume === undefined ? [] : [resume] })
    else {
      // A caller whose clock is behind counts in the newer window, as a single hit would.
      if (windowStart > b.windowStart) b.windowStart = windowStart
      if (resume !== undefined) b.waiters.push(resume)
    }
    if (!scheduled) {
      scheduled = true
      setImmediate(flush)
    }
  }

  /** A trip reserving counts for `lease` starts: its use counts afresh from here (it sizes the next refill). */
  const refillStarted = (lease: Lease) => {
    lease.reserving = true
    lease.used = 0
  }

  /** Ends a bucket's reserving trip: the hits that waited for it take its counts, or make a trip of their own. */
  const refillEnded = (bucket: string) => {
    const lease = leases.get(bucket)
    if (lease === undefined) return
    lease.reserving = false
    const waiting = lease.queue.splice(0)
    for (const resume of waiting) {
      const hit = answeredHere(bucket, lease.windowStart)
      if (hit !== undefined) resume(Effect.succeed(hit))
      else enqueue(bucket, lease.windowStart, lease.limit, resume)
    }
  }

  const flush = () => {
    scheduled = false
    const batch = pending
    pending = new Map()
    const rows = [...batch]
      .map(([b, bucket]) => {
        const extra = leaseSize(b, bucket)
        return { b, w: bucket.windowStart, n: bucket.waiters.length + extra, extra }
      })
      .filter((row) => row.n > 0)
    if (rows.length === 0) return
    const extras = new Map(rows.map((r) => [r.b, r.extra]))
    for (const row of rows) {
      const lease = row.extra > 0 ? leases.get(row.b) : undefined
      if (lease !== undefined) refillStarted(lease)
    }
    Effect.runCallback(store.all(q.hits, [JSON.stringify(rows.map(({ b, w, n }) => ({ b, w, n })))]), {
      onExit: (exit) => {
        if (exit._tag === "Failure") {
          const failed = Effect.failCause(exit.cause)
          for (const bucket of batch.values()) for (const resume of bucket.waiters) resume(failed)
        } else {
          for (const row of exit.value) {
            const bucket = batch.get(row.bucket)
            if (bucket === undefined) continue
            batch.delete(row.bucket)
            const count = Number(row.count)
            const windowStart = Number(row.window_start)
            const extra = extras.get(row.bucket) ?? 0
            const first = count - bucket.waiters.length - extra + 1
            keep(row.bucket, windowStart, bucket.limit, first + bucket.waiters.length, count)
            if (count > bucket.limit) markExhausted(row.bucket, count, windowStart)
            for (const [i, resume] of bucket.waiters.entries())
              resume(Effect.succeed({ count: first + i, windowStart }))
          }
          // A row the database did not return (it never happens) must not leave a request waiting.
          for (const bucket of batch.values()) for (const resume of bucket.waiters) resume(Effect.die("no count"))
        }
        for (const row of rows) if (row.extra > 0) refillEnded(row.b)
      }
    })
  }

  /**
   * The next count of `bucket`'s lease, if it holds one for this window; a refill starts when a
   * half of the lease's recent use is left.
   */
  const leased = (bucket: string, windowStart: number): Hit | undefined => {
    const lease = leases.get(bucket)
    // Past its window (a caller whose clock is behind still counts in the lease's newer one), or spent.
    if (lease === undefined || lease.windowStart < windowStart) return undefined
    const range = lease.ranges[0]
    if (range === undefined) return undefined
    const count = range.next++
    if (range.next > range.last) lease.ranges.shift()
    lease.remaining--
    lease.used++
    if (!lease.reserving && lease.remaining * 2 <= lease.used && lease.highest < lease.limit) {
      enqueue(bucket, lease.windowStart, lease.limit, undefined)
    }
    return { count, windowStart: lease.windowStart }
  }

  /**
   * A hit counted without a trip: from the bucket's lease, or refused because the database has
   * already counted the bucket past its limit in this window (or a newer one: a caller whose clock
   * is behind counts there). A lease's counts go first: those within the limit are still admitted.
   */
  const answeredHere = (bucket: string, windowStart: number): Hit | undefined => {
    const hit = leased(bucket, windowStart)
    if (hit !== undefined) return hit
    const refused = exhausted.get(bucket)
    return refused !== undefined && refused.windowStart >= windowStart ? refused : undefined
  }

  return {
    hit: (bucket, windowStart, _windowMs, limit) =>
      Effect.suspend(() => {
        const hit = answeredHere(bucket, windowStart)
        if (hit !== undefined) return Effect.succeed(hit)
        return Effect.async<Hit, StoreError>((resume) => {
          const lease = leases.get(bucket)
          // Spent, and being refilled: wait for the refill rather than write a count of one's own.
          if (lease?.reserving && lease.windowStart >= windowStart) lease.queue.push(resume)
          else enqueue(bucket, windowStart, limit, resume)
        })
      }),
    hitSync: answeredHere,
    prune: (before) =>
      Effect.asVoid(store.run(q.prune, [before])).pipe(
        Effect.tap(() =>
          Effect.sync(() => {
            // A lease being refilled stays: hits may be waiting for it.
            for (const [bucket, lease] of leases)
              if (lease.windowStart < before && !lease.reserving) leases.delete(bucket)
            for (const [bucket, refused] of exhausted) if (refused.windowStart < before) exhausted.delete(bucket)
          })
        )
      )
  }
})

export const layer: Layer.Layer<RateLimitStore, never, StoreTag> = Layer.effect(RateLimitStore, make)
