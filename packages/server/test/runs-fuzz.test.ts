/**
 * Bad input never gives a 500 on the run, review and agent endpoints: random and mutated bodies,
 * query strings and ids, on every store, over HTTP and through the in-process API (`tw.as`), each
 * answered 2xx or 4xx in the envelope (a `TaskwrightError` in-process), a 4xx leaving runs,
 * reviews and tasks as they were. Also: the Effect-native face serves these groups.
 */
import { rm } from "node:fs/promises"
import { TaskwrightError } from "@taskwright/api"
import { engineLayer, settingsFromEnv, Users } from "@taskwright/core"
import { makeEffectWebHandler } from "@taskwright/server"
import {
  createHarness,
  type Harness,
  makeRepo,
  startTestServer,
  type TestServer,
  testStores
} from "@taskwright/testing"
import { Effect, Layer, ManagedRuntime } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { projectTask, scriptedAgent, startRun, waitForEnd } from "./runs-helpers.js"

const snapshot = async (s: Pick<TestServer, "query">) =>
  JSON.stringify(
    await s.query(
      "SELECT (SELECT COUNT(*) FROM runs) AS r, (SELECT COUNT(*) FROM reviews) AS v, (SELECT COUNT(*) FROM run_logs) AS l, (SELECT COALESCE(MAX(updated_at), '') FROM tasks) AS u"
    )
  )

/** A valid body with one field replaced, removed or added; or anything at all. */
const anyBody = (valid: Record<string, unknown>) =>
  fc.oneof(
    fc.anything(),
    fc.object(),
    fc
      .record({ key: fc.constantFrom(...Object.keys(valid)), value: fc.anything() })
      .map(({ key, value }) => ({ ...valid, [key]: value })),
    fc.constantFrom(...Object.keys(valid)).map((key) => {
      const { [key]: _, ...rest } = valid
      return rest
    }),
    fc.record({ key: fc.string(), value: fc.anything() }).map(({ key, value }) => ({ ...valid, [key]: value })),
    fc.string().map((raw) => ({ __raw: raw }))
  )

const segment = fc.oneof(
  fc.string(),
  fc.integer().map(String),
  fc.constantFrom("0", "-1", "1e3", "run_", "run_0000000000000000", "run_000000000000000!", "..", "%00", "claude-code")
)

/** A run log's query string: its parameters, and one it does not have, with any values. */
const logQuery = fc.dictionary(
  fc.constantFrom("since", "after", "limit", "x"),
  fc.oneof(
    fc.string(),
    fc.integer().map(String),
    fc.date().map((d) => (Number.isNaN(d.getTime()) ? "" : d.toISOString()))
  )
)

