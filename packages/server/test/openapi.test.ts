/**
 * The OpenAPI document as a user reads it, fetched from a running server: Spectral's OpenAPI rules
 * and the OWASP API Security ruleset (`.spectral.yaml`) find no error in it, and every operation
 * has a summary, a description, an example request and answer, every error status in the common
 * envelope, and the rate-limit headers on the answers that carry them.
 */
import { execFile } from "node:child_process"
import { mkdtemp, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { promisify } from "node:util"
import { startTestServer, type TestServer } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const run = promisify(execFile)
const ROOT = resolve(__dirname, "..", "..", "..")
const SPECTRAL = join(ROOT, "node_modules", ".bin", "spectral")

type Json = Record<string, unknown>
interface Finding {
  readonly code: string
  readonly message: string
  readonly path: ReadonlyArray<string | number>
  readonly severity: number
}

const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
const ALL_SCOPES = ["tasks:read", "tasks:write", "projects:read", "projects:write", "agents:run", "admin"] as const
interface Envelope {
  readonly error: { readonly code: string; readonly message: string; readonly details: Json }
}
const METHODS = ["get", "put", "post", "delete", "patch"] as const

/** Spectral's findings on `document`, with the committed ruleset. */
const lint = async (document: unknown): Promise<ReadonlyArray<Finding>> => {
  const dir = await mkdtemp(join(tmpdir(), "tw-openapi-"))
  try {
    const file = join(dir, "openapi.json")
    await writeFile(file, JSON.stringify(document))
    // Spectral exits non-zero when it finds errors; its JSON report is what matters.
    const out = await run(SPECTRAL, ["lint", "-r", join(ROOT, ".spectral.yaml"), "-f", "json", "-q", file], {
      cwd: ROOT,
      maxBuffer: 64 * 1024 * 1024
    }).catch((error: { stdout?: string; stderr?: string }) => {
      if (typeof error.stdout === "string" && error.stdout.trim().startsWith("[")) return { stdout: error.stdout }
      throw new Error(`spectral failed: ${error.stderr ?? String(error)}`)
    })
    return JSON.parse(out.stdout) as ReadonlyArray<Finding>
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

describe("the OpenAPI document served at /api/openapi.json", () => {
  let server: TestServer
  let doc: Json
  let version: string | null

  beforeAll(async () => {
    server = await startTestServer({ store: "sqlite" })
    const r = await server.request<Json>("GET", "/api/openapi.json")
    expect(r.status).toBe(200)
    doc = r.body
    version = r.headers.get("x-taskwright-version")
  })
  afterAll(() => server.close())

  /** Follows a `$ref` into the document's components. */
  const deref = (schema: unknown): Json => {
    if (!isRecord(schema)) return {}
    const ref = schema.$ref
    if (typeof ref !== "string") return schema
    const found = ref
      .replace(/^#\//, "")
      .split("/")
      .reduce<unknown>(
        (node, key) => (isRecord(node) ? node[key.replaceAll("~1", "/").replaceAll("~0", "~")] : undefined),
        doc
      )
    return deref(found)
  }

  const operations = (): ReadonlyArray<{ readonly path: string; readonly method: string; readonly op: Json }> => {
    const out: Array<{ path: string; method: string; op: Json }> = []
    for (const [path, item] of Object.entries(doc.paths as Json)) {
      for (const method of METHODS) {
        const op = (item as Json)[method]
        if (isRecord(op)) out.push({ path, method, op })
      }
    }
    return out
  }

  it("passes Spectral's OpenAPI rules and the OWASP API Security rules with no error", async () => {
    const findings = await lint(doc)
    const errors = findings.filter((f) => f.severity === 0)
    expect(errors.map((f) => `${f.code} at ${f.path.join(".")}: ${f.message}`)).toEqual([])
    // Warnings are allowed by CI but none is expected: report them if one appears.
    expect(findings.filter((f) => f.severity === 1).map((f) => `${f.code} at ${f.path.join(".")}`)).toEqual([])
  }, 120_000)

  it("says who runs it, under which licence, where, and how to authenticate", () => {
    const info = doc.info as Json
    expect(info.version).toBe(version)
    expect(info.contact).toBeTypeOf("object")
    expect((info.license as Json).name).toBe("MIT")
    expect(doc.servers).toEqual([expect.objectContaining({ url: "/", "x-internal": false })])
    const schemes = (doc.components as Json).securitySchemes as Json
    expect(schemes).toEqual({
      apiKey: expect.objectContaining({ type: "http", scheme: "bearer" }),
      accessToken: expect.objectContaining({ type: "http", scheme: "bearer", bearerFormat: "JWT" }),
      session: expect.objectContaining({ type: "apiKey", in: "cookie", name: "service_session" })
    })
    const tags = doc.tags as ReadonlyArray<Json>
    expect(tags.length).toBeGreaterThan(0)
    for (const tag of tags) expect(tag.description, String(tag.name)).toBeTypeOf("string")
  })

  it("gives every operation a summary, a description and an example request and answer", () => {
    const missing: Array<string> = []
    for (const { path, method, op } of operations()) {
      const where = `${method.toUpperCase()} ${path}`
      if (typeof op.summary !== "string" || op.summary === "") missing.push(`${where}: summary`)
      if (typeof op.description !== "string" || op.description === "") missing.push(`${where}: description`)
      const body = isRecord(op.requestBody) ? deref((op.requestBody.content as Json)["application/json"]) : undefined
      if (body !== undefined && !Array.isArray(deref(body.schema).examples)) missing.push(`${where}: request example`)
      for (const [status, response] of Object.entries(op.responses as Json)) {
        const content = (response as Json).content
        if (!isRecord(content)) continue
        const schema = deref((content["application/json"] as Json).schema)
        const examples = schema.examples ?? (Array.isArray(schema.anyOf) ? deref(schema.anyOf[0]).examples : undefined)
        if (!Array.isArray(examples)) missing.push(`${where}: ${status} example`)
      }
    }
    expect(missing).toEqual([])
  })

  it("answers every error in the common envelope, with the headers the server sends", () => {
    for (const { path, method, op } of operations()) {
      const where = `${method.toUpperCase()} ${path}`
      const responses = op.responses as Json
      for (const [status, response] of Object.entries(responses)) {
        const headers = ((response as Json).headers ?? {}) as Json
        if (Number(status) >= 400) {
          const schema = deref(((response as Json).content as Json)["application/json"] as Json)
          const envelope = deref(schema.schema)
          expect(envelope.required, `${where} ${status}`).toEqual(["error"])
          const error = deref((envelope.properties as Json).error)
          expect(error.required, `${where} ${status}`).toEqual(["code", "message", "details"])
        }
        if (path !== "/api/health" && status !== "413") {
          expect(Object.keys(headers), `${where} ${status}`).toEqual(
            expect.arrayContaining(["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"])
          )
        }
        if (status === "413") expect(headers, `${where} 413`).not.toHaveProperty("X-RateLimit-Limit")
        if (status === "429") expect(headers, where).toHaveProperty("Retry-After")
        if (status === "401") expect(headers, where).toHaveProperty("WWW-Authenticate")
      }
      if (path === "/api/health") expect(Object.keys(responses).sort()).toEqual(["200", "503"])
      else if (path === "/api/auth/verify")
        expect(Object.keys(responses).sort()).toEqual(["200", "400", "401", "403", "500", "503"])
      else expect(Object.keys(responses), where).toEqual(expect.arrayContaining(["400", "413", "429", "500", "503"]))
    }
  })

  /** The examples of an operation's answer with `status`, by name. */
  const examplesOf = (op: Json, status: string): ReadonlyArray<{ summary: string; value: Envelope }> => {
    const media = (((op.responses as Json)[status] as Json | undefined)?.content as Json | undefined)?.[
      "application/json"
    ] as Json | undefined
    return Object.values((media?.examples ?? {}) as Record<string, { summary: string; value: Envelope }>)
  }

  it("shows each endpoint's own error answers: its resource, its scope, its reasons", async () => {
    const missing: Array<string> = []
    const shared = new Map<string, Set<string>>()
    for (const { path, method, op } of operations()) {
      for (const status of ["400", "403", "404", "409"]) {
        if ((op.responses as Json)[status] === undefined) continue
        const shown = examplesOf(op, status)
        if (shown.length === 0) missing.push(`${method.toUpperCase()} ${path} ${status}`)
        for (const { value } of shown) {
          const key = `${status} ${value.error.message}`
          shared.set(key, (shared.get(key) ?? new Set()).add(path.split("/")[2] ?? ""))
        }
      }
    }
    expect(missing).toEqual([])
    // A 409 example says what its own endpoint refuses: none is shared across resources but the
    // limit on runs (once every 409 said "the task has a running agent run", on projects and keys too).
    const crossing = [...shared]
      .filter(([key, resources]) => key.startsWith("409") && resources.size > 1)
      .filter(([key]) => !key.includes("agent runs are already running"))
    expect(crossing.map(([key, resources]) => `${key}: ${[...resources].join(", ")}`)).toEqual([])

    // The 404 examples (once "task 42 not found" on the keys endpoints too) and the missing-scope
    // 403 examples are what the server answers, word for word.
    const fresh = await startTestServer({ store: "sqlite" })
    try {
      const lacking = new Map<string, string>()
      const found: Array<string> = []
      for (const { path, method, op } of operations()) {
        const body = deref(
          ((op.requestBody as Json | undefined)?.content as Json | undefined)?.["application/json"]
        ).schema
        const example = (deref(body).examples as ReadonlyArray<unknown> | undefined)?.[0]
        for (const { summary, value } of examplesOf(op, "404")) {
          const id = value.error.details.id
          if (!/\{\w+\}/.test(path) || id === undefined || value.error.details.reason !== undefined) continue
          if (value.error.details.resource === "oauth provider") continue
          const url = path.replace(/\{\w+\}/, encodeURIComponent(String(id)))
          const r = await fresh.request(method.toUpperCase(), url, {
            key: fresh.adminKey,
            ...(example === undefined ? {} : { body: example })
          })
          expect(r.body, `${method.toUpperCase()} ${url}: ${summary}`).toEqual(value)
          found.push(`${method.toUpperCase()} ${path}`)
        }
        for (const { summary, value } of examplesOf(op, "403")) {
          const scope = value.error.details.required_scope
          if (typeof scope !== "string" || summary !== `The credential lacks ${scope}`) continue
          const others = ALL_SCOPES.filter((s) => s !== scope && s !== "admin")
          const key =
            lacking.get(scope) ?? (await fresh.createUser({ scopes: others as Array<(typeof ALL_SCOPES)[number]> })).key
          lacking.set(scope, key)
          const url = path.replace(/\{\w+\}/, "1")
          const r = await fresh.request(method.toUpperCase(), url, { key })
          expect(r.body, `${method.toUpperCase()} ${url}: ${summary}`).toEqual(value)
        }
      }
      expect(lacking.size).toBeGreaterThan(3)
      expect(found).toEqual(
        expect.arrayContaining(["GET /api/tasks/{id}", "POST /api/keys/{id}/rotate", "POST /api/tasks/{id}/run"])
      )
      expect(found.length).toBeGreaterThan(12)
    } finally {
      await fresh.close()
    }
  })

  it("documents exactly the statuses the server answers for what a client gets wrong", async () => {
    const admin = server.adminKey
    const reader = await server.createUser({ scopes: ["tasks:read"] })
    const seen = async (method: string, path: string, options: Parameters<TestServer["request"]>[2]) => {
      const r = await server.request(method, path, options)
      const op = ((doc.paths as Json)[path.replace(/\?.*$/, "").replace(/\/\d+(\/|$)/, "/{id}$1")] as Json)?.[
        method.toLowerCase()
      ]
      return { status: r.status, documented: Object.keys((op as Json)?.responses ?? {}), headers: r.headers }
    }
    const cases = [
      await seen("GET", "/api/tasks", {}),
      await seen("POST", "/api/tasks", { key: reader.key, body: { title: "x" } }),
      await seen("POST", "/api/tasks", { key: admin, body: [1] }),
      await seen("GET", "/api/tasks/424242", { key: admin }),
      await seen("POST", "/api/tasks", {
        key: admin,
        raw: JSON.stringify({ title: "x".repeat(2 * 1024 * 1024) }),
        headers: { "content-type": "application/json" }
      })
    ]
    for (const c of cases) expect(c.documented).toContain(String(c.status))
    expect(cases.map((c) => c.status)).toEqual([401, 403, 400, 404, 413])
    // The rate-limit headers are where the document says they are.
    expect(cases[0]?.headers.get("x-ratelimit-limit")).toMatch(/^\d+$/)
    expect(cases[4]?.headers.get("x-ratelimit-limit")).toBeNull()
    expect(cases[0]?.headers.get("www-authenticate")).toMatch(/^Bearer/)
    // Without a credential the budget is 10 a minute per client address: the 429 and its Retry-After.
    let limited = await seen("GET", "/api/tasks", {})
    for (let i = 0; i < 20 && limited.status !== 429; i++) limited = await seen("GET", "/api/tasks", {})
    expect(limited.status).toBe(429)
    expect(limited.documented).toContain("429")
    expect(limited.headers.get("retry-after")).toMatch(/^\d+$/)
    expect(limited.headers.get("x-ratelimit-remaining")).toBe("0")
  })
})
