/**
 * Bad input never gives a 500: random and mutated bodies, query strings and ids are thrown at
 * every endpoint, over HTTP and through the in-process API (`tw.as(user)`, which reaches the
 * services without any HTTP decoding in front). Each answer is a 2xx or a 4xx in the envelope (a
 * `TaskwrightError` in-process), and a 4xx leaves the database exactly as it was: no bad input is
 * stored, whichever face it came through. API keys and users are fuzzed too (the keys endpoint, and
 * in-process `as(user).keys`, the operator's `tw.keys.create` and `tw.users.create`), and what was
 * stored afterwards reads back in the contract's shapes.
 */
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { TaskwrightError } from "@taskwright/api"
import { ApiKeyList, User } from "@taskwright/core"
import { createHarness, type Harness, startTestServer, type TestServer, testStores } from "@taskwright/testing"
import { Schema } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const snapshot = async (s: Pick<TestServer, "query">) =>
  JSON.stringify(
    await s.query(
      "SELECT (SELECT COUNT(*) FROM tasks) AS t, (SELECT COUNT(*) FROM projects) AS p, (SELECT COUNT(*) FROM labels) AS l, (SELECT COALESCE(MAX(updated_at), '') FROM tasks) AS u, (SELECT COALESCE(SUM(n), 0) FROM task_counts) AS c, (SELECT COUNT(*) FROM api_keys) AS k, (SELECT COUNT(*) FROM users) AS us"
    )
  )

const validTask = { title: "A task", description: "text", priority: "high", labels: ["a", "b"] }
const validLabel = { name: "Label", color: "#123456" }
const validKey = { name: "CI", scopes: ["tasks:read", "tasks:write"], expires_at: "2099-01-01T00:00:00Z" }
const validUser = { email: "fuzz@example.test", name: "Fuzz", admin: false }

/**
 * Every stored key and user reads back in the contract's shapes (an expiry with its milliseconds,
 * a trimmed name of 1-100 characters), whatever was sent to make them.
 */
const storedReadBack = async (s: Pick<TestServer, "query">) => {
  const keys = await s.query<Record<string, unknown>>(
    "SELECT id, name, prefix, scopes, user_id, created_at, expires_at, revoked_at, last_used_at FROM api_keys"
  )
  const list = {
    keys: keys.map((k) => ({ ...k, scopes: String(k.scopes).split(",") })),
    total: keys.length,
    limit: 1,
    offset: 0
  }
  expect(() => Schema.decodeUnknownSync(Schema.Struct({ keys: ApiKeyList.fields.keys }))(list)).not.toThrow()
  for (const key of keys) expect(String(key.name).trim()).toBe(key.name)
  const users = await s.query<Record<string, unknown>>("SELECT id, email, name FROM users")
  for (const user of users) {
    expect(() => Schema.decodeUnknownSync(User)(user)).not.toThrow()
    expect(String(user.name).trim()).toBe(user.name)
    expect(String(user.name).length).toBeGreaterThan(0)
  }
}

/** A valid body with one field replaced, removed or added. */
const mutated = (valid: Record<string, unknown>) =>
  fc.oneof(
    fc
      .record({ key: fc.constantFrom(...Object.keys(valid)), value: fc.anything() })
      .map(({ key, value }) => ({ ...valid, [key]: value })),
    fc.constantFrom(...Object.keys(valid)).map((key) => {
      const { [key]: _, ...rest } = valid
      return rest
    }),
    fc.record({ key: fc.string(), value: fc.anything() }).map(({ key, value }) => ({ ...valid, [key]: value }))
  )

const anyBody = (valid: Record<string, unknown>) =>
  fc.oneof(
    fc.anything(),
    fc.object(),
    mutated(valid),
    fc.string().map((raw) => ({ __raw: raw }))
  )

const pathSegment = fc.oneof(
  fc.string(),
  fc.integer().map(String),
  fc.constantFrom("0", "-1", "1e3", "0x1", "99999999999999999999", "%00", "..", "proj_", "proj_xxxxxxxxxxxxxxxx!")
)
const query = fc.dictionary(
  fc.constantFrom("status", "priority", "project_id", "user_id", "limit", "offset", "cascade", "x"),
  fc.oneof(fc.string(), fc.integer().map(String))
)