describe.each(testStores())("bad input to runs, reviews and agents on %s", (store) => {
  let s: TestServer
  let key: string
  let repo: string
  let taskId: number
  let runId: string

  beforeAll(async () => {
    s = await startTestServer({ store, env: { TASKWRIGHT_RATE_LIMIT: "1000000" } })
    key = (await s.createUser()).key
    repo = await makeRepo()
    ;({ taskId } = await projectTask(s, key, repo))
    await scriptedAgent(s, "fz", [{ stdout: "hi" }])
    ;({ run_id: runId } = await startRun(s, key, taskId, { agent: "fz" }))
    await waitForEnd(s, key, runId)
    // From here on every run request is refused: the agent is disabled.
    await scriptedAgent(s, "fz", [{ stdout: "hi" }], { enabled: false })
  })
  afterAll(async () => {
    await s?.close()
    await rm(repo, { recursive: true, force: true })
  })

  const send = async (method: string, path: string, body: unknown, credential = key) => {
    const before = await snapshot(s)
    const raw =
      typeof body === "object" && body !== null && "__raw" in body
        ? String(body.__raw)
        : body === undefined
          ? undefined
          : (JSON.stringify(body) ?? "null")
    const r = await s.request(method, path, {
      key: credential,
      ...(raw === undefined ? {} : { raw, headers: { "content-type": "application/json" } })
    })
    expect(r.status, `${method} ${path} ${raw} → ${r.text}`).toBeLessThan(500)
    if (r.status >= 400) {
      const envelope = r.body as { error: { code: string; message: string; details: unknown } }
      expect(typeof envelope.error.code).toBe("string")
      expect(envelope.error.details).toBeTypeOf("object")
      expect(await snapshot(s)).toBe(before)
    }
    return r.status
  }
  const check = async (method: string, path: string, body: unknown, credential = key) => {
    await send(method, path, body, credential)
  }

  const runs = store === "postgres" ? 40 : 100

  it("POST /api/tasks/:id/run", async () => {
    await fc.assert(
      fc.asyncProperty(anyBody({ agent: "fz", autonomy: "read-only", branch: "fz/x" }), (body) =>
        check("POST", `/api/tasks/${taskId}/run`, body)
      ),
      { numRuns: runs }
    )
  })
  it("POST /api/tasks/:id/review", async () => {
    await fc.assert(
      fc.asyncProperty(anyBody({ action: "approve", comment: "fine" }), async (body) => {
        // The task is in review after its run: only a 4xx may leave it so.
        const status = await send("POST", `/api/tasks/${taskId}/review`, body)
        if (status === 200) {
          await s.request("PATCH", `/api/tasks/${taskId}`, { key, body: { status: "in_review" } })
        }
      }),
      { numRuns: runs }
    )
  })
  it("PUT /api/agents/:name", async () => {
    await fc.assert(
      fc.asyncProperty(
        anyBody({ enabled: false, model: "m", autonomy: "read-only", command: ["x"], env: { A: "1" }, timeout_s: 5 }),
        (body) => check("PUT", "/api/agents/fuzzed", body, s.adminKey)
      ),
      { numRuns: runs }
    )
  })
  it("query strings of the log", async () => {
    await fc.assert(
      fc.asyncProperty(logQuery, (q) =>
        check("GET", `/api/runs/${runId}/logs?${new URLSearchParams(q).toString()}`, undefined)
      ),
      { numRuns: runs }
    )
  })
  it("ids in every path", async () => {
    await fc.assert(
      fc.asyncProperty(
        segment,
        fc.constantFrom(
          ["GET", "/api/runs/", ""],
          ["GET", "/api/runs/", "/logs"],
          ["POST", "/api/runs/", "/stop"],
          ["POST", "/api/tasks/", "/run"],
          ["POST", "/api/tasks/", "/review"],
          ["PUT", "/api/agents/", ""]
        ),
        (id, [method, prefix, suffix]) =>
          check(
            method,
            prefix + encodeURIComponent(id) + suffix,
            method === "GET"
              ? undefined
              : prefix.includes("agents")
                ? { enabled: false }
                : { agent: "fz", action: "approve" },
            prefix.includes("agents") ? s.adminKey : key
          )
      ),
      { numRuns: runs }
    )
  })
})

describe.each(testStores())("bad input to runs, reviews and agents through the in-process API on %s", (store) => {
  let h: Harness
  let taskId: number
  let runId: string

  beforeAll(async () => {
    h = await createHarness({ store, listen: false })
    const run = await h.run({ script: [{ stdout: "hi" }] })
    taskId = run.task_id
    runId = run.id
    // From here on every run request is refused: the agents are disabled.
    await h.admin.agents.update("scripted", { enabled: false })
    await h.admin.agents.update("scripted-1", { enabled: false })
  })
  afterAll(() => h?.close())

  /** A raw body is, in-process, a value that is not an object: the string itself. */
  const value = (body: unknown) =>
    typeof body === "object" && body !== null && "__raw" in body ? String(body.__raw) : body
  const bad = <T>(input: unknown): T => input as T

  /** Runs `operation`; answers whether it succeeded, after checking a failure changed nothing. */
  const succeeds = async (what: string, operation: () => Promise<unknown>): Promise<boolean> => {
    const before = await snapshot(h)
    const error = await operation().then(
      () => undefined,
      (e: unknown) => e
    )
    if (error === undefined) return true
    expect(error, what).toBeInstanceOf(TaskwrightError)
    expect((error as TaskwrightError).status, `${what} → ${String(error)}`).toBeLessThan(500)
    expect(await snapshot(h), what).toBe(before)
    return false
  }
  /** The same, for a property (which must not answer false). */
  const call = async (what: string, operation: () => Promise<unknown>): Promise<void> => {
    await succeeds(what, operation)
  }

  const runs = store === "postgres" ? 40 : 100

  it("runs.start", async () => {
    await fc.assert(
      fc.asyncProperty(anyBody({ agent: "scripted", autonomy: "read-only", branch: "fz/x" }), (body) =>
        call(`start ${JSON.stringify(body)}`, () => h.as.runs.start(taskId, bad(value(body))))
      ),
      { numRuns: runs }
    )
  })
  it("reviews.create", async () => {
    await fc.assert(
      fc.asyncProperty(anyBody({ action: "approve", comment: "fine" }), async (body) => {
        // The task is in review after its run: only a failure may leave it so.
        if (await succeeds(`review ${JSON.stringify(body)}`, () => h.as.reviews.create(taskId, bad(value(body))))) {
          await h.as.tasks.update(taskId, { status: "in_review" })
        }
      }),
      { numRuns: runs }
    )
  })
  it("agents.update", async () => {
    await fc.assert(
      fc.asyncProperty(
        anyBody({ enabled: false, model: "m", autonomy: "read-only", command: ["x"], env: { A: "1" }, timeout_s: 5 }),
        (body) => call(`agent ${JSON.stringify(body)}`, () => h.admin.agents.update("fuzzed", bad(value(body))))
      ),
      { numRuns: runs }
    )
  })
  it("runs.logs queries", async () => {
    await fc.assert(
      fc.asyncProperty(logQuery, (q) => call(`logs ${JSON.stringify(q)}`, () => h.as.runs.logs(runId, bad(q)))),
      { numRuns: runs }
    )
  })
  it("ids of every operation", async () => {
    await fc.assert(
      fc.asyncProperty(segment, fc.constantFrom("get", "logs", "stop", "start", "review", "agent"), (id, op) =>
        call(`${op} ${JSON.stringify(id)}`, () => {
          switch (op) {
            case "get":
              return h.as.runs.get(id)
            case "logs":
              return h.as.runs.logs(id)
            case "stop":
              return h.as.runs.stop(id)
            case "start":
              return h.as.runs.start(bad(id), { agent: "scripted" })
            case "review":
              return h.as.reviews.create(bad(id), { action: "approve" })
            default:
              return h.admin.agents.update(id, { enabled: false })
          }
        })
      ),
      { numRuns: runs }
    )
  })
})

