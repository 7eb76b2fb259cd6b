/**
 * The embedded store's transactions on a real SQLite file: one at a time even when a body crosses
 * an async boundary (others wait in line, statements outside any transaction too), a failure or an
 * interruption rolls back and lets the next one in, a COMMIT SQLite refuses fails the transaction,
 * after-commit hooks run only for what committed, and a nested call joins the outer transaction.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer } from "effect"
import * as SqliteStore from "../../src/store/SqliteStore.js"
import { StoreTag, statement } from "../../src/store/Store.js"

const ddl = [
  statement("t.items", "CREATE TABLE items (id INTEGER PRIMARY KEY, who TEXT NOT NULL)"),
  statement("t.parents", "CREATE TABLE parents (id INTEGER PRIMARY KEY)"),
  // Checked at COMMIT: how a COMMIT comes to be refused.
  statement(
    "t.children",
    "CREATE TABLE children (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parents(id) DEFERRABLE INITIALLY DEFERRED)"
  )
]
const insert = statement("t.insert", "INSERT INTO items (who) VALUES (?)")
const items = statement<{ who: string }>("t.all", "SELECT who FROM items ORDER BY id")
const orphan = statement("t.orphan", "INSERT INTO children (parent) VALUES (42)")

const withStore = <A, E>(body: Effect.Effect<A, E, StoreTag>) =>
  Effect.gen(function* () {
    const dir = mkdtempSync(join(tmpdir(), "tw-sqlite-tx-"))
    const layer = SqliteStore.layer({ filename: join(dir, "tx.db") })
    return yield* Effect.gen(function* () {
      const store = yield* StoreTag
      for (const s of ddl) yield* store.run(s)
      return yield* body
    }).pipe(
      Effect.provide(Layer.orDie(layer)),
      Effect.ensuring(Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    )
  })

const whoIsThere = Effect.flatMap(StoreTag, (store) =>
  Effect.map(store.all(items), (rows) => rows.map((row) => row.who))
)

describe("SQLite transactions", () => {
  it.live("hold back other transactions and lone statements while a body waits", () =>
    withStore(
      Effect.gen(function* () {
        const store = yield* StoreTag
        const slow = yield* Effect.fork(
          store.transaction(
            Effect.gen(function* () {
              yield* store.run(insert, ["slow 1"])
              yield* Effect.sleep("50 millis")
              yield* store.run(insert, ["slow 2"])
            })
          )
        )
        yield* Effect.sleep("10 millis")
        const other = yield* Effect.fork(store.transaction(store.run(insert, ["other"])))
        const lone = yield* Effect.fork(store.run(insert, ["lone"]))
        yield* Fiber.join(slow)
        yield* Fiber.join(other)
        yield* Fiber.join(lone)
        // Nothing landed between the slow transaction's two rows; the others in the order they came.
        assert.deepStrictEqual(yield* whoIsThere, ["slow 1", "slow 2", "other", "lone"])
      })
    )
  )

  it.live("roll back on failure and on interruption, and let the next one in", () =>
    withStore(
      Effect.gen(function* () {
        const store = yield* StoreTag
        let hooks = 0
        const failed = yield* Effect.exit(
          store.transaction(
            Effect.gen(function* () {
              yield* store.run(insert, ["failed"])
              yield* store.afterCommit(() => {
                hooks += 1
              })
              return yield* Effect.fail("no")
            })
          )
        )
        assert.isTrue(Exit.isFailure(failed))
        const interrupted = yield* Effect.fork(
          store.transaction(Effect.zipRight(store.run(insert, ["interrupted"]), Effect.never))
        )
        yield* Effect.sleep("20 millis")
        yield* Fiber.interrupt(interrupted)
        yield* store.transaction(
          Effect.zipRight(
            store.run(insert, ["kept"]),
            store.afterCommit(() => {
              hooks += 10
            })
          )
        )
        assert.deepStrictEqual(yield* whoIsThere, ["kept"])
        assert.strictEqual(hooks, 10)
      })
    )
  )

  it.live("fail the transaction with a StoreError when SQLite refuses the COMMIT, and roll it back", () =>
    withStore(
      Effect.gen(function* () {
        const store = yield* StoreTag
        let hooks = 0
        const refused = yield* Effect.exit(
          store.transaction(
            Effect.gen(function* () {
              yield* store.run(insert, ["before the refusal"])
              yield* store.run(orphan)
              yield* store.afterCommit(() => {
                hooks += 1
              })
            })
          )
        )
        assert.isTrue(Exit.isFailure(refused))
        if (Exit.isFailure(refused)) assert.match(String(refused.cause), /StoreError/)
        assert.strictEqual(hooks, 0)
        assert.deepStrictEqual(yield* whoIsThere, [])
        // The store goes on.
        yield* store.transaction(store.run(insert, ["after"]))
        assert.deepStrictEqual(yield* whoIsThere, ["after"])
      })
    )
  )

  it.live("join the outer transaction when nested", () =>
    withStore(
      Effect.gen(function* () {
        const store = yield* StoreTag
        const exit = yield* Effect.exit(
          store.transaction(
            Effect.gen(function* () {
              yield* store.transaction(store.run(insert, ["inner"]))
              return yield* Effect.fail("outer fails")
            })
          )
        )
        assert.isTrue(Exit.isFailure(exit))
        assert.deepStrictEqual(yield* whoIsThere, [])
      })
    )
  )
})
