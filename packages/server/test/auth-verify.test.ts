/**
 * `/api/auth/verify`, the check reverse proxies call: any method, never waits for a body, 200
 * with `X-User-Id` and `X-Scopes`, 401 without a valid credential, 403 without `?scope=`, and
 * never 429 or a redirect (proxies turn those into 500).
 */
import { connect } from "node:net"
import { startTestServer, type TestServer, testStores } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { accessToken, cookie, createPasswordUser, freshWindow, login } from "./auth-helpers.js"

/** Sends raw bytes and answers the first response's status line and headers, or times out. */
const raw = (url: string, text: string, timeoutMs = 2000) =>
  new Promise<string>((resolve, reject) => {
    const { hostname, port } = new URL(url)
    const socket = connect(Number(port), hostname, () => socket.write(text))
    let got = ""
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new Error(`no answer within ${timeoutMs} ms`))
    }, timeoutMs)
    socket.on("data", (chunk) => {
      got += chunk.toString()
      if (got.includes("\r\n\r\n")) {
        clearTimeout(timer)
        socket.destroy()
        resolve(got)
      }
    })
    socket.on("error", reject)
  })

describe.each(testStores())("/api/auth/verify on %s", (store) => {
  let s: TestServer
  let user: { id: string; key: string }

  beforeAll(async () => {
    s = await startTestServer({ store, env: { TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "1000" } })
    user = await s.createUser({ scopes: ["tasks:read", "agents:run"] })
  })
  afterAll(async () => {
    await s.close()
  })

  it("answers 200 with X-User-Id and X-Scopes for any method", async () => {
    for (const method of ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]) {
      const r = await s.request(method, "/api/auth/verify", { key: user.key })
      expect(r.status, method).toBe(200)
      expect(r.headers.get("x-user-id")).toBe(user.id)
      expect(r.headers.get("x-scopes")).toBe("tasks:read,agents:run")
      expect(r.headers.get("cache-control")).toBe("no-store")
      expect(r.headers.get("x-ratelimit-limit")).toBe("1000")
    }
    const body = await s.request<{ user_id: string; scopes: Array<string> }>("GET", "/api/auth/verify", {
      key: user.key
    })
    expect(body.body).toEqual({ user_id: user.id, scopes: ["tasks:read", "agents:run"] })
  })

  it("spells admin out as every scope it implies", async () => {
    const r = await s.request("GET", "/api/auth/verify", { key: s.adminKey })
    expect(r.headers.get("x-scopes")).toBe("tasks:read,tasks:write,projects:read,projects:write,agents:run,admin")
  })

  it("accepts an access token and the session cookie", async () => {
    const token = await accessToken(s, user.key)
    expect((await s.request("GET", "/api/auth/verify", { key: token })).headers.get("x-user-id")).toBe(user.id)
    const person = await createPasswordUser(s)
    const session = await login(s, person)
    const r = await s.request("POST", "/api/auth/verify", { headers: cookie(session) })
    expect(r.status).toBe(200)
    expect(r.headers.get("x-user-id")).toBe(person.id)
  })

  it("requires ?scope= when given: 403 without it, 200 with it", async () => {
    expect((await s.request("GET", "/api/auth/verify?scope=tasks:read", { key: user.key })).status).toBe(200)
    const r = await s.request("GET", "/api/auth/verify?scope=tasks:write", { key: user.key })
    expect(r.status).toBe(403)
    expect(r.body).toMatchObject({ error: { code: "FORBIDDEN", details: { required_scope: "tasks:write" } } })
    expect((await s.request("GET", "/api/auth/verify?scope=no-such-scope", { key: user.key })).status).toBe(403)
    expect((await s.request("GET", "/api/auth/verify?scope=tasks:write", { key: s.adminKey })).status).toBe(200)
  })

  it("answers 401 with WWW-Authenticate without a valid credential", async () => {
    for (const headers of [{}, { authorization: "Bearer twk_nope" }, { authorization: "Basic abc" }, cookie("x")]) {
      const r = await s.request("GET", "/api/auth/verify", { headers })
      expect(r.status).toBe(401)
      expect(r.headers.get("www-authenticate")).toMatch(/^Bearer/)
      expect(r.headers.get("x-user-id")).toBeNull()
    }
  })

  it("never waits for a body: a POST that announces one it never sends is answered at once", async () => {
    const answer = await raw(
      s.url,
      `POST /api/auth/verify HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${user.key}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n`
    )
    expect(answer).toMatch(/^HTTP\/1\.1 200 /)
    expect(answer.toLowerCase()).toContain(`x-user-id: ${user.id.toLowerCase()}`)
    const chunked = await raw(
      s.url,
      "PUT /api/auth/verify HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    expect(chunked).toMatch(/^HTTP\/1\.1 401 /)
  })
})

describe("/api/auth/verify over budget", () => {
  it("answers 401 (never 429) to a caller without a credential over the anonymous budget", async () => {
    const s = await startTestServer()
    try {
      await freshWindow()
      const statuses: Array<number> = []
      for (let i = 0; i < 14; i++) statuses.push((await s.request("GET", "/api/auth/verify")).status)
      expect(statuses.every((x) => x === 401)).toBe(true)
      // The budget really is spent: the same caller elsewhere gets 429.
      expect((await s.request("GET", "/api/tasks")).status).toBe(429)
      // A valid credential is not affected.
      expect((await s.request("GET", "/api/auth/verify", { key: s.adminKey })).status).toBe(200)
    } finally {
      await s.close()
    }
  })

  it("answers 403 with Retry-After (never 429) to a valid credential over its budget", async () => {
    const s = await startTestServer({ env: { TASKWRIGHT_RATE_LIMIT: "5" } })
    try {
      await freshWindow()
      const answers = []
      for (let i = 0; i < 7; i++) answers.push(await s.request("GET", "/api/auth/verify", { key: s.adminKey }))
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 403, 403])
      const last = answers[6]
      expect(Number(last?.headers.get("retry-after"))).toBeGreaterThan(0)
      expect(last?.body).toMatchObject({ error: { code: "FORBIDDEN", details: { limit: 5 } } })
    } finally {
      await s.close()
    }
  })
})
