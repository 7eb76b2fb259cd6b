/**
 * The event socket over time, on every store: a plain `GET /api/events` told to upgrade (426),
 * retention (a since older than the log keeps, or from a log since emptied, is closed with 4410),
 * an access token expiring while connected, an admin who loses admin seeing only their own from
 * the next credential check, and a client that stops answering pings dropped.
 */
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { Events, engineLayer, settingsFromEnv, Users } from "@taskwright/core"
import { makeHttpFaces } from "@taskwright/server"
import { startTestServer, type TestServer, testStores } from "@taskwright/testing"
import { Effect, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { accessToken, createKey, decodeJwt, demoteInSql, exec } from "./auth-helpers.js"
import { connect, until, wsUrl } from "./events-helpers.js"

describe.each(testStores())("the event socket over time, on %s", (store) => {
  let s: TestServer
  let alice: { id: string; key: string }

  beforeAll(async () => {
    s = await startTestServer({
      store,
      env: { TASKWRIGHT_RATE_LIMIT: "1000000", TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "100000" }
    })
    alice = await s.createUser()
  })
  afterAll(async () => {
    await s.close()
  })

  const auth = (key: string) => ({ authorization: `Bearer ${key}` })
  const task = async (key: string, title: string) => {
    const r = await s.request<{ id: number }>("POST", "/api/tasks", { key, body: { title } })
    expect(r.status, r.text).toBe(201)
    return r.body.id
  }
  const newestEvent = async () =>
    Number((await s.query<{ id: number }>("SELECT MAX(id) AS id FROM events"))[0]?.id ?? 0)

  it("answers a GET or HEAD without Upgrade with 426 Upgrade Required, in the envelope", async () => {
    for (const method of ["GET", "HEAD"]) {
      const r = await fetch(`${s.url}/api/events`, { method, headers: auth(alice.key) })
      expect(r.status).toBe(426)
      expect(r.headers.get("upgrade")).toBe("websocket")
      expect(r.headers.get("content-type")).toMatch(/^application\/json/)
      const text = await r.text()
      if (method === "GET") {
        expect(JSON.parse(text)).toEqual({
          error: {
            code: "UPGRADE_REQUIRED",
            message: expect.stringMatching(/Upgrade: websocket/),
            details: { upgrade: "websocket" }
          }
        })
      } else {
        expect(text).toBe("")
      }
    }
    expect((await fetch(`${s.url}/api/events`)).status).toBe(426)
  })

  it("closes a socket at the moment its access token expires (1008)", async () => {
    const expiresAt = new Date(Date.now() + 2_500).toISOString()
    const key = await createKey(s, alice.key, { scopes: ["tasks:read"], expires_at: expiresAt })
    const token = await accessToken(s, key.secret)
    // The token ends with its key, in whole seconds.
    const exp = Number(decodeJwt(token).payload.exp) * 1000
    expect(exp).toBeLessThanOrEqual(Date.parse(expiresAt))
    const c = await connect(`${wsUrl(s.url)}?access_token=${token}`)
    const closed = await c.closed
    expect(closed.code).toBe(1008)
    // At the expiry, not at a later periodic check.
    expect(Date.now()).toBeGreaterThanOrEqual(exp - 50)
    expect(Date.now()).toBeLessThan(exp + 1_000)
  }, 15_000)

  it("an admin who loses admin sees only their own events from the next credential check", async () => {
    const boss = await s.createUser({ admin: true, scopes: ["admin", "tasks:read", "tasks:write"] })
    const adminOnly = await createKey(s, boss.key, { scopes: ["admin"] })
    const bob = await s.createUser()
    const c = await connect(`${wsUrl(s.url)}?access_token=${await accessToken(s, boss.key)}`)
    const bareToken = await accessToken(s, adminOnly.secret)
    const bare = await connect(`${wsUrl(s.url)}?access_token=${bareToken}`)
    const bareKey = await connect(wsUrl(s.url), auth(adminOnly.secret))
    const before = await task(bob.key, "Bob's, seen by an admin")
    await until(() => [c, bare, bareKey].every((socket) => socket.events.some((e) => e.data.id === before)))
    // Both credentials' rows read again and remembered right now (a revocation clears what is
    // remembered): what a recheck within the next 5 s must look past.
    const throwaway = await createKey(s, alice.key, { scopes: ["tasks:read"] })
    expect((await s.request("DELETE", `/api/keys/${throwaway.id}`, { key: alice.key })).status).toBe(200)
    for (const credential of [bareToken, adminOnly.secret]) {
      expect((await s.request("GET", "/api/auth/me", { key: credential })).status).toBe(200)
    }
    await demoteInSql(s, boss.id)
    const demotedAt = Date.now()
    // The credential is checked again every 5 s, from the stored rows (a change made in SQL is
    // announced to nobody). One whose only scope was admin holds nothing now.
    for (const socket of [bare, bareKey]) {
      expect((await socket.closed).code).toBe(1008)
      expect(Date.now() - demotedAt).toBeLessThan(5_000 + 1_000)
    }
    const hidden = await task(bob.key, "Bob's, no longer the boss's business")
    const own = await task(boss.key, "The former boss's own")
    await until(() => c.events.some((e) => e.data.id === own))
    expect(c.events.some((e) => e.data.id === hidden)).toBe(false)
    expect(c.ws.readyState).toBe(c.ws.OPEN)
    c.ws.close()
  }, 20_000)

  // Last: it prunes and then empties the log.
  it("closes with 4410 a since older than the log keeps, also once pruning or anything else emptied it", async () => {
    for (let i = 0; i < 4; i++) await task(alice.key, `old ${i}`)
    const newest = await newestEvent()
    await exec(s, `UPDATE events SET created_at = '2000-01-01T00:00:00.000Z' WHERE id <= ${newest}`)
    const removed = await s.server.run(Effect.flatMap(Events, (events) => events.prune))
    expect(removed).toBeGreaterThanOrEqual(3)
    expect((await s.query<{ id: number }>("SELECT id FROM events")).map((r) => Number(r.id))).toEqual([newest])
    const old = await connect(`${wsUrl(s.url)}?since=${newest - 3}`, auth(s.adminKey))
    expect(await old.closed).toMatchObject({ code: 4410 })
    // Right after what it saw: nothing is missing, so it is served.
    const recent = await connect(`${wsUrl(s.url)}?since=${newest - 1}`, auth(s.adminKey))
    await until(() => recent.events.length === 1)
    expect(recent.events[0]?.id).toBe(newest)
    const live = await task(alice.key, "after the prune")
    await until(() => recent.events.some((e) => e.data.id === live))
    recent.ws.close()
    await exec(s, "DELETE FROM events")
    const emptied = await connect(`${wsUrl(s.url)}?since=${newest}`, auth(s.adminKey))
    expect(await emptied.closed).toMatchObject({ code: 4410 })
  }, 20_000)
})

describe("a client that stops answering pings", () => {
  const runtime = ManagedRuntime.make(engineLayer(settingsFromEnv({}, { databaseUrl: ":memory:" }), {}))
  let server: Server
  let url: string
  let key: string

  beforeAll(async () => {
    const engine = await runtime.runtime()
    key = await runtime.runPromise(
      Effect.gen(function* () {
        const users = yield* Users
        const u = yield* users.create({ email: "ping@example.test", name: "P", password: null, admin: false })
        return (yield* users.createKey({ userId: u.id, name: "k", scopes: ["tasks:read"], expiresAt: null })).secret
      })
    )
    const faces = makeHttpFaces(engine, { eventsPingMs: 200 })
    server = createServer(faces.nodeHandler)
    server.on("upgrade", faces.nodeUpgrade)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/api/events`
  })
  afterAll(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
    await runtime.dispose()
  })

  it("is dropped after a ping goes unanswered, while one that answers stays", async () => {
    const dead = await connect(url, { authorization: `Bearer ${key}` }, { autoPong: false })
    const alive = await connect(url, { authorization: `Bearer ${key}` })
    const started = Date.now()
    const closed = await dead.closed
    // Terminated, not closed with a handshake: the client is taken for gone.
    expect(closed.code).toBe(1006)
    expect(Date.now() - started).toBeLessThan(2_000)
    await new Promise((r) => setTimeout(r, 600))
    expect(alive.ws.readyState).toBe(alive.ws.OPEN)
    alive.ws.close()
  })
})
