/**
 * Key management tried as an attacker would: a weak credential (a read-only key, an access token
 * made from one, an admin's read-only key) must not rotate, revoke or mint a key stronger than
 * itself; concurrent key changes are atomic (one revoke of many wins; a rotate never answers a
 * secret that was not stored); concurrent PATCHes of one task both land and `updated_at` follows
 * commit order; a revoked key is refused by the next request while others hammer it. On every store.
 */
import { mkdtemp, rm } from "node:fs/promises"
import { type AddressInfo, connect, createServer, type Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { settingsFromEnv } from "@taskwright/core"
import { StoreTag, UsersRepo } from "@taskwright/core/internal"
import { type RunningServer, serve } from "@taskwright/server"
import { createPgDatabase, startTestServer, type TestDatabase, type TestServer, testStores } from "@taskwright/testing"
import { Effect, Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { accessToken, cookie, createKey, createPasswordUser, login, sha256Hex } from "./auth-helpers.js"

interface Envelope {
  readonly error: { readonly code: string; readonly message: string; readonly details: Record<string, unknown> }
}
interface KeyRow {
  readonly secret_hash: string
  readonly revoked_at: string | null
}

const ALL = ["tasks:read", "tasks:write", "projects:read", "projects:write", "agents:run"]

describe.each(testStores())("key management without escalation on %s", (store) => {
  let s: TestServer

  beforeAll(async () => {
    s = await startTestServer({
      store,
      env: { TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "100000", TASKWRIGHT_RATE_LIMIT: "1000000" }
    })
  })
  afterAll(async () => {
    await s.close()
  })

  const keyRow = async (id: string) => (await s.query<KeyRow>("SELECT * FROM api_keys WHERE id = ?", [id]))[0]
  const works = async (secret: string) => (await s.request("GET", "/api/auth/me", { key: secret })).status === 200
  const expectRefused = (r: { status: number; body: unknown }) => {
    expect(r.status).toBe(403)
    expect((r.body as Envelope).error.code).toBe("FORBIDDEN")
  }

  /** A user with a full-scope key (the victim) and a read-only key of the same user (the attacker's). */
  const victim = async () => {
    const user = await s.createUser()
    const weak = await createKey(s, user.key, { name: "leaked", scopes: ["tasks:read"] })
    const strong = (
      await s.request<{ keys: Array<{ id: string; name: string }> }>("GET", "/api/keys", {
        key: user.key
      })
    ).body.keys.find((k) => k.name === "test key")
    if (strong === undefined) throw new Error("no full key")
    return { user, weak, strongId: strong.id }
  }

  it("a read-only key cannot rotate its user's full-scope key: 403, the secret unchanged, the holder not locked out", async () => {
    const { user, weak, strongId } = await victim()
    const before = await keyRow(strongId)
    const r = await s.request("POST", `/api/keys/${strongId}/rotate`, { key: weak.secret })
    expectRefused(r)
    expect((r.body as Envelope).error.details).toMatchObject({ reason: "scope_escalation" })
    expect(JSON.stringify(r.body)).not.toMatch(/twk_/)
    expect(await keyRow(strongId)).toEqual(before)
    expect(await works(user.key)).toBe(true)
  })

  it("a read-only key cannot revoke its user's full-scope key", async () => {
    const { user, weak, strongId } = await victim()
    expectRefused(await s.request("DELETE", `/api/keys/${strongId}`, { key: weak.secret }))
    expect((await keyRow(strongId))?.revoked_at).toBeNull()
    expect(await works(user.key)).toBe(true)
  })

  it("an access token made from a read-only key cannot rotate or revoke the full key either", async () => {
    const { user, weak, strongId } = await victim()
    const token = await accessToken(s, weak.secret)
    expectRefused(await s.request("POST", `/api/keys/${strongId}/rotate`, { key: token }))
    expectRefused(await s.request("DELETE", `/api/keys/${strongId}`, { key: token }))
    expect(await works(user.key)).toBe(true)
  })

  it("an admin's read-only key cannot rotate or revoke an admin key, nor mint one", async () => {
    const readOnly = await createKey(s, s.adminKey, { name: "admin read-only", scopes: ["tasks:read"] })
    const admin2 = await createKey(s, s.adminKey, { name: "second admin key", scopes: ["admin"] })
    expectRefused(await s.request("POST", `/api/keys/${admin2.id}/rotate`, { key: readOnly.secret }))
    expectRefused(await s.request("DELETE", `/api/keys/${admin2.id}`, { key: readOnly.secret }))
    expectRefused(
      await s.request("POST", "/api/keys", { key: readOnly.secret, body: { name: "x", scopes: ["admin"] } })
    )
    expect(await works(admin2.secret)).toBe(true)
    expect(await works(s.adminKey)).toBe(true)
  })

  it("a weak key cannot mint a stronger key, but may manage keys no stronger than itself", async () => {
    const { user, weak } = await victim()
    const minted = await s.request("POST", "/api/keys", {
      key: weak.secret,
      body: { name: "x", scopes: ["tasks:write"] }
    })
    expectRefused(minted)
    // The same reason as a refused rotate or revoke.
    expect((minted.body as Envelope).error.details).toMatchObject({
      reason: "scope_escalation",
      scopes: ["tasks:write"]
    })
    expectRefused(await s.request("POST", "/api/keys", { key: weak.secret, body: { name: "x", scopes: ALL } }))
    const peer = await createKey(s, user.key, { name: "peer", scopes: ["tasks:read"] })
    const rotated = await s.request<{ secret: string }>("POST", `/api/keys/${peer.id}/rotate`, { key: weak.secret })
    expect(rotated.status).toBe(200)
    expect(await works(rotated.body.secret)).toBe(true)
    expect((await s.request("DELETE", `/api/keys/${peer.id}`, { key: weak.secret })).status).toBe(200)
  })

  it("a session carries its user's scopes: it may rotate the user's full key; an admin key may rotate anyone's", async () => {
    const pw = await createPasswordUser(s)
    const token = await login(s, pw)
    const own = await s.request<{ id: string }>("POST", "/api/keys", {
      headers: { ...cookie(token), origin: s.url },
      body: { name: "full", scopes: ALL }
    })
    expect(own.status).toBe(201)
    const rotated = await s.request<{ secret: string }>("POST", `/api/keys/${own.body.id}/rotate`, {
      headers: { ...cookie(token), origin: s.url }
    })
    expect(rotated.status).toBe(200)
    expect(await works(rotated.body.secret)).toBe(true)
    const byAdmin = await s.request<{ secret: string }>("POST", `/api/keys/${own.body.id}/rotate`, {
      key: s.adminKey
    })
    expect(byAdmin.status).toBe(200)
    expect(await works(byAdmin.body.secret)).toBe(true)
    expect(await works(rotated.body.secret)).toBe(false)
  })

  it("of concurrent revokes of one key exactly one succeeds; the others are 409", async () => {
    const user = await s.createUser()
    const target = await createKey(s, user.key, { name: "target", scopes: ["tasks:read"] })
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => s.request("DELETE", `/api/keys/${target.id}`, { key: user.key }))
    )
    const statuses = answers.map((r) => r.status).sort()
    expect(statuses.filter((code) => code === 200)).toHaveLength(1)
    expect(statuses.filter((code) => code === 409)).toHaveLength(11)
    for (const r of answers.filter((a) => a.status === 409)) expect((r.body as Envelope).error.code).toBe("CONFLICT")
    expect(await works(target.secret)).toBe(false)
  })

  it("a revoked key is refused by the very next request, even while other requests with it keep coming", async () => {
    const user = await s.createUser()
    for (let round = 0; round < 8; round++) {
      const target = await createKey(s, user.key, { name: `hammered ${round}`, scopes: ["tasks:read"] })
      let stop = false
      let revokedAt = Number.POSITIVE_INFINITY
      const seen: Array<number> = []
      const after: Array<number> = []
      const hammer = async () => {
        while (!stop) {
          const started = performance.now()
          const status = (await s.request("GET", "/api/auth/me", { key: target.secret })).status
          seen.push(status)
          if (started > revokedAt) after.push(status)
        }
      }
      const hammers = Array.from({ length: 8 }, hammer)
      // The key is remembered and in use when it is revoked.
      while (seen.length < 16) await new Promise((resolve) => setTimeout(resolve, 5))
      const revoked = await s.request("DELETE", `/api/keys/${target.id}`, { key: user.key })
      revokedAt = performance.now()
      const next = await s.request("GET", "/api/auth/me", { key: target.secret })
      while (after.length < 16) await new Promise((resolve) => setTimeout(resolve, 5))
      stop = true
      await Promise.all(hammers)
      expect(revoked.status).toBe(200)
      expect(next.status, `round ${round}`).toBe(401)
      // Nor does any request started after the revoke answered.
      expect(
        after.filter((status) => status !== 401),
        `round ${round}`
      ).toEqual([])
      expect(seen.filter((status) => status !== 200 && status !== 401)).toEqual([])
    }
  })

  it("a rotate racing a revoke never answers a secret that was not stored", async () => {
    const user = await s.createUser()
    const targets = await Promise.all(
      Array.from({ length: 16 }, (_, i) => createKey(s, user.key, { name: `race ${i}`, scopes: ["tasks:read"] }))
    )
    const outcomes = await Promise.all(
      targets.map(async (target) => {
        const [rotate, revoke] = await Promise.all([
          s.request<{ secret?: string }>("POST", `/api/keys/${target.id}/rotate`, { key: user.key }),
          s.request("DELETE", `/api/keys/${target.id}`, { key: user.key })
        ])
        return { target, rotate, revoke }
      })
    )
    for (const { target, rotate, revoke } of outcomes) {
      expect([200, 409]).toContain(rotate.status)
      expect(revoke.status).toBe(200)
      if (rotate.status === 200) {
        // The answered secret is the one stored: it worked until the revoke that came after it.
        expect((await keyRow(target.id))?.secret_hash).toBe(sha256Hex(rotate.body.secret ?? ""))
      }
      expect(await works(target.secret)).toBe(false)
    }
  })

  it("concurrent PATCHes of different fields both land, and updated_at never goes back in commit order", async () => {
    const user = await s.createUser()
    const task = await s.request<{ id: number }>("POST", "/api/tasks", { key: user.key, body: { title: "race" } })
    const patches = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        s.request<{ updated_at: string }>("PATCH", `/api/tasks/${task.body.id}`, {
          key: user.key,
          body: i % 2 === 0 ? { title: `title ${i}` } : { priority: i % 4 === 1 ? "high" : "low" }
        })
      )
    )
    for (const r of patches) expect(r.status).toBe(200)
    const told = patches.map((r) => r.body.updated_at).sort()
    const stored = (
      await s.request<{ updated_at: string; title: string; priority: string }>("GET", `/api/tasks/${task.body.id}`, {
        key: user.key
      })
    ).body
    expect(stored.updated_at >= (told.at(-1) ?? "")).toBe(true)
    expect(stored.title).toMatch(/^title \d+$/)
    expect(["high", "low"]).toContain(stored.priority)
  })
})