describe.each(testStores())("bad input on %s", (store) => {
  let s: TestServer
  let key: string
  let projectDir: string

  beforeAll(async () => {
    s = await startTestServer({ store })
    key = (await s.createUser()).key
    projectDir = await mkdtemp(join(tmpdir(), "tw-fuzz-"))
  })
  afterAll(async () => {
    await s.close()
    await rm(projectDir, { recursive: true, force: true })
  })

  const send = async (method: string, path: string, body?: unknown) => {
    const before = await snapshot(s)
    const raw = typeof body === "object" && body !== null && "__raw" in body ? String(body.__raw) : undefined
    const r =
      raw !== undefined
        ? await s.request(method, path, { key, raw, headers: { "content-type": "application/json" } })
        : await s.request(
            method,
            path,
            body === undefined
              ? { key }
              : { key, raw: JSON.stringify(body) ?? "null", headers: { "content-type": "application/json" } }
          )
    expect(r.status, `${method} ${path} ${JSON.stringify(body)} → ${r.text}`).toBeLessThan(500)
    if (r.status >= 400) {
      const envelope = r.body as { error: { code: string; message: string; details: unknown } }
      expect(typeof envelope.error.code).toBe("string")
      expect(typeof envelope.error.message).toBe("string")
      expect(envelope.error.details).toBeTypeOf("object")
      expect(await snapshot(s)).toBe(before)
    }
  }

  const runs = store === "postgres" ? 60 : 150

  it("POST /api/tasks", async () => {
    await fc.assert(
      fc.asyncProperty(anyBody(validTask), (body) => send("POST", "/api/tasks", body)),
      { numRuns: runs }
    )
  })
  it("PATCH /api/tasks/:id", async () => {
    const t = await s.request<{ id: number }>("POST", "/api/tasks", { key, body: validTask })
    await fc.assert(
      fc.asyncProperty(anyBody({ status: "done", priority: "low" }), (body) =>
        send("PATCH", `/api/tasks/${t.body.id}`, body)
      ),
      { numRuns: runs }
    )
  })
  it("POST /api/labels", async () => {
    await fc.assert(
      fc.asyncProperty(anyBody(validLabel), (body) => send("POST", "/api/labels", body)),
      { numRuns: runs }
    )
  })
  it("POST /api/projects", async () => {
    await fc.assert(
      fc.asyncProperty(anyBody({ name: "P", path: projectDir }), (body) => send("POST", "/api/projects", body)),
      { numRuns: runs }
    )
  })
  it("POST /api/keys", async () => {
    await fc.assert(
      fc.asyncProperty(anyBody(validKey), (body) => send("POST", "/api/keys", body)),
      { numRuns: runs }
    )
    await storedReadBack(s)
  })
  it("ids in every path", async () => {
    await fc.assert(
      fc.asyncProperty(
        pathSegment,
        fc.constantFrom(
          ["GET", "/api/tasks/"],
          ["PATCH", "/api/tasks/"],
          ["DELETE", "/api/tasks/"],
          ["GET", "/api/projects/"],
          ["DELETE", "/api/projects/"],
          ["DELETE", "/api/keys/"],
          ["GET", "/api/keys/"]
        ),
        (id, [method, prefix]) =>
          send(method, prefix + encodeURIComponent(id), method === "PATCH" ? { status: "done" } : undefined)
      ),
      { numRuns: runs }
    )
  })
  it("query strings on every list", async () => {
    await fc.assert(
      fc.asyncProperty(query, fc.constantFrom("/api/tasks", "/api/projects", "/api/labels", "/api/keys"), (q, path) =>
        send("GET", `${path}?${new URLSearchParams(q).toString()}`)
      ),
      { numRuns: runs }
    )
  })
})

