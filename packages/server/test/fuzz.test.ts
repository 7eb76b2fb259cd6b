/**
 * Bad input never gives a 500: random and mutated bodies, query strings and ids are thrown at
 * every endpoint, over HTTP and through the in-process API (`tw.as(user)`, which reaches the
 * services without any HTTP decoding in front). Each answer is a 2xx or a 4xx in the envelope (a
 * `TaskwrightError` in-process), and a 4xx leaves the database exactly as it was: no bad input is
 * stored, whichever face it came through.
 */
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { TaskwrightError } from "@taskwright/api"
import { createHarness, type Harness, startTestServer, type TestServer, testStores } from "@taskwright/testing"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const snapshot = async (s: Pick<TestServer, "query">) =>
  JSON.stringify(
    await s.query(
      "SELECT (SELECT COUNT(*) FROM tasks) AS t, (SELECT COUNT(*) FROM projects) AS p, (SELECT COUNT(*) FROM labels) AS l, (SELECT COALESCE(MAX(updated_at), '') FROM tasks) AS u, (SELECT COALESCE(SUM(n), 0) FROM task_counts) AS c"
    )
  )

const validTask = { title: "A task", description: "text", priority: "high", labels: ["a", "b"] }
const validLabel = { name: "Label", color: "#123456" }

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
  fc.constantFrom("status", "priority", "project_id", "limit", "offset", "cascade", "x"),
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
  it("ids in every path", async () => {
    await fc.assert(
      fc.asyncProperty(
        pathSegment,
        fc.constantFrom(
          ["GET", "/api/tasks/"],
          ["PATCH", "/api/tasks/"],
          ["DELETE", "/api/tasks/"],
          ["GET", "/api/projects/"],
          ["DELETE", "/api/projects/"]
        ),
        (id, [method, prefix]) =>
          send(method, prefix + encodeURIComponent(id), method === "PATCH" ? { status: "done" } : undefined)
      ),
      { numRuns: runs }
    )
  })
  it("query strings on every list", async () => {
    await fc.assert(
      fc.asyncProperty(query, fc.constantFrom("/api/tasks", "/api/projects", "/api/labels"), (q, path) =>
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
  it("ids of every operation", async () => {
    await fc.assert(
      fc.asyncProperty(pathSegment, fc.constantFrom("get", "update", "delete", "project", "deleteProject"), (id, op) =>
        call(`${op} ${JSON.stringify(id)}`, () => {
          switch (op) {
            case "get":
              return h.as.tasks.get(bad(id))
            case "update":
              return h.as.tasks.update(bad(id), { status: "done" })
            case "delete":
              return h.as.tasks.delete(bad(id))
            case "project":
              return h.as.projects.get(id)
            default:
              return h.as.projects.delete(id)
          }
        })
      ),
      { numRuns: runs }
    )
  })
  it("queries of every list", async () => {
    await fc.assert(
      fc.asyncProperty(query, fc.constantFrom("tasks", "projects", "labels"), (q, list) =>
        call(`${list} ${JSON.stringify(q)}`, () => h.as[list].list(bad(q)))
      ),
      { numRuns: runs }
    )
  })
})
