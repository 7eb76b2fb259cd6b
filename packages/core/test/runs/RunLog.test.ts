/**
 * The batched run log over the real SQLite store: entries keep their order and seq, a chatty
 * producer costs a handful of statements rather than one per line, a lone entry is written within
 * the flush interval, a failing store loses nothing, and text PostgreSQL could not hold is made safe.
 */

import { assert, describe, it } from "@effect/vitest"
import type { RunId, TaskId } from "@taskwright/domain"
import { Effect, Layer } from "effect"
import { makeRunLog, sanitizeMessage } from "../../src/runs/RunLog.js"
import { type LogTuple, RunsRepo } from "../../src/runs/RunsRepo.js"
import { migrate } from "../../src/store/migrations.js"
import * as SqliteStore from "../../src/store/SqliteStore.js"
import { StoreError, StoreTag, statement } from "../../src/store/Store.js"

const StoreLayer = Layer.tap(SqliteStore.layer({ filename: ":memory:" }), (ctx) =>
  Effect.orDie(Effect.provide(migrate, ctx))
)
const TestLayer = RunsRepo.Default.pipe(Layer.provideMerge(StoreLayer))

const RUN = "run_AAAAAAAAAAAAAAAA" as RunId

/** A user, a task and a run row for the log to belong to. */
const seed = Effect.gen(function* () {
  const store = yield* StoreTag
  const at = new Date().toISOString()
  yield* store.run(
    statement(
      "t.user",
      "INSERT INTO users (id, email, email_lower, name, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)"
    ),
    ["usr_AAAAAAAAAAAAAAAA", "a@b.c", "a@b.c", "A", at, at]
  )
  yield* store.run(
    statement(
      "t.task",
      "INSERT INTO tasks (owner_id, title, status, priority, created_at, updated_at) VALUES (?, 'T', 'backlog', 'medium', ?, ?)"
    ),
    ["usr_AAAAAAAAAAAAAAAA", at, at]
  )
  const repo = yield* RunsRepo
  yield* repo.insert({
    id: RUN,
    task_id: 1 as TaskId,
    owner_id: "usr_AAAAAAAAAAAAAAAA",
    agent: "command",
    autonomy: "workspace-write",
    branch: "b",
    status: "running",
    started_at: at,
    completed_at: null,
    output: "{}",
    repo_path: null,
    worktree_path: null,
    base_sha: null,
    pid: null,
    error: null,
    supervisor: null,
    heartbeat_at: null
  })
  return repo
})

const stored = Effect.flatMap(RunsRepo, (repo) => repo.logs(RUN, { after: 0, since: undefined, limit: 1000 }))