describe.each(testStores())("bad input through the in-process API on %s", (store) => {
  let h: Harness
  let projectDir: string

  beforeAll(async () => {
    h = await createHarness({ store, listen: false })
    projectDir = await mkdtemp(join(h.projectsRoot, "fuzz-"))
  })
  afterAll(() => h.close())

  /** A raw body is, in-process, a value that is not an object: the string itself. */
  const value = (body: unknown) =>
    typeof body === "object" && body !== null && "__raw" in body ? String(body.__raw) : body

  const call = async (what: string, operation: () => Promise<unknown>) => {
    const before = await snapshot(h)
    const error = await operation().then(
      () => undefined,
      (e: unknown) => e
    )
    if (error === undefined) return
    expect(error, what).toBeInstanceOf(TaskwrightError)
    expect((error as TaskwrightError).status, `${what} → ${String(error)}`).toBeLessThan(500)
    expect(await snapshot(h), what).toBe(before)
  }
  const bad = <T>(input: unknown): T => input as T

  const runs = store === "postgres" ? 60 : 150

  it("tasks.create", async () => {
    await fc.assert(
      fc.asyncProperty(anyBody(validTask), (body) =>
        call(`create ${JSON.stringify(body)}`, () => h.as.tasks.create(bad(value(body))))
      ),
      { numRuns: runs }
    )
  })
  it("tasks.update", async () => {
    const t = await h.as.tasks.create(validTask as never)
    await fc.assert(
      fc.asyncProperty(anyBody({ status: "done", priority: "low" }), (body) =>
        call(`update ${JSON.stringify(body)}`, () => h.as.tasks.update(t.id, bad(value(body))))
      ),
      { numRuns: runs }
    )
  })
  it("labels.create", async () => {
    await fc.assert(
      fc.asyncProperty(anyBody(validLabel), (body) =>
        call(`label ${JSON.stringify(body)}`, () => h.as.labels.create(bad(value(body))))
      ),
      { numRuns: runs }
    )
  })
  it("projects.create", async () => {
    await fc.assert(
      fc.asyncProperty(anyBody({ name: "P", path: projectDir }), (body) =>
        call(`project ${JSON.stringify(body)}`, () => h.as.projects.create(bad(value(body))))
      ),
      { numRuns: runs }
    )
  })
  const { expires_at: _, ...keyFields } = validKey
  it.each<readonly [string, () => Record<string, unknown>, (input: unknown) => Promise<unknown>]>([
    ["as(user).keys.create", () => validKey, (input) => h.as.keys.create(bad(input))],
    // The operator's: a key for any user, its expiry a lifetime.
    [
      "tw.keys.create",
      () => ({ ...keyFields, user: h.user.id, expires: "90d" }),
      (input) => h.tw.keys.create(bad(input))
    ],
    ["tw.users.create", () => validUser, (input) => h.tw.users.create(bad(input))]
  ])("%s, and what it stored reads back", async (name, valid, operation) => {
    await fc.assert(
      fc.asyncProperty(anyBody(valid()), (body) =>
        call(`${name} ${JSON.stringify(body)}`, () => operation(value(body)))
      ),
      { numRuns: runs }
    )
    await storedReadBack(h)
  })
  it("ids of every operation", async () => {
    const byId: Record<string, (id: string) => Promise<unknown>> = {
      get: (id) => h.as.tasks.get(bad(id)),
      update: (id) => h.as.tasks.update(bad(id), { status: "done" }),
      delete: (id) => h.as.tasks.delete(bad(id)),
      project: (id) => h.as.projects.get(id),
      deleteProject: (id) => h.as.projects.delete(id),
      revokeKey: (id) => h.as.keys.revoke(id),
      keyUsage: (id) => h.as.keys.usage(id)
    }
    await fc.assert(
      fc.asyncProperty(pathSegment, fc.constantFrom(...Object.keys(byId)), (id, op) =>
        call(`${op} ${JSON.stringify(id)}`, () => byId[op]?.(id) ?? Promise.reject(new Error(op)))
      ),
      { numRuns: runs }
    )
  })
  it("queries of every list", async () => {
    await fc.assert(
      fc.asyncProperty(query, fc.constantFrom("tasks", "projects", "labels", "keys"), (q, list) =>
        call(`${list} ${JSON.stringify(q)}`, () => h.as[list].list(bad(q)))
      ),
      { numRuns: runs }
    )
  })
})
