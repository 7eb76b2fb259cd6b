/**
 * PostgreSQL cut off without a reset (a failover, a network partition): the store talks to the
 * real PostgreSQL through a TCP relay of the test's own that can stop carrying bytes while keeping
 * every socket open, which is what such a cut looks like from the service. A statement then fails
 * as unavailable once the answer timeout has passed instead of waiting for TCP; the listening
 * connection notices within its heartbeat, so the change epoch stops being trusted; and once the
 * relay carries bytes again the store works on new connections, the cut ones never reused.
 */
import { connect, createServer, type Server, type Socket } from "node:net"
import { Cause, Effect, Exit, ManagedRuntime, Option } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Store, StoreTag, statement } from "../../src/store/Store.js"
import { storeKinds } from "../stores.js"
import { until } from "../until.js"

const ANSWER_TIMEOUT_MS = 500
const PG_PORT = Number(new URL(process.env.TASKWRIGHT_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test").port)

/** A TCP relay to PostgreSQL; `cut()` makes every connection made so far (and until `heal()`) carry nothing. */
const makeRelay = async () => {
  const cutOff = new Set<Socket>()
  const sockets = new Set<Socket>()
  let cutting = false
  const server: Server = createServer((client) => {
    const upstream = connect(PG_PORT || 5432, "127.0.0.1")
    sockets.add(client)
    sockets.add(upstream)
    if (cutting) cutOff.add(client)
    const carry = (from: Socket, to: Socket) =>
      from.on("data", (chunk) => {
        if (!cutOff.has(client)) to.write(chunk)
      })
    carry(client, upstream)
    carry(upstream, client)
    const close = () => {
      client.destroy()
      upstream.destroy()
    }
    client.on("close", close).on("error", close)
    upstream.on("close", close).on("error", close)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  return {
    url: `postgres://postgres@127.0.0.1:${port}/test`,
    cut: () => {
      cutting = true
      for (const s of sockets) cutOff.add(s)
    },
    heal: () => {
      cutting = false
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      })
  }
}

const one = statement<{ one: number }>("test.one", "SELECT 1 AS one")

/** Whether the change epoch is trusted: it stays put between two calls only while the listener is live. */
const epochTrusted = (store: Store) => {
  const first = store.changes.epoch()
  return store.changes.epoch() === first
}

describe.runIf(storeKinds.includes("postgres"))("PostgreSQL cut off without a reset", () => {
  let relay: Awaited<ReturnType<typeof makeRelay>>
  let runtime: ManagedRuntime.ManagedRuntime<StoreTag, unknown>
  let store: Store

  beforeAll(async () => {
    relay = await makeRelay()
    const Pg = await import("../../src/store/PgStore.js")
    runtime = ManagedRuntime.make(Pg.layer({ url: relay.url, answerTimeoutMs: ANSWER_TIMEOUT_MS }))
    store = await runtime.runPromise(StoreTag)
  })

  afterAll(async () => {
    await runtime?.dispose()
    await relay?.close()
  })

  const selectOne = () => runtime.runPromise(Effect.exit(store.get(one)))

  it("fails statements as unavailable after the answer timeout, distrusts the epoch, and recovers", async () => {
    expect(Exit.isSuccess(await selectOne())).toBe(true)
    await until(() => epochTrusted(store), 5_000, "the listener to be live")

    relay.cut()
    for (const attempt of ["an open connection", "a new connection"]) {
      const t0 = Date.now()
      const exit = await selectOne()
      const waited = Date.now() - t0
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      expect(error?.kind, attempt).toBe("unavailable")
      expect(waited, attempt).toBeGreaterThanOrEqual(ANSWER_TIMEOUT_MS - 50)
      expect(waited, attempt).toBeLessThan(ANSWER_TIMEOUT_MS * 4)
    }
    // The heartbeat (every 5 s) finds the listening connection unanswered.
    await until(() => !epochTrusted(store), 8_000, "the epoch to stop being trusted")

    relay.heal()
    await until(async () => Exit.isSuccess(await selectOne()), 5_000, "a statement to succeed again")
    await until(() => epochTrusted(store), 5_000, "the listener to be live again")
  }, 30_000)
})
