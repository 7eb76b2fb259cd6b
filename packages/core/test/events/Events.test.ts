/**
 * The event hub on the real stores (a SQLite file and a fresh PostgreSQL database), with the
 * interleavings that once duplicated or delayed events forced deterministically: the answer of
 * one statement (the log's bounds, or the hub's read) is held back while events are written, then
 * let go. Also the in-process faces: `subscribe` and `stream` refuse what HTTP refuses, a stream
 * whose consumer falls behind fails with `EventsOverflow`, a `since` the log no longer holds with
 * `EventsGone`.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { Actor, EventMessage, UserId } from "@taskwright/domain"
import { Cause, Deferred, Effect, Either, Exit, Fiber, FiberId, Layer, ManagedRuntime, Option, Stream } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { settingsFromEnv, TaskwrightConfig } from "../../src/Config.js"
import { Events, type Subscription } from "../../src/events/Events.js"
import { EventsRepo, eventStatements } from "../../src/events/EventsRepo.js"
import { migrate } from "../../src/store/migrations.js"
import * as SqliteStore from "../../src/store/SqliteStore.js"
import { type Statement, type Store, type StoreError, StoreTag, statement } from "../../src/store/Store.js"
import { createPgDatabase, dropPgDatabase, storeKinds } from "../stores.js"
import { until } from "../until.js"

/** One held answer: `reached` once the statement has answered, the answer handed on at `release`. */
interface Hold {
  readonly name: string
  readonly reached: Deferred.Deferred<void>
  readonly release: Deferred.Deferred<void>
}

/** Holds the answer of the next run of a statement; the store itself runs it as ever. */
class Holds {
  next: Hold | undefined
  hold(name: string): Hold {
    const hold = {
      name,
      reached: Deferred.unsafeMake<void>(FiberId.none),
      release: Deferred.unsafeMake<void>(FiberId.none)
    }
    this.next = hold
    return hold
  }
  around<A>(stmt: Statement<unknown>, answer: Effect.Effect<A, StoreError>): Effect.Effect<A, StoreError> {
    const hold = this.next
    if (hold === undefined || hold.name !== stmt.name) return answer
    this.next = undefined
    return answer.pipe(Effect.zipLeft(Deferred.succeed(hold.reached, undefined)), Effect.zipLeft(hold.release))
  }
}

// Decided at each run, not when the effect is made: a repository builds some effects once.
const withHolds = (store: Store, holds: Holds): Store => ({
  ...store,
  get: (stmt, params) => Effect.suspend(() => holds.around(stmt as Statement<unknown>, store.get(stmt, params))),
  all: (stmt, params) => Effect.suspend(() => holds.around(stmt as Statement<unknown>, store.all(stmt, params)))
})

const actor = (userId: string, scopes: ReadonlyArray<string> = ["admin"]): Actor =>
  ({
    userId: userId as UserId,
    scopes: new Set(scopes),
    credential: { kind: "in_process", id: `in_process:${userId}`, expiresAt: null }
  }) as Actor

const admin = actor("usr_admin0000000000")

const rawInsert = statement(
  "test.rawEvent",
  "INSERT INTO events (type, owner_id, run_id, data, created_at) VALUES ('task.created', ?, NULL, ?, ?)"
)
const newest = statement<{ id: number | null }>("test.newest", "SELECT MAX(id) AS id FROM events")
const backdate = statement("test.backdate", "UPDATE events SET created_at = '2000-01-01T00:00:00.000Z' WHERE id <= ?")
const clear = statement("test.clear", "DELETE FROM events")