describe("RunLog", () => {
  it.live("stores a burst in order with a handful of statements", () =>
    Effect.gen(function* () {
      const repo = yield* seed
      const writes: Array<number> = []
      yield* Effect.scoped(
        Effect.gen(function* () {
          const log = yield* makeRunLog({
            firstSeq: 1,
            write: (entries: ReadonlyArray<LogTuple>) => {
              writes.push(entries.length)
              return repo.insertLogs(RUN, entries)
            },
            transaction: repo.transaction
          })
          for (let i = 1; i <= 2500; i++) log.append("info", `line ${i}`)
          assert.strictEqual(log.lastSeq(), 2500)
          yield* log.close
        })
      )
      assert.isAtMost(writes.length, 5)
      assert.strictEqual(
        writes.reduce((a, b) => a + b, 0),
        2500
      )
      const all = yield* Effect.flatMap(RunsRepo, (r) => r.logs(RUN, { after: 0, since: undefined, limit: 1000 }))
      assert.deepStrictEqual(
        all.map((e) => e.seq),
        Array.from({ length: 1000 }, (_, i) => i + 1)
      )
      assert.strictEqual(all[41]?.message, "line 42")
      const tail = yield* Effect.flatMap(RunsRepo, (r) => r.logs(RUN, { after: 2000, since: undefined, limit: 1000 }))
      assert.strictEqual(tail.length, 500)
      assert.strictEqual(tail.at(-1)?.message, "line 2500")
    }).pipe(Effect.provide(TestLayer))
  )

  it.live("writes a lone entry within the flush interval, and keeps timestamps from going backwards", () =>
    Effect.gen(function* () {
      const repo = yield* seed
      const future = Date.now() + 60_000
      yield* Effect.scoped(
        Effect.gen(function* () {
          const log = yield* makeRunLog({
            firstSeq: 7,
            notBefore: future,
            flushMs: 20,
            write: (entries) => repo.insertLogs(RUN, entries),
            transaction: repo.transaction
          })
          log.append("warn", "alone")
          yield* Effect.sleep("150 millis")
          const rows = yield* stored
          assert.deepStrictEqual(
            rows.map((r) => [r.seq, r.level, r.message]),
            [[7, "warn", "alone"]]
          )
          // The clock is behind the newest stored entry: the entry takes that time, not an earlier one.
          assert.strictEqual(rows[0]?.timestamp, new Date(future).toISOString())
          yield* log.close
        })
      )
    }).pipe(Effect.provide(TestLayer))
  )

  it.live("retries a failing store without losing or reordering entries", () =>
    Effect.gen(function* () {
      const repo = yield* seed
      let failuresLeft = 2
      yield* Effect.scoped(
        Effect.gen(function* () {
          const log = yield* makeRunLog({
            firstSeq: 1,
            flushMs: 10,
            write: (entries) =>
              failuresLeft-- > 0
                ? Effect.fail(new StoreError({ kind: "unavailable", message: "down" }))
                : repo.insertLogs(RUN, entries),
            transaction: repo.transaction
          })
          for (let i = 1; i <= 10; i++) log.append("info", `a ${i}`)
          yield* Effect.sleep("30 millis")
          for (let i = 1; i <= 10; i++) log.append("info", `b ${i}`)
          yield* log.close
        })
      )
      const rows = yield* stored
      assert.deepStrictEqual(
        rows.map((r) => r.message),
        [...Array.from({ length: 10 }, (_, i) => `a ${i + 1}`), ...Array.from({ length: 10 }, (_, i) => `b ${i + 1}`)]
      )
      assert.deepStrictEqual(
        rows.map((r) => r.seq),
        Array.from({ length: 20 }, (_, i) => i + 1)
      )
    }).pipe(Effect.provide(TestLayer))
  )

  it.live("asks the producer to pause above the high-water mark and to resume once the store caught up", () =>
    Effect.gen(function* () {
      const repo = yield* seed
      const signals: Array<boolean> = []
      yield* Effect.scoped(
        Effect.gen(function* () {
          const log = yield* makeRunLog({
            firstSeq: 1,
            highWater: 100,
            onPressure: (high) => signals.push(high),
            write: (entries) => repo.insertLogs(RUN, entries),
            transaction: repo.transaction
          })
          for (let i = 1; i <= 150; i++) log.append("info", `x ${i}`)
          assert.deepStrictEqual(signals, [true])
          yield* log.flush
          assert.deepStrictEqual(signals, [true, false])
          yield* log.close
        })
      )
    }).pipe(Effect.provide(TestLayer))
  )

  it("makes text safe for both stores: NUL and half surrogate pairs become U+FFFD", () => {
    assert.strictEqual(sanitizeMessage("plain text"), "plain text")
    assert.strictEqual(sanitizeMessage("a\u0000b"), "a\uFFFDb")
    assert.strictEqual(sanitizeMessage("cut \uD83D"), "cut \uFFFD")
    assert.strictEqual(sanitizeMessage("\uDE00 tail"), "\uFFFD tail")
    assert.strictEqual(sanitizeMessage("emoji 😀 kept"), "emoji 😀 kept")
  })
})
