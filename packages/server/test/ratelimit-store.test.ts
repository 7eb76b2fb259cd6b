/**
 * The rate limiter's stores, on their own: fixed windows, clocks that disagree, pruning, and
 * exactness when many hits arrive at once (the SQL store against real SQLite and PostgreSQL).
 */
import { afterAll, assert, beforeAll, describe, it, layer, type Vitest } from "@effect/vitest"
import { RateLimiter, settingsFromEnv, TaskwrightConfig } from "@taskwright/core"
import {
  addressSubject,
  clientAddress,
  MemoryRateLimitStore,
  RateLimitStore,
  type RateLimitStoreShape,
  SqlRateLimitStore,
  StoreLive,
  StoreTag,
  statement
} from "@taskwright/core/internal"
import { createPgDatabase } from "@taskwright/testing"
import { Effect, Fiber, Layer } from "effect"
import pg from "pg"

const W = 60_000
const LIMIT = 1_000
const T0 = 1_800_000_000_000 - (1_800_000_000_000 % W)

const storeLayer = (databaseUrl: string) =>
  SqlRateLimitStore.layer.pipe(
    Layer.provideMerge(StoreLive),
    Layer.provide(TaskwrightConfig.layer(settingsFromEnv({}, { databaseUrl })))
  )

// The database outlives the layer built on it: made before, dropped after (see the suite below).
let pgUrl = ""
const PgDatabase = Layer.unwrapEffect(Effect.sync(() => storeLayer(pgUrl)))

/** The contract every store keeps. */
const contract = (
  it: Vitest.MethodsNonLive<RateLimitStore>,
  make: Effect.Effect<RateLimitStoreShape, never, RateLimitStore>
) => {
  it.effect("counts hits per bucket within a window", () =>
    Effect.gen(function* () {
      const store = yield* make
      const counts: Array<number> = []
      for (let i = 0; i < 5; i++) counts.push((yield* store.hit("k:one", T0, W, LIMIT)).count)
      assert.deepStrictEqual(counts, [1, 2, 3, 4, 5])
      assert.strictEqual((yield* store.hit("k:two", T0, W, LIMIT)).count, 1)
      assert.strictEqual((yield* store.hit("k:one", T0, W, LIMIT)).windowStart, T0)
    })
  )

  it.effect("starts again in the next window", () =>
    Effect.gen(function* () {
      const store = yield* make
      for (let i = 0; i < 3; i++) yield* store.hit("k:roll", T0, W, LIMIT)
      const next = yield* store.hit("k:roll", T0 + W, W, LIMIT)
      assert.deepStrictEqual(next, { count: 1, windowStart: T0 + W })
      assert.strictEqual((yield* store.hit("k:roll", T0 + W, W, LIMIT)).count, 2)
    })
  )

  it.effect("counts a hit from a clock that is behind in the current window", () =>
    Effect.gen(function* () {
      const store = yield* make
      yield* store.hit("k:skew", T0 + 2 * W, W, LIMIT)
      const late = yield* store.hit("k:skew", T0 + W, W, LIMIT)
      assert.deepStrictEqual(late, { count: 2, windowStart: T0 + 2 * W })
    })
  )

  it.effect("is exact when 500 hits arrive at once", () =>
    Effect.gen(function* () {
      const store = yield* make
      const hits = yield* Effect.all(
        Array.from({ length: 500 }, () => store.hit("k:crowd", T0, W, LIMIT)),
        { concurrency: "unbounded" }
      )
      const counts = hits.map((h) => h.count).sort((a, b) => a - b)
      assert.deepStrictEqual(
        counts,
        Array.from({ length: 500 }, (_, i) => i + 1)
      )
    })
  )
}