describe.each(storeKinds)("the event hub on %s", (kind) => {
  const holds = new Holds()
  const dir = mkdtempSync(join(tmpdir(), "tw-events-hub-"))
  let pgDatabaseUrl = ""
  let runtime: ManagedRuntime.ManagedRuntime<Events | StoreTag, unknown>

  beforeAll(async () => {
    let base: Layer.Layer<StoreTag, unknown>
    if (kind === "postgres") {
      pgDatabaseUrl = await createPgDatabase("tw_events")
      const Pg = await import("../../src/store/PgStore.js")
      base = Layer.tap(Pg.layer({ url: pgDatabaseUrl }), (ctx) => Effect.orDie(Effect.provide(migrate, ctx)))
    } else {
      base = Layer.tap(SqliteStore.layer({ filename: join(dir, "events.db") }), (ctx) =>
        Effect.orDie(Effect.provide(migrate, ctx))
      )
    }
    const held = Layer.effect(
      StoreTag,
      Effect.map(StoreTag, (store) => withHolds(store, holds))
    ).pipe(Layer.provide(base))
    const settings = settingsFromEnv({}, { dataDir: dir, databaseUrl: ":memory:" })
    runtime = ManagedRuntime.make(
      Events.Default.pipe(
        Layer.provideMerge(EventsRepo.Default),
        Layer.provideMerge(held),
        Layer.provide(TaskwrightConfig.layer(settings))
      )
    )
    await runtime.runtime()
  })
  afterAll(async () => {
    await runtime?.dispose()
    rmSync(dir, { recursive: true, force: true })
    if (kind === "postgres") await dropPgDatabase(pgDatabaseUrl)
  })

  const run = <A, E>(effect: Effect.Effect<A, E, Events | StoreTag>) =>
    runtime.runPromise(
      effect.pipe(
        Effect.tapDefect((c) => Effect.sync(() => console.log("DEFECT", require("node:util").inspect(c, { depth: 5 }))))
      )
    )

  /** Appends one event per title, each in a transaction of its own as a change does; answers their ids. */
  const write = (...titles: ReadonlyArray<string>) =>
    run(
      Effect.gen(function* () {
        const events = yield* Events
        const store = yield* StoreTag
        const ids: Array<number> = []
        for (const title of titles) {
          yield* store.transaction(
            events.append([{ type: "task.created", ownerId: "usr_owner0000000000", data: { title } }], now())
          )
          ids.push(Number((yield* store.get(newest))?.id))
        }
        return ids
      })
    )

  /** A subscriber keeping the ids it is handed. */
  const listen = (options: { readonly since?: unknown; readonly topics?: unknown } = {}) => {
    const ids: Array<number> = []
    const subscribed = run(
      Effect.flatMap(Events, (events) =>
        events.subscribe({
          actor: admin,
          ...options,
          sink: (_, row) => {
            ids.push(row.id)
            return true
          }
        })
      )
    )
    return { ids, subscribed }
  }

  const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

  it("a since replay that overlaps what went live meanwhile hands each event once", async () => {
    const a = listen()
    const live: Subscription = await a.subscribed
    const [first = 0, second = 0, , , fifth = 0] = await write("e1", "e2", "e3", "e4", "e5")
    await until(() => a.ids.at(-1) === fifth)
    // The replaying subscriber's look at the log answers, and is held there while 6 and 7 go live.
    const hold = holds.hold("events.bounds")
    const b = listen({ since: second })
    await Deferred.await(hold.reached).pipe(Effect.runPromise)
    const [, seventh = 0] = await write("e6", "e7")
    await until(() => a.ids.at(-1) === seventh)
    await Deferred.succeed(hold.release, undefined).pipe(Effect.runPromise)
    const replaying = await b.subscribed
    const [eighth = 0] = await write("e8")
    await until(() => b.ids.at(-1) === eighth)
    expect(b.ids).toEqual(range(second + 1, eighth))
    expect(a.ids).toEqual(range(first, eighth))
    live.close()
    replaying.close()
  })

  it("two first subscribers at once share one start: the hub never goes back, nothing is handed twice", async () => {
    await write("before")
    const hold = holds.hold("events.bounds")
    const one = listen()
    await Deferred.await(hold.reached).pipe(Effect.runPromise)
    const two = listen()
    // Committed while the first start's answer is on its way.
    const [fourth = 0, fifth = 0] = await write("during-1", "during-2")
    await Deferred.succeed(hold.release, undefined).pipe(Effect.runPromise)
    const subscriptions = await Promise.all([one.subscribed, two.subscribed])
    const [sixth = 0] = await write("after")
    await until(() => one.ids.at(-1) === sixth && two.ids.at(-1) === sixth)
    await new Promise((r) => setTimeout(r, 100))
    expect(two.ids).toEqual([fourth, fifth, sixth])
    expect(one.ids).toEqual([fourth, fifth, sixth])
    for (const s of subscriptions) s.close()
  })

  it("what is committed while the first subscriber starts arrives without waiting for another write", async () => {
    const hold = holds.hold("events.bounds")
    const one = listen()
    await Deferred.await(hold.reached).pipe(Effect.runPromise)
    const [during = 0] = await write("while starting")
    await Deferred.succeed(hold.release, undefined).pipe(Effect.runPromise)
    const subscription = await one.subscribed
    await until(() => one.ids.includes(during), 3_000)
    expect(one.ids).toEqual([during])
    subscription.close()
  })

  it("a since ahead of what this process has read (another process wrote) gets nothing twice", async () => {
    const a = listen()
    const live = await a.subscribed
    const [start = 0] = await write("seen by both")
    await until(() => a.ids.at(-1) === start)
    // Another process's writes: in the log, not yet read here (the read they cause is held).
    const hold = holds.hold("events.after")
    const other = await run(
      Effect.gen(function* () {
        const store = yield* StoreTag
        for (let i = 0; i < 3; i++) yield* store.run(rawInsert, ["usr_owner0000000000", '{"title":"elsewhere"}', now()])
        return Number((yield* store.get(newest))?.id)
      })
    )
    // A client that read them through the other process reconnects here.
    const b = listen({ since: other })
    const reconnected = await b.subscribed
    const [last = 0] = await write("after")
    await Deferred.succeed(hold.release, undefined).pipe(Effect.runPromise)
    await until(() => a.ids.at(-1) === last && b.ids.at(-1) === last)
    expect(b.ids).toEqual([last])
    expect(a.ids).toEqual(range(start, last))
    live.close()
    reconnected.close()
  })

  it("replays thousands of events while writes go on, losing and repeating none", async () => {
    const [from = 0] = await write("from")
    await write(...Array.from({ length: 1500 }, (_, i) => `old ${i}`))
    const writer = write(...Array.from({ length: 500 }, (_, i) => `new ${i}`))
    const b = listen({ since: from })
    const subscription = await b.subscribed
    const written = await writer
    const last = written.at(-1) ?? 0
    await until(() => b.ids.at(-1) === last, 30_000)
    expect(b.ids).toEqual(range(from + 1, last))
    subscription.close()
  }, 60_000)

  it("refuses what HTTP refuses: unknown topics, a bad since, topics as a string, no tasks:read", async () => {
    const refusal = (options: { readonly since?: unknown; readonly topics?: unknown }, who = admin) =>
      run(
        Effect.flip(Effect.flatMap(Events, (events) => events.subscribe({ actor: who, ...options, sink: () => true })))
      )
    expect(await refusal({ topics: ["everything"] })).toMatchObject({
      _tag: "BadRequest",
      details: { fields: [{ path: "topics.0" }] }
    })
    expect(await refusal({ topics: "tasks" })).toMatchObject({
      _tag: "BadRequest",
      message: "topics must be an array"
    })
    expect(await refusal({ since: -5 })).toMatchObject({ _tag: "BadRequest", details: { fields: [{ path: "since" }] } })
    expect(await refusal({ since: "x" })).toMatchObject({
      _tag: "BadRequest",
      details: { fields: [{ path: "since" }] }
    })
    expect(await refusal({}, actor("usr_someone00000000", ["projects:read"]))).toMatchObject({
      _tag: "Forbidden",
      details: { required_scope: "tasks:read" }
    })
    const streamed = await run(
      Effect.flip(Effect.flatMap(Events, (events) => Stream.runCollect(events.stream(admin, { since: 1.5 }))))
    )
    expect(streamed).toMatchObject({ _tag: "BadRequest", details: { fields: [{ path: "since" }] } })
  })

  it("a stream whose consumer falls behind fails with EventsOverflow after what it had", async () => {
    const got: Array<EventMessage> = []
    const gate = Deferred.unsafeMake<void>(FiberId.none)
    const [mark = 0] = await write("mark")
    const consumer = runtime.runFork(
      Effect.flatMap(Events, (events) =>
        Stream.runForEach(events.stream(admin, { since: mark, buffer: 5 }), (event) =>
          Effect.zipRight(
            Effect.sync(() => got.push(event)),
            got.length === 1 ? Deferred.await(gate) : Effect.void
          )
        )
      )
    )
    // The consumer has its first event (replayed or live: `since` covers both) and stops taking more.
    const [first = 0] = await write("first")
    await until(() => got.length > 0)
    await write(...Array.from({ length: 20 }, (_, i) => `flood ${i}`))
    await Deferred.succeed(gate, undefined).pipe(Effect.runPromise)
    const exit = await Effect.runPromise(Fiber.await(consumer))
    expect(Exit.isFailure(exit)).toBe(true)
    if (Exit.isFailure(exit)) {
      expect(Option.getOrUndefined(Cause.failureOption(exit.cause))).toMatchObject({
        _tag: "EventsOverflow",
        limit: 5
      })
    }
    // What it had when it fell behind, in order: its first event, then what its buffer held (and the
    // stream's one chunk read ahead), never the whole flood.
    expect(got.length).toBeGreaterThanOrEqual(2)
    expect(got.length).toBeLessThanOrEqual(11)
    const ids = got.map((e) => e.id)
    expect(ids).toEqual(range(first, first + ids.length - 1))
    expect(got[0]).toMatchObject({ id: first, type: "task.created", data: { title: "first" } })
  })

  it.runIf(kind === "sqlite")("pruning reads the old events' ids from the time index, not the whole log", async () => {
    // Left to itself SQLite walks the log by id to honour the ORDER BY, every start and every ten minutes.
    const plan = await run(
      Effect.flatMap(StoreTag, (store) =>
        store.all(
          statement<{ detail: string }>("test.prunePlan", `EXPLAIN QUERY PLAN ${eventStatements.prune.sqlite}`),
          ["2000-01-01T00:00:00.000Z", 1000]
        )
      )
    )
    const steps = plan.map((step) => step.detail)
    expect(steps).toContain("SEARCH events USING COVERING INDEX events_created (created_at<?)")
    expect(steps.some((step) => step.includes("rowid<?"))).toBe(false)
  })

  it("pruning keeps the newest event; a since older than what is kept fails with EventsGone, also once the log is emptied", async () => {
    const ids = await write("p1", "p2", "p3", "p4")
    const last = ids.at(-1) ?? 0
    await run(Effect.flatMap(StoreTag, (store) => store.run(backdate, [last])))
    const removed = await run(Effect.flatMap(Events, (events) => events.prune))
    expect(removed).toBeGreaterThanOrEqual(3)
    const kept = await run(
      Effect.flatMap(StoreTag, (store) => store.all(statement<{ id: number }>("test.all", "SELECT id FROM events")))
    )
    expect(kept.map((r) => Number(r.id))).toEqual([last])
    const gone = (since: number) =>
      run(
        Effect.flatMap(Events, (events) =>
          Stream.runCollect(events.stream(admin, { since })).pipe(Effect.timeout("2 seconds"), Effect.either)
        )
      )
    const old = await gone(last - 3)
    expect(Either.isLeft(old) && old.left).toMatchObject({ _tag: "EventsGone", oldest: last })
    // From the one before the newest: nothing is missing, so it is served (and waits for more).
    const fine = await gone(last - 1)
    expect(Either.isLeft(fine) && fine.left).toMatchObject({ _tag: "TimeoutException" })
    // A log emptied (by an older version's prune, or anything else) still refuses a since it cannot serve.
    await run(Effect.flatMap(StoreTag, (store) => store.run(clear)))
    const emptied = await gone(last)
    expect(Either.isLeft(emptied) && emptied.left).toMatchObject({ _tag: "EventsGone", oldest: null })
    const subscribed = await run(
      Effect.flip(Effect.flatMap(Events, (events) => events.subscribe({ actor: admin, since: 3, sink: () => true })))
    )
    expect(subscribed).toMatchObject({ _tag: "EventsGone" })
  })
})

const now = () => new Date().toISOString()