/**
 * A connection to PostgreSQL through a real TCP relay that holds back, by `delayMs`, what the
 * server sends to the connection that LISTENs: change announcements (`NOTIFY`) arrive late, as
 * they do from a busy server or a slow link. Whatever this process knows of its own changes
 * must then come from the change itself, not from the announcement.
 */
const slowAnnouncements = async (databaseUrl: string, delayMs: number) => {
  const upstream = new URL(databaseUrl)
  const sockets = new Set<Socket>()
  const relay = createServer((client) => {
    const server = connect(Number(upstream.port || 5432), upstream.hostname)
    sockets.add(client)
    sockets.add(server)
    let listener = false
    let queue = Promise.resolve()
    client.on("data", (chunk: Buffer) => {
      if (chunk.toString("latin1").toUpperCase().includes("LISTEN ")) listener = true
      server.write(chunk)
    })
    server.on("data", (chunk: Buffer) => {
      if (!listener) return void client.write(chunk)
      // In order, each chunk held back.
      queue = queue
        .then(() => new Promise((resolve) => setTimeout(resolve, delayMs)))
        .then(() => void client.write(chunk))
    })
    for (const [a, b] of [
      [client, server],
      [server, client]
    ] as const) {
      a.on("error", () => b.destroy())
      a.on("close", () => b.destroy())
    }
  })
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve))
  const url = new URL(databaseUrl)
  url.hostname = "127.0.0.1"
  url.port = String((relay.address() as AddressInfo).port)
  return {
    url: url.toString(),
    close: () => {
      for (const socket of sockets) socket.destroy()
      return new Promise<void>((resolve) => relay.close(() => resolve()))
    }
  }
}

