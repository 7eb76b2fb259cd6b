/**
 * API key management over HTTP (the settings page's keys section): create, list, rotate,
 * revoke, usage; scopes never beyond the user or the calling credential; own keys with any
 * credential, other users' with admin; the secret only in the create and rotate answers; usage
 * counted in memory and written in batches, not on every request.
 */
import { settingsFromEnv } from "@taskwright/core"
import { serve } from "@taskwright/server"
import { startTestServer, type TestServer, testStores } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  accessToken,
  cookie,
  createKey,
  createPasswordUser,
  exec,
  login,
  removeDir,
  runCli,
  sha256Hex
} from "./auth-helpers.js"

interface Envelope {
  readonly error: { readonly code: string; readonly message: string; readonly details: Record<string, unknown> }
}
interface Key {
  id: string
  name: string
  prefix: string
  scopes: Array<string>
  user_id: string
  created_at: string
  expires_at: string | null
  revoked_at: string | null
  last_used_at: string | null
  secret?: string
}
interface Usage {
  total_requests: number
  last_used_at: string | null
  last_used_ip: string | null
  by_day: Array<{ date: string; count: number }>
}

const expectError = (r: { status: number; body: unknown }, status: number, code: string) => {
  expect(r.status).toBe(status)
  expect((r.body as Envelope).error.code).toBe(code)
  expect((r.body as Envelope).error.details).toBeTypeOf("object")
}
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe.each(testStores())("keys API on %s", (store) => {
  let s: TestServer
  let alice: { id: string; key: string }
  let bob: { id: string; key: string }

  beforeAll(async () => {
    s = await startTestServer({ store, env: { TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "100000" } })
    alice = await s.createUser()
    bob = await s.createUser()
  })
  afterAll(async () => {
    await s.close()
  })

  it("creates a key: 201, the secret once, stored only as SHA-256, no-store", async () => {
    const r = await s.request<Key>("POST", "/api/keys", {
      key: alice.key,
      body: { name: "ci", scopes: ["tasks:read", "tasks:write"] }
    })
    expect(r.status).toBe(201)
    expect(r.body.secret).toMatch(/^twk_[0-9A-Za-z]{49}$/)
    expect(r.body).toMatchObject({ name: "ci", scopes: ["tasks:read", "tasks:write"], user_id: alice.id })
    expect(r.body.id).toMatch(/^key_[0-9A-Za-z]{16}$/)
    expect(r.body.prefix).toBe(r.body.secret?.slice(0, 10))
    expect(r.headers.get("cache-control")).toBe("no-store")
    const rows = await s.query("SELECT * FROM api_keys WHERE id = ?", [r.body.id])
    expect(JSON.stringify(rows)).not.toContain(r.body.secret)
    expect(JSON.stringify(rows)).toContain(sha256Hex(r.body.secret ?? ""))
    // The new key works at once, with its scopes.
    expect((await s.request("GET", "/api/tasks", { key: r.body.secret })).status).toBe(200)
    expect((await s.request("GET", "/api/projects", { key: r.body.secret })).status).toBe(403)
  })

  it("lists the caller's keys, never a secret", async () => {
    const made = await createKey(s, alice.key, { name: "listed", scopes: ["tasks:read"] })
    const r = await s.request<{ keys: Array<Key>; total: number; limit: number; offset: number }>("GET", "/api/keys", {
      key: alice.key
    })
    expect(r.status).toBe(200)
    expect(r.body.limit).toBe(50)
    expect(r.body.offset).toBe(0)
    expect(r.body.total).toBe(r.body.keys.length)
    expect(r.body.keys.every((k) => k.user_id === alice.id)).toBe(true)
    expect(r.body.keys.map((k) => k.id)).toContain(made.id)
    expect(r.text).not.toContain(made.secret)
    expect(r.body.keys.every((k) => !("secret" in k))).toBe(true)
    const page = await s.request<{ keys: Array<Key>; total: number }>("GET", "/api/keys?limit=1&offset=1", {
      key: alice.key
    })
    expect(page.body.keys).toHaveLength(1)
    expect(page.body.total).toBe(r.body.total)
  })

  it("never grants more scopes than the calling credential holds (403) or the user may hold", async () => {
    const reader = await createKey(s, alice.key, { scopes: ["tasks:read"] })
    const wider = await s.request("POST", "/api/keys", {
      key: reader.secret,
      body: { name: "wider", scopes: ["tasks:read", "tasks:write"] }
    })
    expectError(wider, 403, "FORBIDDEN")
    expect((wider.body as Envelope).error.details.scopes).toEqual(["tasks:write"])
    expect(
      (await s.request("POST", "/api/keys", { key: reader.secret, body: { scopes: ["tasks:read"], name: "same" } }))
        .status
    ).toBe(201)
    // A non-admin cannot mint admin, whatever its credential.
    expectError(
      await s.request("POST", "/api/keys", { key: alice.key, body: { name: "x", scopes: ["admin"] } }),
      403,
      "FORBIDDEN"
    )
    // An admin credential cannot give a non-admin user the admin scope either.
    const forBob = await s.request("POST", "/api/keys", {
      key: s.adminKey,
      body: { name: "x", scopes: ["admin"], user_id: bob.id }
    })
    expectError(forBob, 400, "BAD_REQUEST")
    // Its tokens carry exactly its scopes.
    const token = await accessToken(s, reader.secret)
    expectError(
      await s.request("POST", "/api/keys", { key: token, body: { name: "x", scopes: ["projects:read"] } }),
      403,
      "FORBIDDEN"
    )
  })

  it("validates the body (400 naming the field)", async () => {
    const cases: Array<unknown> = [
      { name: "x", scopes: [] },
      { name: "x", scopes: ["root"] },
      { name: "", scopes: ["tasks:read"] },
      { scopes: ["tasks:read"] },
      { name: "x", scopes: ["tasks:read"], secret: "mine" },
      { name: "x", scopes: ["tasks:read"], expires_at: "tomorrow" },
      { name: "x", scopes: ["tasks:read"], expires_at: "2001-01-01T00:00:00.000Z" },
      { name: "x", scopes: ["tasks:read"], user_id: "nope" }
    ]
    for (const body of cases) {
      const r = await s.request("POST", "/api/keys", { key: alice.key, body })
      expect(r.status, JSON.stringify(body)).toBe(400)
      expectError(r, 400, "BAD_REQUEST")
    }
  })

  it("honours an expiry: the key stops working when it passes", async () => {
    const expiresAt = new Date(Date.now() + 1200).toISOString()
    const key = await createKey(s, alice.key, { scopes: ["tasks:read"], expires_at: expiresAt })
    expect((await s.request("GET", "/api/tasks", { key: key.secret })).status).toBe(200)
    await sleep(1400)
    expectError(await s.request("GET", "/api/tasks", { key: key.secret }), 401, "UNAUTHORIZED")
  })

  it("rotates: same id and scopes, a new secret once, the old secret dead at once", async () => {
    const key = await createKey(s, alice.key, { scopes: ["tasks:read"] })
    const r = await s.request<Key>("POST", `/api/keys/${key.id}/rotate`, { key: alice.key })
    expect(r.status).toBe(200)
    expect(r.body.id).toBe(key.id)
    expect(r.body.scopes).toEqual(["tasks:read"])
    expect(r.body.secret).toMatch(/^twk_/)
    expect(r.body.secret).not.toBe(key.secret)
    expect(r.headers.get("cache-control")).toBe("no-store")
    expectError(await s.request("GET", "/api/tasks", { key: key.secret }), 401, "UNAUTHORIZED")
    expect((await s.request("GET", "/api/tasks", { key: r.body.secret })).status).toBe(200)
  })

  it("revokes: {success:true}, the key dead at once, kept in the list as revoked, 409 the second time", async () => {
    const key = await createKey(s, alice.key, { scopes: ["tasks:read"] })
    const r = await s.request("DELETE", `/api/keys/${key.id}`, { key: alice.key })
    expect(r.status).toBe(200)
    expect(r.body).toEqual({ success: true })
    expectError(await s.request("GET", "/api/tasks", { key: key.secret }), 401, "UNAUTHORIZED")
    const list = await s.request<{ keys: Array<Key> }>("GET", "/api/keys?limit=200", { key: alice.key })
    expect(list.body.keys.find((k) => k.id === key.id)?.revoked_at).not.toBeNull()
    expectError(await s.request("DELETE", `/api/keys/${key.id}`, { key: alice.key }), 409, "CONFLICT")
    expectError(await s.request("POST", `/api/keys/${key.id}/rotate`, { key: alice.key }), 409, "CONFLICT")
  })

  it("keeps other users' keys out of reach (403) unless admin, and says 404 for a missing key", async () => {
    const bobs = await createKey(s, bob.key, { scopes: ["tasks:read"] })
    for (const [method, path] of [
      ["POST", `/api/keys/${bobs.id}/rotate`],
      ["DELETE", `/api/keys/${bobs.id}`],
      ["GET", `/api/keys/${bobs.id}/usage`],
      ["GET", `/api/keys?user_id=${bob.id}`]
    ] as const) {
      expectError(await s.request(method, path, { key: alice.key }), 403, "FORBIDDEN")
    }
    expectError(
      await s.request("POST", "/api/keys", {
        key: alice.key,
        body: { name: "x", scopes: ["tasks:read"], user_id: bob.id }
      }),
      403,
      "FORBIDDEN"
    )
    expect((await s.request("GET", "/api/tasks", { key: bobs.secret })).status).toBe(200)
    const missing = "key_AAAAAAAAAAAAAAAA"
    expectError(await s.request("DELETE", `/api/keys/${missing}`, { key: alice.key }), 404, "NOT_FOUND")
    expectError(await s.request("GET", `/api/keys/${missing}/usage`, { key: alice.key }), 404, "NOT_FOUND")
    expectError(await s.request("DELETE", "/api/keys/nope", { key: alice.key }), 400, "BAD_REQUEST")

    // An admin manages everyone's keys.
    const listed = await s.request<{ keys: Array<Key> }>("GET", `/api/keys?user_id=${bob.id}`, { key: s.adminKey })
    expect(listed.status).toBe(200)
    expect(listed.body.keys.map((k) => k.id)).toContain(bobs.id)
    const made = await s.request<Key>("POST", "/api/keys", {
      key: s.adminKey,
      body: { name: "by admin", scopes: ["tasks:read"], user_id: bob.id }
    })
    expect(made.status).toBe(201)
    expect(made.body.user_id).toBe(bob.id)
    expectError(
      await s.request("POST", "/api/keys", {
        key: s.adminKey,
        body: { name: "x", scopes: ["tasks:read"], user_id: "usr_AAAAAAAAAAAAAAAA" }
      }),
      404,
      "NOT_FOUND"
    )
    expect((await s.request("DELETE", `/api/keys/${bobs.id}`, { key: s.adminKey })).status).toBe(200)
    expectError(await s.request("GET", "/api/tasks", { key: bobs.secret }), 401, "UNAUTHORIZED")
  })

  it("lets a session manage its user's keys too (the settings page)", async () => {
    const user = await createPasswordUser(s)
    const token = await login(s, user)
    const made = await s.request<Key>("POST", "/api/keys", {
      headers: { ...cookie(token), origin: s.url },
      body: { name: "from the browser", scopes: ["tasks:read"] }
    })
    expect(made.status).toBe(201)
    expect(made.body.user_id).toBe(user.id)
    const list = await s.request<{ keys: Array<Key> }>("GET", "/api/keys", { headers: cookie(token) })
    expect(list.body.keys.map((k) => k.id)).toEqual([made.body.id])
  })

  it("reports usage: requests with the key and its tokens, last use, per day", async () => {
    const key = await createKey(s, alice.key, { scopes: ["tasks:read"] })
    const token = await accessToken(s, key.secret)
    const before = await s.request<Usage>("GET", `/api/keys/${key.id}/usage`, { key: alice.key })
    expect(before.body).toEqual({ total_requests: 0, last_used_at: null, last_used_ip: null, by_day: [] })
    for (let i = 0; i < 7; i++) await s.request("GET", "/api/tasks", { key: key.secret })
    for (let i = 0; i < 3; i++) await s.request("GET", "/api/tasks", { key: token })
    const r = await s.request<Usage>("GET", `/api/keys/${key.id}/usage`, { key: alice.key })
    expect(r.status).toBe(200)
    expect(r.body.total_requests).toBe(10)
    expect(r.body.last_used_ip).toBe("127.0.0.1")
    expect(Date.now() - Date.parse(r.body.last_used_at ?? "")).toBeLessThan(10_000)
    expect(r.body.by_day).toEqual([{ date: new Date().toISOString().slice(0, 10), count: 10 }])
    // The owner may read it with the key itself.
    const own = await s.request<Usage>("GET", `/api/keys/${key.id}/usage`, { key: key.secret })
    expect(own.body.total_requests).toBe(11)
    // Within about a second it is in the store, and the list shows the last use.
    await sleep(1500)
    const rows = await s.query<{ total_requests: number | string; last_used_ip: string }>(
      "SELECT total_requests, last_used_ip FROM api_keys WHERE id = ?",
      [key.id]
    )
    expect(Number(rows[0]?.total_requests)).toBe(11)
    expect(rows[0]?.last_used_ip).toBe("127.0.0.1")
    const days = await s.query<{ count: number | string }>("SELECT count FROM api_key_usage WHERE key_id = ?", [key.id])
    expect(days.map((d) => Number(d.count))).toEqual([11])
    const list = await s.request<{ keys: Array<Key> }>("GET", "/api/keys?limit=200", { key: alice.key })
    expect(list.body.keys.find((k) => k.id === key.id)?.last_used_at).not.toBeNull()
  })

  it("counts a batch that is being written in every report taken meanwhile", async () => {
    const key = await createKey(s, alice.key, { scopes: ["tasks:read"] })
    // On PostgreSQL the report reads on another connection than the batch's transaction; a
    // trigger holds that transaction open for 300 ms so that reports fall inside it.
    if (store === "postgres") {
      await exec(
        s,
        "CREATE FUNCTION usage_slow_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.3); RETURN NEW; END $$"
      )
      await exec(
        s,
        `CREATE TRIGGER usage_slow_write_t AFTER UPDATE OF total_requests ON api_keys FOR EACH ROW WHEN (NEW.id = '${key.id}') EXECUTE FUNCTION usage_slow_write()`
      )
    }
    for (let i = 0; i < 5; i++) await s.request("GET", "/api/tasks", { key: key.secret })
    const totals: Array<number> = []
    for (const until = Date.now() + 2500; Date.now() < until; await sleep(40)) {
      const r = await s.request<Usage>("GET", `/api/keys/${key.id}/usage`, { key: alice.key })
      totals.push(r.body.total_requests)
    }
    expect(new Set(totals)).toEqual(new Set([5]))
    const rows = await s.query<{ total_requests: number | string }>(
      "SELECT total_requests FROM api_keys WHERE id = ?",
      [key.id]
    )
    expect(Number(rows[0]?.total_requests)).toBe(5)
    if (store === "postgres") {
      await exec(s, "DROP TRIGGER usage_slow_write_t ON api_keys")
      await exec(s, "DROP FUNCTION usage_slow_write()")
    }
  })

  it("writes usage in batches, not once per request", async () => {
    const key = await createKey(s, alice.key, { scopes: ["tasks:read"] })
    const trigger =
      store === "postgres"
        ? [
            "CREATE TABLE usage_writes (key_id TEXT NOT NULL)",
            "CREATE FUNCTION usage_writes_log() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO usage_writes VALUES (NEW.id); RETURN NEW; END $$",
            "CREATE TRIGGER usage_writes_t AFTER UPDATE OF total_requests ON api_keys FOR EACH ROW EXECUTE FUNCTION usage_writes_log()"
          ]
        : [
            "CREATE TABLE usage_writes (key_id TEXT NOT NULL)",
            "CREATE TRIGGER usage_writes_t AFTER UPDATE OF total_requests ON api_keys BEGIN INSERT INTO usage_writes VALUES (NEW.id); END"
          ]
    for (const ddl of trigger) await exec(s, ddl)
    const t0 = Date.now()
    for (let round = 0; round < 10; round++) {
      await Promise.all(Array.from({ length: 30 }, () => s.request("GET", "/api/tasks", { key: key.secret })))
    }
    const elapsed = Date.now() - t0
    await sleep(1500)
    const writes = await s.query<{ n: number | string }>("SELECT COUNT(*) AS n FROM usage_writes WHERE key_id = ?", [
      key.id
    ])
    // 300 requests; one write per flush (every second), not one per request.
    expect(Number(writes[0]?.n)).toBeGreaterThan(0)
    expect(Number(writes[0]?.n)).toBeLessThanOrEqual(Math.ceil(elapsed / 1000) + 2)
    const rows = await s.query<{ total_requests: number | string }>(
      "SELECT total_requests FROM api_keys WHERE id = ?",
      [key.id]
    )
    expect(Number(rows[0]?.total_requests)).toBe(300)
  })
})

