/**
 * How the server hands out the app: client routes answer index.html, the API keeps its JSON
 * 404, hashed assets are cached for good and compressed by Accept-Encoding, validators give 304,
 * and the page's Content-Security-Policy admits only this origin.
 */
import { request as httpRequest } from "node:http"
import type { TestServer } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startServer } from "./harness.js"

interface Raw {
  readonly status: number
  readonly headers: Record<string, string | undefined>
  readonly body: Buffer
}

/** A request without fetch's automatic decompression, so encodings can be checked as sent. */
const raw = (url: string, method = "GET", headers: Record<string, string> = {}): Promise<Raw> =>
  new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: Object.fromEntries(
            Object.entries(res.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(", ") : v])
          ),
          body: Buffer.concat(chunks)
        })
      )
    })
    req.on("error", reject)
    req.end()
  })

describe("serving the web app", () => {
  let server: TestServer
  let scripts: Array<string> = []

  beforeAll(async () => {
    server = await startServer()
  })
  afterAll(() => server?.close())

  it("answers index.html for each client route, with the page's security headers", async () => {
    for (const path of ["/", "/tasks/12", "/projects", "/settings/keys", "/settings/agents"]) {
      const r = await raw(server.url + path)
      expect(r.status, path).toBe(200)
      expect(r.headers["content-type"]).toBe("text/html; charset=utf-8")
      expect(r.headers["cache-control"]).toBe("no-cache")
      expect(r.headers["x-content-type-options"]).toBe("nosniff")
      const csp = r.headers["content-security-policy"] ?? ""
      const host = new URL(server.url).host
      expect(csp).toContain("default-src 'none'")
      expect(csp).toContain("script-src 'self';")
      expect(csp).toContain("style-src 'self';")
      expect(csp).toContain(`connect-src 'self' ws://${host} wss://${host}`)
      expect(csp).toContain("frame-ancestors 'none'")
      expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|https?:/)
      const html = r.body.toString("utf8")
      expect(html).toContain('<div id="app">')
      // No inline script: every script element loads a file of this origin.
      const tags = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)]
      expect(tags.length).toBeGreaterThan(0)
      for (const [, attrs, body] of tags) {
        expect(attrs).toMatch(/\ssrc="\/assets\/[^"]+\.js"/)
        expect(body?.trim()).toBe("")
      }
      scripts = tags.map(([, attrs]) => /src="([^"]+)"/.exec(attrs ?? "")?.[1] ?? "")
      // The app's first reads are preloaded with the page: the session on every screen, and on
      // the board the first two pages of tasks.
      const preloads = [...(r.headers.link ?? "").matchAll(/<([^>]+)>; rel=preload; as=fetch; crossorigin=anonymous/g)]
      expect(preloads.map((m) => m[1])).toEqual(
        path === "/"
          ? ["/api/auth/me", "/api/tasks?limit=200&offset=0", "/api/tasks?limit=200&offset=200"]
          : ["/api/auth/me"]
      )
    }
    const asset = await raw(server.url + (scripts[0] ?? ""))
    expect(asset.headers.link).toBeUndefined()
  })

  it("keeps the API's JSON 404 for unknown /api paths and for paths that are not the app's", async () => {
    for (const path of ["/api/nope", "/api/tasks/1/nothing", "/api", "/nope", "/tasks/abc", "/assets/missing.js"]) {
      const r = await raw(server.url + path)
      expect(r.status, path).toBe(404)
      expect(r.headers["content-type"]).toContain("application/json")
      expect(JSON.parse(r.body.toString("utf8")).error.code).toBe("NOT_FOUND")
    }
    const health = await raw(`${server.url}/api/health`)
    expect(health.status).toBe(200)
  })

  it("serves hashed assets for a year, compressed by Accept-Encoding, with 304 on a matching ETag", async () => {
    const script = scripts[0] ?? ""
    expect(script).toMatch(/^\/assets\/.+-[A-Za-z0-9_-]{8}\.js$/)
    const plain = await raw(server.url + script)
    expect(plain.status).toBe(200)
    expect(plain.headers["content-type"]).toBe("text/javascript; charset=utf-8")
    expect(plain.headers["cache-control"]).toBe("public, max-age=31536000, immutable")
    expect(plain.headers["x-content-type-options"]).toBe("nosniff")
    expect(plain.headers.vary).toBe("Accept-Encoding")
    expect(plain.headers["content-encoding"]).toBeUndefined()

    const br = await raw(server.url + script, "GET", { "accept-encoding": "gzip, deflate, br" })
    expect(br.headers["content-encoding"]).toBe("br")
    expect(br.body.length).toBeLessThan(plain.body.length / 2)
    expect(Number(br.headers["content-length"])).toBe(br.body.length)

    const gz = await raw(server.url + script, "GET", { "accept-encoding": "gzip" })
    expect(gz.headers["content-encoding"]).toBe("gzip")
    expect(gz.body.length).toBeLessThan(plain.body.length / 2)

    const noBr = await raw(server.url + script, "GET", { "accept-encoding": "br;q=0, gzip" })
    expect(noBr.headers["content-encoding"]).toBe("gzip")

    const etag = plain.headers.etag ?? ""
    expect(etag).toMatch(/^W\/".+"$/)
    expect(br.headers.etag).toBe(etag)
    const again = await raw(server.url + script, "GET", { "if-none-match": etag, "accept-encoding": "br" })
    expect(again.status).toBe(304)
    expect(again.body.length).toBe(0)
    expect(again.headers["cache-control"]).toBe("public, max-age=31536000, immutable")

    const index = await raw(`${server.url}/`)
    const revalidated = await raw(`${server.url}/settings/keys`, "GET", { "if-none-match": index.headers.etag ?? "" })
    expect(revalidated.status).toBe(304)
  })

  it("answers HEAD with the headers and no body", async () => {
    const head = await raw(`${server.url}/projects`, "HEAD", { "accept-encoding": "br" })
    expect(head.status).toBe(200)
    expect(head.body.length).toBe(0)
    expect(Number(head.headers["content-length"])).toBeGreaterThan(0)
  })

  it("answers another method on the app's paths with 405 and Allow, OPTIONS with 204 and Allow", async () => {
    const script = scripts[0] ?? ""
    for (const path of ["/", "/tasks/12", "/projects", "/settings/keys", "/settings/agents", script, "/favicon.svg"]) {
      for (const method of ["POST", "PUT", "PATCH", "DELETE"]) {
        const r = await raw(server.url + path, method)
        expect(r.status, `${method} ${path}`).toBe(405)
        expect(r.headers.allow, `${method} ${path}`).toBe("GET, HEAD, OPTIONS")
        expect(r.headers["content-type"]).toBe("application/json; charset=utf-8")
        const body = JSON.parse(r.body.toString("utf8")) as { error: { code: string; message: string } }
        expect(body.error.code).toBe("METHOD_NOT_ALLOWED")
        expect(body.error.message).toBe(`${method} is not allowed on ${path}; allowed: GET, HEAD, OPTIONS`)
      }
      const options = await raw(server.url + path, "OPTIONS")
      expect(options.status, `OPTIONS ${path}`).toBe(204)
      expect(options.headers.allow).toBe("GET, HEAD, OPTIONS")
      expect(options.body.length).toBe(0)
      // Not a CORS preflight answer: no other origin is let in.
      expect(options.headers["access-control-allow-origin"]).toBeUndefined()
    }
    // A body sent with the refused method does not stall the connection.
    const withBody = await fetch(`${server.url}/`, { method: "POST", body: "x".repeat(100_000) })
    expect(withBody.status).toBe(405)
    // The API answers its own paths the same way, and paths that are neither stay 404.
    const api = await raw(`${server.url}/api/tasks`, "DELETE")
    expect(api.status).toBe(405)
    expect(api.headers.allow).toContain("GET")
    for (const method of ["POST", "OPTIONS"]) {
      const r = await raw(`${server.url}/nope`, method)
      expect(r.status, `${method} /nope`).toBe(404)
    }
  })

  it("leaves a hostile Host header out of the policy", async () => {
    const r = await raw(`${server.url}/`, "GET", { host: "evil.example; script-src *" })
    expect(r.headers["content-security-policy"]).toContain("connect-src 'self';")
    expect(r.headers["content-security-policy"]).not.toContain("evil")
  })
})