describe.skipIf(!testStores().includes("postgres"))("revocations while announcements are late (PostgreSQL)", () => {
  let database: TestDatabase
  let relay: Awaited<ReturnType<typeof slowAnnouncements>>
  let server: RunningServer
  let dir: string
  let adminKey = ""

  beforeAll(async () => {
    database = await createPgDatabase()
    relay = await slowAnnouncements(database.url, 1_500)
    dir = await mkdtemp(join(tmpdir(), "tw-late-notify-"))
    server = await serve(
      settingsFromEnv(
        { TASKWRIGHT_RATE_LIMIT: "1000000", TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "1000000" },
        { dataDir: dir, databaseUrl: relay.url }
      ),
      { port: 0, host: "127.0.0.1", log: "silent" }
    )
    adminKey = Option.getOrThrow(Option.map(server.started.bootstrap.adminKey, Redacted.value))
    // Until its listener is live the store trusts no cache at all (the epoch moves on every look).
    const store = await server.run(StoreTag)
    const live = () => {
      const first = store.changes.epoch()
      return store.changes.epoch() === first
    }
    while (!live()) await new Promise((resolve) => setTimeout(resolve, 50))
  })
  afterAll(async () => {
    await server.close()
    await relay.close()
    await database.drop()
    await rm(dir, { recursive: true, force: true })
  })

  const request = (method: string, path: string, key: string) =>
    fetch(`${server.url}${path}`, { method, headers: { authorization: `Bearer ${key}` } })
  const newKey = async (name: string) => {
    const r = await fetch(`${server.url}/api/keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminKey}`, "content-type": "application/json" },
      body: JSON.stringify({ name, scopes: ["tasks:read"] })
    })
    expect(r.status).toBe(201)
    return (await r.json()) as { id: string; secret: string }
  }

  it("a lookup that raced the revoke's transaction is forgotten once it commits, not when the announcement comes", async () => {
    const target = await newKey("raced")
    const hash = sha256Hex(target.secret)
    const after = await server.run(
      Effect.gen(function* () {
        const repo = yield* UsersRepo
        expect((yield* repo.credentialByHash(hash))?.revoked_at).toBeNull()
        yield* repo.transaction(
          Effect.gen(function* () {
            yield* repo.revokeKey(target.id, new Date().toISOString())
            // Another request meanwhile, on a connection of its own: it reads the row as committed so far.
            const raced = yield* Effect.promise(() => server.run(repo.credentialByHash(hash)))
            expect(raced?.revoked_at).toBeNull()
          })
        )
        return repo.cachedCredential(hash)
      })
    )
    // Forgotten, or remembered as revoked: never the row from before the revoke.
    expect(after === undefined || after.revoked_at !== null).toBe(true)
    expect((await request("GET", "/api/auth/me", target.secret)).status).toBe(401)
  })

  it("while requests hammer a key, the first request after its revoke's 200 is 401", async () => {
    for (let round = 0; round < 6; round++) {
      const target = await newKey(`hammered ${round}`)
      let stop = false
      const seen: Array<number> = []
      const hammer = async () => {
        while (!stop) seen.push((await request("GET", "/api/auth/me", target.secret)).status)
      }
      const hammers = Array.from({ length: 8 }, hammer)
      while (seen.length < 16) await new Promise((resolve) => setTimeout(resolve, 5))
      const revoked = await request("DELETE", `/api/keys/${target.id}`, adminKey)
      const next = await request("GET", "/api/auth/me", target.secret)
      stop = true
      await Promise.all(hammers)
      expect(revoked.status).toBe(200)
      expect(next.status, `round ${round}`).toBe(401)
    }
  })
})