describe("MemoryRateLimitStore", () => {
  layer(MemoryRateLimitStore.layer)((it) => {
    it.effect("answers synchronously (the limiter's fast path)", () =>
      Effect.gen(function* () {
        const store = yield* RateLimitStore
        assert.isFunction(store.hitSync)
        assert.strictEqual(store.hitSync?.("k:sync", T0, W)?.count, 1)
      })
    )
  })
  describe("contract", () => {
    layer(MemoryRateLimitStore.layer)((it) => contract(it, RateLimitStore))
  })
})

const countOf = statement<{ count: number | string }>(
  "test.ratelimit.count",
  "SELECT count FROM rate_limits WHERE bucket = ?"
)

/** A SQL store's limiter over the real store, its statements counted on their way to the database. */
const countedLimiter = Effect.gen(function* () {
  const store = yield* StoreTag
  const statements = { sent: 0 }
  const all: typeof store.all = (stmt, params) => {
    statements.sent++
    return store.all(stmt, params)
  }
  const limiter = yield* Effect.provideService(SqlRateLimitStore.make, StoreTag, { ...store, all })
  return { store, limiter, statements }
})

/**
 * A client flooding past its budget: once the database has counted a bucket past its limit, its
 * further hits in that window are refused here, with no statement sent; the next window counts in
 * the database again.
 */
const pastTheLimit = (it: Vitest.MethodsNonLive<StoreTag>) =>
  it.effect("a bucket past its limit is refused without a trip to the database until its window ends", () =>
    Effect.gen(function* () {
      const { store, limiter, statements } = yield* countedLimiter
      const limit = 5
      const stored = () => Effect.map(store.all(countOf, ["k:flood"]), (rows) => rows.map((r) => Number(r.count))[0])
      const counts: Array<number> = []
      for (let i = 0; i < limit + 1; i++) counts.push((yield* limiter.hit("k:flood", T0, W, limit)).count)
      assert.deepStrictEqual(counts.slice(0, limit), [1, 2, 3, 4, 5])
      assert.isAbove(counts[limit] ?? 0, limit)
      const before = yield* stored()
      statements.sent = 0
      // 200 more, some at once, some one by one, some through the limiter's synchronous path.
      const flood = yield* Effect.all(
        Array.from({ length: 100 }, () => limiter.hit("k:flood", T0, W, limit)),
        { concurrency: "unbounded" }
      )
      for (let i = 0; i < 50; i++) flood.push(yield* limiter.hit("k:flood", T0, W, limit))
      for (let i = 0; i < 50; i++) {
        const now = limiter.hitSync?.("k:flood", T0, W)
        assert.isDefined(now)
        if (now !== undefined) flood.push(now)
      }
      // A caller whose clock is behind is refused too: the bucket counts in the newer window.
      flood.push(yield* limiter.hit("k:flood", T0 - W, W, limit))
      assert.strictEqual(statements.sent, 0)
      assert.isTrue(flood.every((h) => h.count > limit && h.windowStart === T0))
      assert.strictEqual(yield* stored(), before)
      // Another bucket, and the same bucket's next window, still go to the database.
      assert.deepStrictEqual(yield* limiter.hit("k:other", T0, W, limit), { count: 1, windowStart: T0 })
      assert.deepStrictEqual(yield* limiter.hit("k:flood", T0 + W, W, limit), { count: 1, windowStart: T0 + W })
      assert.strictEqual(statements.sent, 2)
      // Forgotten with its window.
      assert.isAbove(limiter.hitSync?.("k:flood", T0, W)?.count ?? 0, limit)
      yield* limiter.prune(T0 + W)
      assert.isUndefined(limiter.hitSync?.("k:flood", T0, W))
    })
  )

describe("SqlRateLimitStore on SQLite", () => {
  layer(storeLayer(":memory:"))((it) => {
    contract(it, RateLimitStore)
    pastTheLimit(it)
  })
})

/**
 * 50 hits one by one (so the bucket leases), then `n` more, ten a turn of the event loop, while
 * another connection holds the bucket's row for 100 ms, as a busy database would: every trip for
 * it waits meanwhile. Answers the `n` hits' counts; `warmed` runs between the two.
 */
