/**
 * Access tokens: minted from an API key, verified here with `jose` using only the published
 * secret and algorithm, carrying exactly the documented claims; refused when expired, tampered,
 * unsigned, signed with another algorithm, or when their key is revoked, rotated or expired.
 */
import { settingsFromEnv } from "@taskwright/core"
import { serve } from "@taskwright/server"
import { startTestServer, type TestServer, testStores } from "@taskwright/testing"
import { decodeProtectedHeader, jwtVerify } from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { accessToken, createKey, decodeJwt, forgeJwt, removeDir } from "./auth-helpers.js"

const SECRET = "a-test-secret-of-at-least-thirty-two-bytes!"

interface Envelope {
  readonly error: { readonly code: string; readonly details: Record<string, unknown> }
}
const expect401 = (r: { status: number; body: unknown; headers: Headers }) => {
  expect(r.status).toBe(401)
  expect((r.body as Envelope).error.code).toBe("UNAUTHORIZED")
  expect(r.headers.get("www-authenticate")).toMatch(/^Bearer/)
}

describe.each(testStores())("access tokens on %s", (store) => {
  let s: TestServer
  let owner: { id: string; key: string }

  beforeAll(async () => {
    s = await startTestServer({
      store,
      env: { TASKWRIGHT_JWT_SECRET: SECRET, TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "100000" }
    })
    owner = await s.createUser()
  })
  afterAll(async () => {
    await s.close()
  })

  it("answers {access_token, token_type, expires_in: 3600} with Cache-Control: no-store", async () => {
    const key = await createKey(s, owner.key, { scopes: ["tasks:read"] })
    const r = await s.request<{ access_token: string; token_type: string; expires_in: number }>(
      "POST",
      "/api/auth/token",
      { body: { api_key: key.secret } }
    )
    expect(r.status).toBe(200)
    expect(Object.keys(r.body).sort()).toEqual(["access_token", "expires_in", "token_type"])
    expect(r.body.token_type).toBe("Bearer")
    expect(r.body.expires_in).toBe(3600)
    expect(r.headers.get("cache-control")).toBe("no-store")
  })

  it("signs HS256 with kid and exactly sub, iat, exp, scope and jti, verifiable with the published secret", async () => {
    const key = await createKey(s, owner.key, { scopes: ["tasks:read", "projects:read"] })
    const token = await accessToken(s, key.secret)
    const header = decodeProtectedHeader(token)
    expect(header.alg).toBe("HS256")
    expect(header.typ).toBe("JWT")
    expect(typeof header.kid).toBe("string")
    const { payload } = await jwtVerify(token, new TextEncoder().encode(SECRET), {
      algorithms: ["HS256"],
      requiredClaims: ["sub", "iat", "exp", "jti"]
    })
    expect(Object.keys(payload).sort()).toEqual(["exp", "iat", "jti", "scope", "sub"])
    expect(payload.sub).toBe(owner.id)
    expect(payload.scope).toEqual(["tasks:read", "projects:read"])
    expect((payload.exp ?? 0) - (payload.iat ?? 0)).toBe(3600)
    expect(Math.abs((payload.iat ?? 0) - Date.now() / 1000)).toBeLessThan(60)
    expect(payload.jti).toMatch(/^[0-9A-Za-z]{22}$/)
    // The wrong secret does not verify it.
    await expect(jwtVerify(token, new TextEncoder().encode(`${SECRET}x`), { algorithms: ["HS256"] })).rejects.toThrow()
  })

  it("works as a Bearer credential with its key's scopes, and /api/auth/me says so", async () => {
    const key = await createKey(s, owner.key, { scopes: ["tasks:read"] })
    const token = await accessToken(s, key.secret)
    expect((await s.request("GET", "/api/tasks", { key: token })).status).toBe(200)
    const denied = await s.request("POST", "/api/tasks", { key: token, body: { title: "x" } })
    expect(denied.status).toBe(403)
    expect((denied.body as Envelope).error.details.required_scope).toBe("tasks:write")
    const me = await s.request<{ scopes: Array<string>; credential: Record<string, unknown> }>("GET", "/api/auth/me", {
      key: token
    })
    expect(me.status).toBe(200)
    expect(me.body.scopes).toEqual(["tasks:read"])
    expect(me.body.credential.kind).toBe("jwt")
    expect(me.body.credential.id).toBe(decodeJwt(token).payload.jti)
    expect(me.body.credential.key_id).toBe(key.id)
    expect(me.body.credential.expires_at).toBe(new Date(Number(decodeJwt(token).payload.exp) * 1000).toISOString())
  })

  it("stops working when its key is revoked", async () => {
    const key = await createKey(s, owner.key, { scopes: ["tasks:read"] })
    const token = await accessToken(s, key.secret)
    expect((await s.request("GET", "/api/tasks", { key: token })).status).toBe(200)
    expect((await s.request("DELETE", `/api/keys/${key.id}`, { key: owner.key })).status).toBe(200)
    expect401(await s.request("GET", "/api/tasks", { key: token }))
  })

  it("stops working when its key is rotated (the new secret mints new tokens)", async () => {
    const key = await createKey(s, owner.key, { scopes: ["tasks:read"] })
    const token = await accessToken(s, key.secret)
    const rotated = await s.request<{ secret: string }>("POST", `/api/keys/${key.id}/rotate`, { key: owner.key })
    expect(rotated.status).toBe(200)
    expect401(await s.request("GET", "/api/tasks", { key: token }))
    const fresh = await accessToken(s, rotated.body.secret)
    expect((await s.request("GET", "/api/tasks", { key: fresh })).status).toBe(200)
  })

  it("stops working when its key expires, and never outlives it", async () => {
    const expiresAt = new Date(Date.now() + 1500).toISOString()
    const key = await createKey(s, owner.key, { scopes: ["tasks:read"], expires_at: expiresAt })
    const r = await s.request<{ access_token: string; expires_in: number }>("POST", "/api/auth/token", {
      body: { api_key: key.secret }
    })
    expect(r.status).toBe(200)
    expect(r.body.expires_in).toBeLessThanOrEqual(2)
    expect((await s.request("GET", "/api/tasks", { key: r.body.access_token })).status).toBe(200)
    await new Promise((resolve) => setTimeout(resolve, 1700))
    expect401(await s.request("GET", "/api/tasks", { key: r.body.access_token }))
    expect401(await s.request("POST", "/api/auth/token", { body: { api_key: key.secret } }))
  })

  it("refuses forged, expired, tampered, unsigned and other-algorithm tokens", async () => {
    const key = await createKey(s, owner.key, { scopes: ["tasks:read"] })
    const good = await accessToken(s, key.secret)
    const { header, payload } = decodeJwt(good)
    const now = Math.floor(Date.now() / 1000)
    const variants: Record<string, string> = {
      expired: forgeJwt(header, { ...payload, iat: now - 7200, exp: now - 3600 }, SECRET),
      "no exp": forgeJwt(
        header,
        { sub: payload.sub, iat: payload.iat, scope: payload.scope, jti: payload.jti },
        SECRET
      ),
      "no iat": forgeJwt(
        header,
        { sub: payload.sub, exp: payload.exp, scope: payload.scope, jti: payload.jti },
        SECRET
      ),
      "no sub": forgeJwt(
        header,
        { iat: payload.iat, exp: payload.exp, scope: payload.scope, jti: payload.jti },
        SECRET
      ),
      "no jti": forgeJwt(
        header,
        { sub: payload.sub, iat: payload.iat, exp: payload.exp, scope: payload.scope },
        SECRET
      ),
      "far future exp": forgeJwt(header, { ...payload, exp: now + 86_400 * 365 }, SECRET),
      "iat in the future": forgeJwt(header, { ...payload, iat: now + 3000, exp: now + 6000 }, SECRET),
      "another user": forgeJwt(header, { ...payload, sub: "usr_AAAAAAAAAAAAAAAA" }, SECRET),
      "unknown jti": forgeJwt(header, { ...payload, jti: "AAAAAAAAAAAAAAAAAAAAAA" }, SECRET),
      "wrong kid": forgeJwt({ ...header, kid: "other" }, payload, SECRET),
      "alg none": forgeJwt({ ...header, alg: "none" }, payload, undefined),
      "alg none, signature kept": `${forgeJwt({ ...header, alg: "none" }, payload, undefined)}${good.split(".")[2]}`,
      HS512: forgeJwt({ ...header, alg: "HS512" }, payload, SECRET, 512),
      "wrong secret": forgeJwt(header, payload, `${SECRET}!`),
      "tampered payload": `${good.split(".")[0]}.${Buffer.from(JSON.stringify({ ...payload, scope: ["admin"] })).toString("base64url")}.${good.split(".")[2]}`,
      "tampered signature": `${good.slice(0, -2)}${good.endsWith("AA") ? "BB" : "AA"}`,
      truncated: good.slice(0, good.lastIndexOf(".")),
      "two dots only": `${good}.`
    }
    for (const [name, token] of Object.entries(variants)) {
      const r = await s.request("GET", "/api/tasks", { key: token })
      expect(r.status, name).toBe(401)
      expect401(r)
    }
    // The genuine one still works.
    expect((await s.request("GET", "/api/tasks", { key: good })).status).toBe(200)
  })

  it("never grants more than its key holds, even when signed with the real secret", async () => {
    const key = await createKey(s, owner.key, { scopes: ["tasks:read"] })
    const good = await accessToken(s, key.secret)
    const { header, payload } = decodeJwt(good)
    const widened = forgeJwt(header, { ...payload, scope: ["tasks:read", "tasks:write", "admin"] }, SECRET)
    const me = await s.request<{ scopes: Array<string> }>("GET", "/api/auth/me", { key: widened })
    expect(me.status).toBe(200)
    expect(me.body.scopes).toEqual(["tasks:read"])
    expect((await s.request("POST", "/api/tasks", { key: widened, body: { title: "x" } })).status).toBe(403)
  })

  it("is minted only from an API key: not from a token, a session, or garbage (401)", async () => {
    const key = await createKey(s, owner.key, { scopes: ["tasks:read"] })
    const token = await accessToken(s, key.secret)
    expect401(await s.request("POST", "/api/auth/token", { body: { api_key: token } }))
    expect401(await s.request("POST", "/api/auth/token", { body: { api_key: "twk_nope" } }))
    expect401(
      await s.request("POST", "/api/auth/token", {
        body: { api_key: `${key.secret.slice(0, -1)}${key.secret.endsWith("x") ? "y" : "x"}` }
      })
    )
    const bad = await s.request("POST", "/api/auth/token", { body: { key: key.secret } })
    expect(bad.status).toBe(400)
  })

  it("records every token against its key (jti -> key), nothing secret", async () => {
    const key = await createKey(s, owner.key, { scopes: ["tasks:read"] })
    const token = await accessToken(s, key.secret)
    const rows = await s.query<{ jti: string; key_id: string }>(
      "SELECT jti, key_id FROM access_tokens WHERE key_id = ?",
      [key.id]
    )
    expect(rows).toEqual([{ jti: decodeJwt(token).payload.jti, key_id: key.id }])
  })
})

