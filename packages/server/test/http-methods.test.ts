/**
 * HTTP by the book on every path of the contract (walked with `HttpApi.reflect`) and the documents:
 * another method is 405 with `Allow` naming exactly the methods the path has; `HEAD` answers every
 * GET route with the GET's status and headers and no body; `OPTIONS` is 204 with `Allow`, and,
 * CORS not being configured, no preflight is answered with `Access-Control-*` headers.
 */
import { request as httpRequest } from "node:http"
import { HttpApi } from "@effect/platform"
import { ForwardAuth, TaskwrightApi } from "@taskwright/api"
import { startTestServer, type TestServer } from "@taskwright/testing"
import { Context, Option } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const

/** Each path of the contract with a well-formed value for its parameter, and the methods it has. */
const paths = new Map<string, { methods: Set<string>; forwardAuth: boolean }>()
const sample: Record<string, string> = {
  id: "424242",
  run_id: "run_AAAAAAAAAAAAAAAA",
  name: "zz-methods",
  provider: "github"
}
HttpApi.reflect(TaskwrightApi, {
  onGroup: () => {},
  onEndpoint: ({ endpoint, mergedAnnotations }) => {
    // Key ids share :id with tasks; give them the shape of theirs.
    const value = (name: string) => (endpoint.path.startsWith("/api/keys") ? "key_AAAAAAAAAAAAAAAA" : sample[name])
    const path = endpoint.path.replace(/:(\w+)/g, (_, name: string) => value(name) ?? "x")
    const entry = paths.get(path) ?? { methods: new Set<string>(), forwardAuth: false }
    entry.methods.add(endpoint.method)
    if (Option.isSome(Context.getOption(mergedAnnotations, ForwardAuth))) entry.forwardAuth = true
    paths.set(path, entry)
  }
})
for (const document of ["/api/openapi.json", "/api/docs"])
  paths.set(document, { methods: new Set(["GET"]), forwardAuth: false })

/** What `Allow` must say for a path: its methods, HEAD with GET, and OPTIONS, in the server's order. */
const allowFor = (methods: ReadonlySet<string>) =>
  ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    .filter((m) => methods.has(m) || (m === "HEAD" && methods.has("GET")) || m === "OPTIONS")
    .join(", ")

/** A raw request (fetch cannot send every method, nor show a HEAD's body). */
const raw = (url: string, method: string, headers: Record<string, string> = {}) =>
  new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }>(
    (done, fail) => {
      const req = httpRequest(url, { method, headers }, (res) => {
        let body = ""
        res.setEncoding("utf8")
        res.on("data", (chunk: string) => {
          body += chunk
        })
        res.on("end", () => done({ status: res.statusCode ?? 0, headers: res.headers, body }))
      })
      req.on("error", fail)
      req.end()
    }
  )

describe("HTTP methods on every path", () => {
  let server: TestServer

  beforeAll(async () => {
    server = await startTestServer({
      store: "sqlite",
      env: { TASKWRIGHT_RATE_LIMIT: "1000000", TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "1000000" }
    })
  })
  afterAll(() => server.close())

  const auth = () => ({ authorization: `Bearer ${server.adminKey}` })

  it("covers the contract", () => {
    expect(paths.size).toBeGreaterThan(20)
  })

  it("answers a method a path does not have with 405, Allow and the envelope", async () => {
    for (const [path, { methods, forwardAuth }] of paths) {
      if (forwardAuth) continue
      for (const method of METHODS.filter((m) => !methods.has(m))) {
        const r = await raw(server.url + path, method, auth())
        expect(r.status, `${method} ${path}`).toBe(405)
        expect(r.headers.allow, `${method} ${path}`).toBe(allowFor(methods))
        const body = JSON.parse(r.body) as { error: { code: string; message: string; details: { allow: unknown } } }
        expect(body.error.code).toBe("METHOD_NOT_ALLOWED")
        expect(body.error.details.allow).toEqual(allowFor(methods).split(", "))
      }
    }
  })

  it("answers 405 the same without a credential (the path exists whoever asks)", async () => {
    const r = await raw(`${server.url}/api/tasks`, "DELETE")
    expect(r.status).toBe(405)
    expect(r.headers.allow).toBe("GET, HEAD, POST, OPTIONS")
  })

  it("answers HEAD on every GET route with the GET's status and headers, and no body", async () => {
    for (const [path, { methods }] of paths) {
      if (!methods.has("GET")) continue
      const get = await raw(server.url + path, "GET", auth())
      const head = await raw(server.url + path, "HEAD", auth())
      expect(head.status, `HEAD ${path}`).toBe(get.status)
      expect(head.body, `HEAD ${path}`).toBe("")
      expect(head.headers["content-type"], `HEAD ${path}`).toBe(get.headers["content-type"])
      expect(head.headers["content-length"], `HEAD ${path}`).toBe(String(Buffer.byteLength(get.body)))
      expect(head.headers["x-ratelimit-limit"], `HEAD ${path}`).toBe(get.headers["x-ratelimit-limit"])
    }
    // HEAD of /api/health too, which answers outside the router.
    const health = await raw(`${server.url}/api/health`, "HEAD")
    expect(health.status).toBe(200)
    expect(health.body).toBe("")
  })

  it("answers OPTIONS with 204 and Allow, and no CORS preflight", async () => {
    for (const [path, { methods, forwardAuth }] of paths) {
      if (forwardAuth) continue
      const r = await raw(server.url + path, "OPTIONS", {
        origin: "https://elsewhere.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type"
      })
      expect(r.status, `OPTIONS ${path}`).toBe(204)
      expect(r.body).toBe("")
      expect(r.headers.allow, `OPTIONS ${path}`).toBe(allowFor(methods))
      const cors = Object.keys(r.headers).filter((h) => h.startsWith("access-control-"))
      expect(cors, `OPTIONS ${path}`).toEqual([])
    }
  })

  it("never answers a request from another origin with CORS headers", async () => {
    const r = await raw(`${server.url}/api/tasks`, "GET", { ...auth(), origin: "https://elsewhere.example" })
    expect(r.status).toBe(200)
    expect(Object.keys(r.headers).filter((h) => h.startsWith("access-control-"))).toEqual([])
  })

  it("answers the proxy check for any method, OPTIONS included", async () => {
    for (const method of [...METHODS, "HEAD", "OPTIONS"]) {
      const r = await raw(`${server.url}/api/auth/verify`, method, auth())
      expect(r.status, method).toBe(200)
    }
  })

  it("answers 404 for a path that does not exist, whatever the method", async () => {
    for (const method of [...METHODS, "OPTIONS"]) {
      const r = await raw(`${server.url}/api/nope`, method, auth())
      expect(r.status, method).toBe(404)
      expect(r.headers.allow).toBeUndefined()
    }
  })
})