describe("usage at shutdown and in the CLI", () => {
  it("writes the pending batch when the server stops, and `taskwright keys usage` reports it", async () => {
    const s = await startTestServer({ store: "sqlite-file" })
    const user = await s.createUser()
    const key = await createKey(s, user.key, { scopes: ["tasks:read"] })
    for (let i = 0; i < 25; i++) await s.request("GET", "/api/tasks", { key: key.secret })
    // Stop at once: no flush tick has to happen first.
    await s.server.close()
    try {
      const usage = await runCli(["keys", "usage", key.id, "--data-dir", s.dataDir, "--json"])
      expect(usage.code, usage.stderr).toBe(0)
      const report = JSON.parse(usage.stdout) as Usage
      expect(report.total_requests).toBe(25)
      expect(report.last_used_ip).toBe("127.0.0.1")
      expect(report.by_day).toEqual([{ date: new Date().toISOString().slice(0, 10), count: 25 }])
      const text = await runCli(["keys", "usage", key.id, "--data-dir", s.dataDir])
      expect(text.code).toBe(0)
      expect(text.stdout).toContain("25 request(s)")
      const missing = await runCli(["keys", "usage", "key_AAAAAAAAAAAAAAAA", "--data-dir", s.dataDir])
      expect(missing.code).not.toBe(0)
      const list = await runCli(["keys", "list", "--data-dir", s.dataDir, "--json"])
      expect(list.code).toBe(0)
      expect(list.stdout).not.toContain(key.secret)
      // A restarted server reports the same.
      const again = await serve(settingsFromEnv({}, { dataDir: s.dataDir }), {
        port: 0,
        host: "127.0.0.1",
        log: "silent"
      })
      try {
        const r = await fetch(`${again.url}/api/keys/${key.id}/usage`, {
          headers: { authorization: `Bearer ${user.key}` }
        })
        expect(((await r.json()) as Usage).total_requests).toBe(25)
      } finally {
        await again.close()
      }
    } finally {
      await removeDir(s.dataDir)
    }
  })
})