describe("the JWT secret", () => {
  it("refuses to start with a TASKWRIGHT_JWT_SECRET shorter than 32 bytes", async () => {
    const settings = settingsFromEnv({ TASKWRIGHT_JWT_SECRET: "too-short-secret" }, { databaseUrl: ":memory:" })
    await expect(serve(settings, { port: 0, host: "127.0.0.1", log: "silent" })).rejects.toThrow(/32 bytes/)
  })

  it("is generated once and kept in the store: tokens survive a restart, and differ per store", async () => {
    const s = await startTestServer({ store: "sqlite-file" })
    let token: string
    try {
      token = await accessToken(s, s.adminKey)
      const stored = await s.query<{ value: string }>("SELECT value FROM settings WHERE key = 'jwt_secret'")
      expect(stored[0]?.value).toMatch(/^[A-Za-z0-9_-]{43}$/)
      await jwtVerify(token, new TextEncoder().encode(stored[0]?.value ?? ""), { algorithms: ["HS256"] })
    } finally {
      await s.server.close()
    }
    const again = await serve(settingsFromEnv({}, { dataDir: s.dataDir }), {
      port: 0,
      host: "127.0.0.1",
      log: "silent"
    })
    try {
      const r = await fetch(`${again.url}/api/auth/me`, { headers: { authorization: `Bearer ${token}` } })
      expect(r.status).toBe(200)
    } finally {
      await again.close()
      await removeDir(s.dataDir)
    }
    const other = await startTestServer()
    try {
      expect((await other.request("GET", "/api/auth/me", { key: token })).status).toBe(401)
    } finally {
      await other.close()
    }
  })

  it("takes the configured secret's UTF-8 bytes as the HMAC key", async () => {
    const unicode = "ключ-доступа-taskwright-🔑-secret"
    expect(new TextEncoder().encode(unicode).length).toBeGreaterThanOrEqual(32)
    const s = await startTestServer({ env: { TASKWRIGHT_JWT_SECRET: unicode } })
    try {
      const token = await accessToken(s, s.adminKey)
      await jwtVerify(token, new TextEncoder().encode(unicode), { algorithms: ["HS256"] })
    } finally {
      await s.close()
    }
  })
})
