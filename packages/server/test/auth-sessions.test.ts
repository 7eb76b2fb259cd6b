/**
 * Browser sessions end to end: login (cookie attributes, token shape, storage as SHA-256, the
 * same answer and timing for an unknown email and a wrong password, the per-account and
 * per-address brute-force budgets), refresh, logout, /api/auth/me and the CSRF `Origin` check.
 */
import { defaultAuthSettings } from "@taskwright/core"
import { startTestServer, type TestServer, testStores } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  cookie,
  createKey,
  createPasswordUser,
  freshWindow,
  login,
  type PasswordUser,
  sha256Hex
} from "./auth-helpers.js"

interface Envelope {
  readonly error: { readonly code: string; readonly message: string; readonly details: Record<string, unknown> }
}

const expectError = (r: { status: number; body: unknown }, status: number, code: string) => {
  expect(r.status).toBe(status)
  expect((r.body as Envelope).error.code).toBe(code)
  expect((r.body as Envelope).error.details).toBeTypeOf("object")
  return (r.body as Envelope).error
}

const median = (xs: Array<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] ?? 0
}

describe.each(testStores())("sessions on %s", (store) => {
  let s: TestServer
  let user: PasswordUser

  beforeAll(async () => {
    s = await startTestServer({
      store,
      env: { TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "100000", TASKWRIGHT_LOGIN_ATTEMPTS: "1000" }
    })
    user = await createPasswordUser(s)
  })
  afterAll(async () => {
    await s.close()
  })

  it("logs in: 200 with user and session, an HttpOnly SameSite=Lax cookie for 7 days, no-store", async () => {
    const r = await s.request<{ user: Record<string, unknown>; session: { token: string; expires_at: string } }>(
      "POST",
      "/api/auth/login",
      { body: { email: user.email, password: user.password } }
    )
    expect(r.status).toBe(200)
    expect(r.body.user).toEqual({ id: user.id, email: user.email, name: "Password User" })
    expect(r.body.session.token).toMatch(/^[A-Za-z0-9_-]{43,}$/)
    const expires = Date.parse(r.body.session.expires_at) - Date.now()
    expect(expires).toBeGreaterThan(7 * 86_400_000 - 60_000)
    expect(expires).toBeLessThanOrEqual(7 * 86_400_000)
    const setCookie = r.headers.get("set-cookie") ?? ""
    expect(setCookie).toContain(`service_session=${r.body.session.token}`)
    expect(setCookie).toMatch(/;\s*HttpOnly/i)
    expect(setCookie).toMatch(/;\s*SameSite=Lax/i)
    expect(setCookie).toMatch(/;\s*Path=\//)
    expect(setCookie).toMatch(/;\s*Max-Age=604800/)
    // Plain HTTP without TASKWRIGHT_PUBLIC_URL: not Secure, or the browser would drop it.
    expect(setCookie).not.toMatch(/;\s*Secure/i)
    expect(r.headers.get("cache-control")).toBe("no-store")
  })

  it("keeps only the SHA-256 of a session token", async () => {
    const token = await login(s, user)
    const rows = await s.query<{ token_hash: string }>("SELECT token_hash FROM sessions")
    expect(rows.map((r) => r.token_hash)).toContain(sha256Hex(token))
    expect(JSON.stringify(await s.query("SELECT * FROM sessions"))).not.toContain(token)
  })

  it("answers an unknown email, a wrong password and a password-less user alike", async () => {
    const wrong = await s.request("POST", "/api/auth/login", { body: { email: user.email, password: "not-it-at-all" } })
    const unknown = await s.request("POST", "/api/auth/login", {
      body: { email: "nobody@example.test", password: "not-it-at-all" }
    })
    // The bootstrap admin has no password: API keys only.
    const passwordless = await s.request("POST", "/api/auth/login", {
      body: { email: "admin@localhost", password: "" }
    })
    expectError(wrong, 401, "UNAUTHORIZED")
    expect(unknown.status).toBe(401)
    expect(unknown.text).toBe(wrong.text)
    expect(wrong.headers.get("www-authenticate")).toMatch(/^Bearer/)
    expect(wrong.headers.get("set-cookie")).toBeNull()
    // An empty password is a malformed request, not a probe of the account.
    expectError(passwordless, 400, "BAD_REQUEST")
    const passwordless2 = await s.request("POST", "/api/auth/login", {
      body: { email: "admin@localhost", password: "anything" }
    })
    expect(passwordless2.text).toBe(wrong.text)
  })

  it("takes about as long for an unknown email as for a wrong password (both verify an argon2id hash)", async () => {
    const time = async (email: string) => {
      const t0 = performance.now()
      const r = await s.request("POST", "/api/auth/login", { body: { email, password: "wrong-password-123" } })
      expect(r.status).toBe(401)
      return performance.now() - t0
    }
    await time(user.email)
    await time("warmup@example.test")
    const known: Array<number> = []
    const unknown: Array<number> = []
    for (let i = 0; i < 8; i++) {
      known.push(await time(user.email))
      unknown.push(await time(`nobody${i}@example.test`))
    }
    const ratio = median(unknown) / median(known)
    // argon2id at m=19 MiB costs tens of milliseconds; without the dummy hash an unknown email
    // would answer in well under a millisecond (a ratio near 0).
    expect(median(known)).toBeGreaterThan(5)
    expect(ratio).toBeGreaterThan(0.5)
    expect(ratio).toBeLessThan(2)
  })

  it("refuses malformed login bodies with 400", async () => {
    expectError(await s.request("POST", "/api/auth/login", { body: { email: user.email } }), 400, "BAD_REQUEST")
    expectError(
      await s.request("POST", "/api/auth/login", { body: { email: user.email, password: "x", extra: 1 } }),
      400,
      "BAD_REQUEST"
    )
    expectError(
      await s.request("POST", "/api/auth/login", { raw: "{", headers: { "content-type": "application/json" } }),
      400,
      "BAD_REQUEST"
    )
  })

  it("authenticates with the cookie: /api/auth/me shows the user, the session and every scope the user has", async () => {
    const token = await login(s, user)
    const me = await s.request<{ user: unknown; scopes: Array<string>; credential: Record<string, unknown> }>(
      "GET",
      "/api/auth/me",
      { headers: cookie(token) }
    )
    expect(me.status).toBe(200)
    expect(me.body.user).toEqual({ id: user.id, email: user.email, name: "Password User" })
    expect(me.body.scopes).toEqual(["tasks:read", "tasks:write", "projects:read", "projects:write", "agents:run"])
    expect(me.body.credential.kind).toBe("session")
    expect(me.body.credential.id).toMatch(/^ses_[0-9A-Za-z]{16}$/)
    expect(Date.parse(String(me.body.credential.expires_at))).toBeGreaterThan(Date.now() + 6 * 86_400_000)
    const tasks = await s.request("GET", "/api/tasks", { headers: cookie(token) })
    expect(tasks.status).toBe(200)
  })

  it("ignores a malformed, unknown or mangled cookie (401)", async () => {
    const token = await login(s, user)
    for (const value of [
      "",
      "x",
      "a".repeat(43),
      `${token.slice(0, -1)}${token.endsWith("A") ? "B" : "A"}`,
      `${token}x`
    ]) {
      expectError(await s.request("GET", "/api/tasks", { headers: cookie(value) }), 401, "UNAUTHORIZED")
    }
  })

  it("refreshes: a new token and expiry, the old token dead at once, the cookie replaced", async () => {
    const old = await login(s, user)
    const r = await s.request<{ session: { token: string; expires_at: string } }>("POST", "/api/auth/refresh", {
      headers: { ...cookie(old), origin: s.url }
    })
    expect(r.status).toBe(200)
    expect(r.body.session.token).toMatch(/^[A-Za-z0-9_-]{43,}$/)
    expect(r.body.session.token).not.toBe(old)
    expect(r.headers.get("set-cookie")).toContain(`service_session=${r.body.session.token}`)
    expect(r.headers.get("cache-control")).toBe("no-store")
    expectError(await s.request("GET", "/api/auth/me", { headers: cookie(old) }), 401, "UNAUTHORIZED")
    expect((await s.request("GET", "/api/auth/me", { headers: cookie(r.body.session.token) })).status).toBe(200)
    // Refreshing with the dead token fails.
    expectError(
      await s.request("POST", "/api/auth/refresh", { headers: { ...cookie(old), origin: s.url } }),
      401,
      "UNAUTHORIZED"
    )
  })

  it("logs out: the session is deleted server-side and the cookie expired", async () => {
    const token = await login(s, user)
    const r = await s.request("POST", "/api/auth/logout", { headers: { ...cookie(token), origin: s.url } })
    expect(r.status).toBe(200)
    expect(r.body).toEqual({ success: true })
    const setCookie = r.headers.get("set-cookie") ?? ""
    expect(setCookie).toMatch(/^service_session=;/)
    expect(setCookie).toMatch(/Max-Age=0/)
    expectError(await s.request("GET", "/api/auth/me", { headers: cookie(token) }), 401, "UNAUTHORIZED")
    const rows = await s.query<{ n: number }>("SELECT COUNT(*) AS n FROM sessions WHERE token_hash = ?", [
      sha256Hex(token)
    ])
    expect(Number(rows[0]?.n)).toBe(0)
  })

  it("refuses logout and refresh with a Bearer credential (they end or renew a browser session)", async () => {
    const key = await s.createUser()
    for (const what of ["logout", "refresh"]) {
      const error = expectError(await s.request("POST", `/api/auth/${what}`, { key: key.key }), 400, "BAD_REQUEST")
      // The refusal names what to change, as every 400 does: the Authorization header.
      expect(error.details).toEqual({
        reason: "not_a_session",
        fields: [{ path: "authorization", message: error.message }]
      })
      expect(error.message).toMatch(new RegExp(`^${what} applies to a browser session`))
    }
    // The key still works: refusing it ended nothing.
    expect((await s.request("GET", "/api/auth/me", { key: key.key })).status).toBe(200)
    expectError(await s.request("POST", "/api/auth/logout"), 401, "UNAUTHORIZED")
  })

  describe("CSRF: cookie-authenticated changes must come from the service's origin", () => {
    let token: string
    beforeAll(async () => {
      token = await login(s, user)
    })

    it("refuses a cross-site Origin and a missing one with 403", async () => {
      const evil = await s.request("POST", "/api/tasks", {
        headers: { ...cookie(token), origin: "https://evil.example" },
        body: { title: "csrf" }
      })
      expectError(evil, 403, "FORBIDDEN")
      expect((evil.body as Envelope).error.details.reason).toBe("csrf")
      expectError(
        await s.request("POST", "/api/tasks", { headers: cookie(token), body: { title: "csrf" } }),
        403,
        "FORBIDDEN"
      )
      expectError(
        await s.request("POST", "/api/tasks", { headers: { ...cookie(token), origin: "null" }, body: { title: "x" } }),
        403,
        "FORBIDDEN"
      )
      expectError(
        await s.request("DELETE", "/api/tasks/1", { headers: { ...cookie(token), referer: "https://evil.example/x" } }),
        403,
        "FORBIDDEN"
      )
      const count = await s.query<{ n: number }>("SELECT COUNT(*) AS n FROM tasks WHERE title = 'csrf'")
      expect(Number(count[0]?.n)).toBe(0)
    })

    it("accepts the service's own Origin (or Referer) and safe methods without one", async () => {
      const ok = await s.request("POST", "/api/tasks", {
        headers: { ...cookie(token), origin: s.url },
        body: { title: "same origin" }
      })
      expect(ok.status).toBe(201)
      const viaReferer = await s.request("POST", "/api/tasks", {
        headers: { ...cookie(token), referer: `${s.url}/board` },
        body: { title: "same origin via referer" }
      })
      expect(viaReferer.status).toBe(201)
      expect((await s.request("GET", "/api/tasks", { headers: cookie(token) })).status).toBe(200)
    })

    it("needs no Origin with a Bearer credential, even if a cookie is sent too", async () => {
      const key = await createKey(s, (await s.createUser()).key, { scopes: ["tasks:write"] })
      const r = await s.request("POST", "/api/tasks", {
        key: key.secret,
        headers: { ...cookie(token), origin: "https://evil.example" },
        body: { title: "bearer" }
      })
      expect(r.status).toBe(201)
    })

    it("refuses a login posted from another site", async () => {
      const r = await s.request("POST", "/api/auth/login", {
        headers: { origin: "https://evil.example" },
        body: { email: user.email, password: user.password }
      })
      expectError(r, 403, "FORBIDDEN")
      expect(r.headers.get("set-cookie")).toBeNull()
    })
  })
})

describe("cookies and origins behind HTTPS", () => {
  let s: TestServer
  let user: PasswordUser
  afterAll(async () => {
    await s.close()
  })
  beforeAll(async () => {
    s = await startTestServer({
      env: { TASKWRIGHT_PUBLIC_URL: "https://tasks.example.com/", TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "1000" }
    })
    user = await createPasswordUser(s)
  })

  it("marks the cookie Secure when TASKWRIGHT_PUBLIC_URL is https", async () => {
    const r = await s.request("POST", "/api/auth/login", { body: { email: user.email, password: user.password } })
    expect(r.status).toBe(200)
    expect(r.headers.get("set-cookie")).toMatch(/;\s*Secure/i)
  })

  it("accepts only the public origin for cookie-authenticated changes", async () => {
    const token = await login(s, user)
    expectError(
      await s.request("POST", "/api/tasks", { headers: { ...cookie(token), origin: s.url }, body: { title: "x" } }),
      403,
      "FORBIDDEN"
    )
    const ok = await s.request("POST", "/api/tasks", {
      headers: { ...cookie(token), origin: "https://tasks.example.com" },
      body: { title: "x" }
    })
    expect(ok.status).toBe(201)
  })
})

describe("X-Forwarded-Proto", () => {
  it("makes the cookie Secure only when the proxy is trusted", async () => {
    for (const [trust, secure] of [
      [undefined, false],
      ["1", true]
    ] as const) {
      const s = await startTestServer({
        env: { ...(trust === undefined ? {} : { TASKWRIGHT_TRUST_PROXY: trust }) }
      })
      try {
        const user = await createPasswordUser(s)
        const r = await s.request("POST", "/api/auth/login", {
          headers: { "x-forwarded-proto": "https", "x-forwarded-for": "203.0.113.7" },
          body: { email: user.email, password: user.password }
        })
        expect(r.status).toBe(200)
        expect(/;\s*Secure/i.test(r.headers.get("set-cookie") ?? "")).toBe(secure)
      } finally {
        await s.close()
      }
    }
  })
})

describe("brute force", () => {
  it("slows login per account, whatever the address, with 429 and Retry-After", async () => {
    const s = await startTestServer({
      env: {
        TASKWRIGHT_LOGIN_ATTEMPTS: "5",
        TASKWRIGHT_TRUST_PROXY: "1",
        TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "1000"
      }
    })
    try {
      const user = await createPasswordUser(s)
      const other = await createPasswordUser(s)
      // The account's window: the default length, which this test's server keeps.
      await freshWindow(defaultAuthSettings.loginWindowMinutes * 60_000)
      const statuses: Array<number> = []
      for (let i = 0; i < 7; i++) {
        const r = await s.request("POST", "/api/auth/login", {
          // A fresh address each time: the per-address budget alone would not stop this.
          headers: { "x-forwarded-for": `198.51.100.${i + 1}` },
          body: { email: user.email.toUpperCase(), password: `guess-${i}` }
        })
        statuses.push(r.status)
        if (r.status === 429) {
          expectError(r, 429, "RATE_LIMITED")
          expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0)
        }
      }
      expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429])
      // The right password does not get through while the account's budget is spent...
      const blocked = await s.request("POST", "/api/auth/login", {
        headers: { "x-forwarded-for": "198.51.100.99" },
        body: { email: user.email, password: user.password }
      })
      expect(blocked.status).toBe(429)
      // ...but other accounts are not affected.
      expect(
        (
          await s.request("POST", "/api/auth/login", {
            headers: { "x-forwarded-for": "198.51.100.99" },
            body: { email: other.email, password: other.password }
          })
        ).status
      ).toBe(200)
    } finally {
      await s.close()
    }
  })

  it("slows login per address: the anonymous budget (10 a minute by default)", async () => {
    const s = await startTestServer()
    try {
      await freshWindow()
      const statuses: Array<number> = []
      for (let i = 0; i < 12; i++) {
        const r = await s.request("POST", "/api/auth/login", {
          body: { email: `someone${i}@example.test`, password: "guess-guess" }
        })
        statuses.push(r.status)
      }
      expect(statuses.slice(0, 10).every((x) => x === 401)).toBe(true)
      expect(statuses.slice(10)).toEqual([429, 429])
    } finally {
      await s.close()
    }
  })
})
