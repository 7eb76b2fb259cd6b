/**
 * Rate limits through the HTTP API, on each store (in memory for SQLite, in the database for
 * PostgreSQL): exact under concurrency, the right budget per credential, the anonymous budget per
 * client address, and the X-RateLimit-* headers on every /api answer.
 */
import { startTestServer, type TestServer, testStores } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { accessToken, burst, cookie, createKey, createPasswordUser, freshWindow, login } from "./auth-helpers.js"

const expectRateHeaders = (headers: Headers, limit: number) => {
  expect(Number(headers.get("x-ratelimit-limit"))).toBe(limit)
  const remaining = Number(headers.get("x-ratelimit-remaining"))
  expect(remaining).toBeGreaterThanOrEqual(0)
  expect(remaining).toBeLessThanOrEqual(limit)
  const reset = Number(headers.get("x-ratelimit-reset"))
  const now = Date.now() / 1000
  expect(reset).toBeGreaterThan(now - 1)
  expect(reset).toBeLessThanOrEqual(Math.ceil(now) + 60)
  expect(Number.isInteger(reset)).toBe(true)
}

describe.each(testStores())("rate limits on %s", (store) => {
  describe("the default budgets (1000 per credential, 10 per address)", () => {
    let s: TestServer
    beforeAll(async () => {
      s = await startTestServer({ store })
    })
    afterAll(async () => {
      await s.close()
    })

    it("admits exactly the limit when twice the limit arrives at once (API key: 1000)", async () => {
      const user = await s.createUser()
      await freshWindow()
      const r = await burst(`${s.url}/api/tasks?limit=1`, 2000, { headers: { authorization: `Bearer ${user.key}` } })
      expect(r.statuses).toEqual({ 200: 1000, 429: 1000 })
      const remaining = r.responses
        .filter((x) => x.status === 200)
        .map((x) => Number(x.headers["x-ratelimit-remaining"]))
      // Every admitted request saw a distinct count: 999, 998, ..., 0.
      expect(new Set(remaining).size).toBe(1000)
      expect(Math.min(...remaining)).toBe(0)
      const refused = r.responses.find((x) => x.status === 429)
      expect(Number(refused?.headers["retry-after"])).toBeGreaterThan(0)
      expect(refused?.headers["x-ratelimit-remaining"]).toBe("0")
    })

    it("admits exactly 10 anonymous requests of 20 sent at once, then 429 with Retry-After", async () => {
      await freshWindow()
      const r = await burst(`${s.url}/api/tasks`, 20)
      expect(r.statuses).toEqual({ 401: 10, 429: 10 })
      const body = await fetch(`${s.url}/api/tasks`)
      expect(body.status).toBe(429)
      expect(await body.json()).toMatchObject({ error: { code: "RATE_LIMITED", details: { limit: 10 } } })
      expect(Number(body.headers.get("retry-after"))).toBeGreaterThan(0)
      expectRateHeaders(body.headers, 10)
      // A credential that fails to authenticate spends the same anonymous budget.
      expect((await s.request("GET", "/api/tasks", { key: "twk_invalid" })).status).toBe(429)
    })

    it("does not let an exhausted anonymous budget block authenticated callers", async () => {
      const user = await s.createUser()
      await burst(`${s.url}/api/tasks`, 15)
      expect((await s.request("GET", "/api/tasks")).status).toBe(429)
      const ok = await s.request("GET", "/api/tasks", { key: user.key })
      expect(ok.status).toBe(200)
      expectRateHeaders(ok.headers, 1000)
    })

    it("never limits /api/health, and leaves its answer without rate headers", async () => {
      const r = await burst(`${s.url}/api/health`, 50)
      expect(r.statuses).toEqual({ 200: 50 })
      expect(r.responses[0]?.headers["x-ratelimit-limit"]).toBeUndefined()
    })
  })

  describe("budgets per credential", () => {
    let s: TestServer
    beforeAll(async () => {
      s = await startTestServer({
        store,
        env: { TASKWRIGHT_RATE_LIMIT: "20", TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "1000", TASKWRIGHT_LOGIN_ATTEMPTS: "100" }
      })
    })
    afterAll(async () => {
      await s.close()
    })

    it("puts X-RateLimit-* on every /api answer: 2xx, 4xx, documents and unknown routes", async () => {
      const user = await s.createUser({ scopes: ["tasks:read"] })
      const answers = [
        await s.request("GET", "/api/tasks", { key: user.key }),
        await s.request("POST", "/api/tasks", { key: user.key, body: { title: "x" } }),
        await s.request("GET", "/api/tasks/abc", { key: user.key }),
        await s.request("GET", "/api/tasks/999999", { key: user.key }),
        await s.request("GET", "/api/nope", { key: user.key }),
        await s.request("GET", "/api/auth/me", { key: user.key })
      ]
      expect(answers.map((a) => a.status)).toEqual([200, 403, 400, 404, 404, 200])
      for (const a of answers) expectRateHeaders(a.headers, 20)
      const remaining = answers.map((a) => Number(a.headers.get("x-ratelimit-remaining")))
      expect(remaining).toEqual([19, 18, 17, 16, 15, 14])
      for (const a of [
        await s.request("GET", "/api/tasks"),
        await s.request("GET", "/api/openapi.json"),
        await s.request("GET", "/api/docs"),
        await s.request("DELETE", "/api/nowhere")
      ]) {
        expectRateHeaders(a.headers, 1000)
      }
    })

    it("gives an API key and the access tokens made from it one budget; another key its own", async () => {
      const user = await s.createUser()
      const key = await createKey(s, user.key, { scopes: ["tasks:read"] })
      const other = await createKey(s, user.key, { scopes: ["tasks:read"] })
      const token = await accessToken(s, key.secret)
      await freshWindow()
      const viaKey = await burst(`${s.url}/api/tasks`, 12, { headers: { authorization: `Bearer ${key.secret}` } })
      const viaToken = await burst(`${s.url}/api/tasks`, 12, { headers: { authorization: `Bearer ${token}` } })
      expect((viaKey.statuses[200] ?? 0) + (viaToken.statuses[200] ?? 0)).toBe(20)
      expect((viaKey.statuses[429] ?? 0) + (viaToken.statuses[429] ?? 0)).toBe(4)
      expect((await s.request("GET", "/api/tasks", { key: other.secret })).status).toBe(200)
    })

    it("answers each refusal of a flood in its own words: its budget, and the retry-after its header gives, second by second", async () => {
      const user = await s.createUser()
      await freshWindow()
      await burst(`${s.url}/api/tasks`, 20, { headers: { authorization: `Bearer ${user.key}` } })
      const seen = new Set<number>()
      const until = Date.now() + 1_300
      while (Date.now() < until) {
        const refused = await s.request("GET", "/api/tasks", { key: user.key })
        expect(refused.status).toBe(429)
        const retryAfter = Number(refused.headers.get("retry-after"))
        expect(refused.body).toEqual({
          error: {
            code: "RATE_LIMITED",
            message: `rate limit exceeded: 20 requests per minute per credential; retry after ${retryAfter} s`,
            details: { limit: 20, retry_after: retryAfter }
          }
        })
        seen.add(retryAfter)
        // Other answers in between: the proxy check refuses the same budget as 403, no credential is 401.
        const verify = await s.request("GET", "/api/auth/verify", { key: user.key })
        expect(verify.status).toBe(403)
        expect(verify.text).toMatch(/per credential; retry after \d+ s"/)
        const anonymous = await s.request("GET", "/api/tasks")
        expect(anonymous.status).toBe(401)
        expect(anonymous.body).toMatchObject({ error: { code: "UNAUTHORIZED" } })
        await new Promise((resolve) => setTimeout(resolve, 40))
      }
      // The countdown moved at least once, and every refusal said where it stood.
      expect(seen.size).toBeGreaterThanOrEqual(2)
    })

    it("counts sessions per user: two sessions of one user share a budget", async () => {
      const user = await createPasswordUser(s)
      const a = await login(s, user)
      const b = await login(s, user)
      await freshWindow()
      const first = await burst(`${s.url}/api/tasks`, 15, { headers: cookie(a) })
      const second = await burst(`${s.url}/api/tasks`, 15, { headers: cookie(b) })
      expect((first.statuses[200] ?? 0) + (second.statuses[200] ?? 0)).toBe(20)
      // Another user is not affected.
      const other = await createPasswordUser(s)
      expect((await s.request("GET", "/api/tasks", { headers: cookie(await login(s, other)) })).status).toBe(200)
    })
  })

  describe("client addresses", () => {
    it("ignores X-Forwarded-For unless TASKWRIGHT_TRUST_PROXY is set", async () => {
      const s = await startTestServer({ store, env: { TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "3" } })
      try {
        await freshWindow()
        const statuses: Array<number> = []
        for (let i = 0; i < 5; i++) {
          statuses.push(
            (await s.request("GET", "/api/tasks", { headers: { "x-forwarded-for": `203.0.113.${i}` } })).status
          )
        }
        expect(statuses).toEqual([401, 401, 401, 429, 429])
      } finally {
        await s.close()
      }
    })

    it("counts per forwarded address behind a trusted proxy, taking the entry the proxy added", async () => {
      const s = await startTestServer({
        store,
        env: { TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "3", TASKWRIGHT_TRUST_PROXY: "1" }
      })
      try {
        await freshWindow()
        const as = async (xff: string) =>
          (await s.request("GET", "/api/tasks", { headers: { "x-forwarded-for": xff } })).status
        expect([await as("203.0.113.1"), await as("203.0.113.1"), await as("203.0.113.1")]).toEqual([401, 401, 401])
        expect(await as("203.0.113.1")).toBe(429)
        expect(await as("203.0.113.2")).toBe(401)
        // A client cannot escape by prepending its own entries: the proxy's (rightmost) one counts.
        expect(await as("198.51.100.7, 203.0.113.1")).toBe(429)
        // IPv6 clients are counted per /64.
        expect(await as("2001:db8:1:2::1")).toBe(401)
        expect(await as("2001:db8:1:2::2")).toBe(401)
        expect(await as("2001:db8:1:2:ffff::3")).toBe(401)
        expect(await as("2001:db8:1:2::4")).toBe(429)
        expect(await as("2001:db8:1:3::1")).toBe(401)
      } finally {
        await s.close()
      }
    })
  })
})

describe("the API's documents", () => {
  it("have a budget of their own per address: reloading the reference does not spend the anonymous one", async () => {
    const s = await startTestServer({ store: "sqlite" })
    try {
      // One view of the reference loads the page, its script and the document; twenty views.
      for (let i = 0; i < 20; i++) {
        for (const path of ["/api/docs", "/api/openapi.json"]) {
          const r = await s.request("GET", path)
          expect(r.status).toBe(200)
          expect(r.headers.get("x-ratelimit-limit")).toBe("300")
        }
      }
      // The anonymous budget (10 a minute) is untouched.
      const anonymous = await s.request("GET", "/api/tasks")
      expect(anonymous.status).toBe(401)
      expect(anonymous.headers.get("x-ratelimit-limit")).toBe("10")
      expect(anonymous.headers.get("x-ratelimit-remaining")).toBe("9")
    } finally {
      await s.close()
    }
  })
})
