/**
 * A connection PostgreSQL ends while a transaction holds it between two statements (a restart,
 * an administrator's `pg_terminate_backend`): the transaction fails as unavailable, the process
 * goes on (the driver reports such a loss as an "error" event, which unheard ends the process),
 * and the next unit of work runs on a new connection.
 */
import { Cause, Effect, Exit, ManagedRuntime, Option } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Store, StoreError, StoreTag, statement } from "../../src/store/Store.js"
import { createPgDatabase, dropPgDatabase, storeKinds, withPg } from "../stores.js"

const backendPid = statement<{ pid: number }>("test.backendPid", "SELECT pg_backend_pid() AS pid")

describe.runIf(storeKinds.includes("postgres"))("a connection ended inside a transaction on postgres", () => {
  let url = ""
  let runtime: ManagedRuntime.ManagedRuntime<StoreTag, unknown>
  let store: Store

  beforeAll(async () => {
    url = await createPgDatabase("tw_connection_loss")
    const Pg = await import("../../src/store/PgStore.js")
    runtime = ManagedRuntime.make(Pg.layer({ url }))
    store = await runtime.runPromise(StoreTag)
  })

  afterAll(async () => {
    await runtime?.dispose()
    if (url !== "") await dropPgDatabase(url)
  })

  it("fails the transaction as unavailable and serves the next unit on a new connection", async () => {
    const exit = await runtime.runPromiseExit(
      store.transaction(
        Effect.gen(function* () {
          const row = yield* store.get(backendPid)
          // Ended while this transaction waits between statements: no statement is in flight.
          yield* Effect.promise(() =>
            withPg(url, (c) => c.query("SELECT pg_terminate_backend($1)", [Number(row?.pid)]))
          )
          yield* Effect.sleep("300 millis")
          return yield* store.get(backendPid)
        })
      )
    )
    const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
    expect(error).toBeInstanceOf(StoreError)
    expect(error instanceof StoreError ? error.kind : undefined).toBe("unavailable")
    const after = await runtime.runPromise(store.get(backendPid))
    expect(Number(after?.pid)).toBeGreaterThan(0)
  })
})