describe("the Effect-native face serves runs, reviews and agents", () => {
  const core = engineLayer(settingsFromEnv({}, { databaseUrl: ":memory:" }), {})
  const runtime = ManagedRuntime.make(core)
  let web: ReturnType<typeof makeEffectWebHandler>
  let admin: string
  let user: string

  beforeAll(async () => {
    const ctx = await runtime.runtime()
    web = makeEffectWebHandler(Layer.succeedContext(ctx.context))
    const keys = await runtime.runPromise(
      Effect.gen(function* () {
        const users = yield* Users
        const a = yield* users.create({ email: "a@example.test", name: "A", password: null, admin: true })
        const u = yield* users.create({ email: "u@example.test", name: "U", password: null, admin: false })
        const ak = yield* users.createKey({ userId: a.id, name: "a", scopes: ["admin"], expiresAt: null })
        const uk = yield* users.createKey({
          userId: u.id,
          name: "u",
          scopes: ["tasks:read", "tasks:write", "agents:run"],
          expiresAt: null
        })
        return { admin: ak.secret, user: uk.secret }
      })
    )
    admin = keys.admin
    user = keys.user
  })
  afterAll(async () => {
    await web.dispose()
    await runtime.dispose()
  })

  const call = async (method: string, path: string, credential: string, body?: unknown) => {
    const res = await web.handler(
      new Request(`http://localhost${path}`, {
        method,
        headers: {
          authorization: `Bearer ${credential}`,
          ...(body === undefined ? {} : { "content-type": "application/json" })
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) })
      })
    )
    return { status: res.status, body: (await res.json()) as Record<string, unknown> }
  }

  it("answers like the fast path", async () => {
    const agents = await call("GET", "/api/agents", user)
    expect(agents.status).toBe(200)
    expect(await call("GET", "/api/agents", admin)).toEqual(agents)
    expect(Object.keys(agents.body.agents as object)).toEqual(
      expect.arrayContaining(["claude-code", "codex", "gemini", "command"])
    )
    expect((await call("PUT", "/api/agents/codex", user, { enabled: false })).status).toBe(403)
    expect((await call("GET", "/api/runs/run_0000000000000000", user)).status).toBe(404)
    expect((await call("GET", "/api/runs/run_0000000000000000/logs?limit=5000", user)).status).toBe(400)
    expect((await call("POST", "/api/runs/run_0000000000000000/stop", user)).status).toBe(404)
    const task = await call("POST", "/api/tasks", user, { title: "t" })
    const run = await call("POST", `/api/tasks/${task.body.id}/run`, user, { agent: "codex", branch: "a..b" })
    // (Schema failures keep HttpApiBuilder's own body on this face.)
    expect(run.status).toBe(400)
    const noProject = await call("POST", `/api/tasks/${task.body.id}/run`, user, { agent: "codex" })
    expect(noProject).toMatchObject({ status: 400, body: { error: { details: { reason: "no_project" } } } })
    const review = await call("POST", `/api/tasks/${task.body.id}/review`, user, { action: "approve" })
    expect(review.status).toBe(409)
  })
})
