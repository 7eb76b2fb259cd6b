/**
 * Key management tried as an attacker would: a weak credential (a read-only key, an access token
 * made from one, an admin's read-only key) must not rotate, revoke or mint a key stronger than
 * itself; concurrent key changes are atomic (one revoke of many wins; a rotate never answers a
 * secret that was not stored); concurrent PATCHes of one task both land and `updated_at` follows
 * commit order. On every store.
 */
import { startTestServer, type TestServer, testStores } from "@taskwright/testing"
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
    s = await startTestServer({ store, env: { TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "100000" } })
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
    expectRefused(
      await s.request("POST", "/api/keys", { key: weak.secret, body: { name: "x", scopes: ["tasks:write"] } })
    )
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