const burstWhileSlow = (store: RateLimitStoreShape, bucket: string, n: number, warmed: () => void = () => {}) =>
  Effect.gen(function* () {
    for (let i = 0; i < 50; i++) yield* store.hit(bucket, T0, W, LIMIT)
    warmed()
    const holder = new pg.Client({ connectionString: pgUrl })
    yield* Effect.promise(async () => {
      await holder.connect()
      await holder.query("BEGIN")
      await holder.query("SELECT count FROM rate_limits WHERE bucket = $1 FOR UPDATE", [bucket])
    })
    const fibers = []
    for (let i = 0; i < n; i++) {
      fibers.push(yield* Effect.fork(store.hit(bucket, T0, W, LIMIT)))
      if (i % 10 === 9) yield* Effect.async<void>((resume) => void setImmediate(() => resume(Effect.void)))
    }
    yield* Effect.promise(async () => {
      await new Promise((resolve) => setTimeout(resolve, 100))
      await holder.query("COMMIT")
      await holder.end()
    })
    return (yield* Effect.forEach(fibers, Fiber.join)).map((h) => h.count)
  })

describe("SqlRateLimitStore on PostgreSQL", () => {
  let db: Awaited<ReturnType<typeof createPgDatabase>> | undefined
  beforeAll(async () => {
    db = await createPgDatabase()
    pgUrl = db.url
  })
  afterAll(async () => {
    await db?.drop()
  })
  layer(PgDatabase, { timeout: 30_000 })((it) => {
    contract(it, RateLimitStore)
    it.effect("forgets windows that ended", () =>
      Effect.gen(function* () {
        const store = yield* RateLimitStore
        yield* store.hit("k:old", T0 - 10 * W, W, LIMIT)
        yield* store.prune(T0 - 5 * W)
        assert.strictEqual((yield* store.hit("k:old", T0 - 10 * W, W, LIMIT)).count, 1)
      })
    )

    it.effect("a busy bucket leases counts: taken here without a round trip, still each handed out once", () =>
      Effect.gen(function* () {
        const store = yield* RateLimitStore
        const counts: Array<number> = []
        for (let i = 0; i < 50; i++) counts.push((yield* store.hit("k:busy", T0, W, LIMIT)).count)
        assert.deepStrictEqual(
          counts,
          Array.from({ length: 50 }, (_, i) => i + 1)
        )
        // Reserved ahead: the next hits are answered at once.
        const now = store.hitSync?.("k:busy", T0, W)
        assert.strictEqual(now?.count, 51)
        // A new window leases nothing until it is busy.
        assert.strictEqual(store.hitSync?.("k:busy", T0 + W, W), undefined)
      })
    )

    it.effect("a burst while the database is slow strands at most one lease of counts", () =>
      Effect.gen(function* () {
        const store = yield* RateLimitStore
        const counts = yield* burstWhileSlow(store, "k:burst", 300)
        assert.strictEqual(new Set(counts).size, 300)
        // 350 hits: what one lease holds beyond them (at most 256 counts) is all a burst may leave unused.
        assert.isAtMost(Math.max(...counts), 350 + 256)
      })
    )

    it.effect(
      "a busy bucket refills its lease before it runs dry: a burst over a slow database writes a few times, not once a turn",
      () =>
        Effect.gen(function* () {
          const { limiter, statements } = yield* countedLimiter
          const counts = yield* burstWhileSlow(limiter, "k:refill", 500, () => {
            statements.sent = 0
          })
          assert.strictEqual(new Set(counts).size, 500)
          // 50 turns of the event loop: the hits that found the lease spent waited for its refill.
          assert.isAtMost(statements.sent, 6)
        })
    )

    pastTheLimit(it)

    it.effect("two processes leasing from one budget admit exactly the limit, never more", () =>
      Effect.gen(function* () {
        const limit = 300
        // Two stores over one database, as two server processes have: each with leases of its own.
        const a = yield* SqlRateLimitStore.make
        const b = yield* SqlRateLimitStore.make
        const counts: Array<number> = []
        for (let round = 0; round < limit; round++) {
          // Now one at a time, now both at once, as requests come.
          const pair = yield* Effect.all([a.hit("k:shared", T0, W, limit), b.hit("k:shared", T0, W, limit)], {
            concurrency: round % 3 === 0 ? "unbounded" : 1
          })
          counts.push(...pair.map((h) => h.count))
        }
        const admitted = counts.filter((c) => c <= limit)
        assert.strictEqual(admitted.length, limit)
        assert.strictEqual(new Set(admitted).size, limit)
      })
    )
  })
})

describe("RateLimiter", () => {
  const limiter = RateLimiter.Default.pipe(
    Layer.provide(MemoryRateLimitStore.layer),
    Layer.provide(
      TaskwrightConfig.layer(
        settingsFromEnv(
          { TASKWRIGHT_RATE_LIMIT: "3", TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "2" },
          { databaseUrl: ":memory:" }
        )
      )
    )
  )
  layer(limiter)((it) => {
    it.effect("answers allowed, remaining, reset and retry-after per hit", () =>
      Effect.gen(function* () {
        const rl = yield* RateLimiter
        const states = yield* Effect.all(Array.from({ length: 4 }, () => rl.consume(rl.policies.authenticated, "s1")))
        assert.deepStrictEqual(
          states.map((s) => [s.allowed, s.limit, s.remaining]),
          [
            [true, 3, 2],
            [true, 3, 1],
            [true, 3, 0],
            [false, 3, 0]
          ]
        )
        const now = Date.now() / 1000
        const last = states[3]
        assert.isDefined(last)
        if (last === undefined) return
        assert.isTrue(last.reset > now && last.reset <= Math.ceil(now) + 60)
        assert.isTrue(last.retryAfter >= 1 && last.retryAfter <= 60)
        // Budgets are per subject and per policy.
        assert.isTrue((yield* rl.consume(rl.policies.authenticated, "s2")).allowed)
        assert.strictEqual((yield* rl.consume(rl.policies.anonymous, "s1")).remaining, 1)
      })
    )
  })
})

describe("client addresses", () => {
  it("reads X-Forwarded-For only for trusted hops, from the right", () => {
    assert.strictEqual(clientAddress("10.0.0.1", "1.2.3.4", 0), "10.0.0.1")
    assert.strictEqual(clientAddress("10.0.0.1", "1.2.3.4", 1), "1.2.3.4")
    assert.strictEqual(clientAddress("10.0.0.1", "9.9.9.9, 1.2.3.4", 1), "1.2.3.4")
    assert.strictEqual(clientAddress("10.0.0.1", "9.9.9.9, 1.2.3.4, 10.0.0.2", 2), "1.2.3.4")
    assert.strictEqual(clientAddress("10.0.0.1", "not-an-ip", 1), "10.0.0.1")
    assert.strictEqual(clientAddress(undefined, undefined, 1), "unknown")
  })
  it("folds IPv4-mapped addresses and counts IPv6 per /64", () => {
    assert.strictEqual(addressSubject("::ffff:127.0.0.1"), "127.0.0.1")
    assert.strictEqual(addressSubject("203.0.113.9"), "203.0.113.9")
    assert.strictEqual(addressSubject("2001:db8:1:2::1"), "2001:db8:1:2::/64")
    assert.strictEqual(addressSubject("2001:0db8:0001:0002:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::/64")
    assert.strictEqual(addressSubject("::1"), "0:0:0:0::/64")
    assert.strictEqual(addressSubject("fe80::1%eth0"), "fe80:0:0:0::/64")
  })
})
