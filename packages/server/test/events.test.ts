/**
 * `GET /api/events` with a real WebSocket client, on every store: refusals before the handshake in
 * the envelope, live events of every family in order, nothing of another user's, `?since=` replays
 * losing and duplicating nothing while writes go on, a client that stops reading cut off while the
 * others keep receiving, and a revoked credential closing its socket.
 */
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { errorBody } from "@taskwright/api"
import { type Actor, Events, settingsFromEnv, UserId } from "@taskwright/core"
import { type RunningServer, serve } from "@taskwright/server"
import {
  createPgDatabase,
  makeRepo,
  startTestServer,
  type TestServer,
  type TestStore,
  testStores
} from "@taskwright/testing"
import { Effect, Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { accessToken, cookie, createKey, createPasswordUser, login } from "./auth-helpers.js"
import { connect, refusal, subscribe, until, wsUrl } from "./events-helpers.js"
import {
  allLogs,
  configureAgent,
  expectError,
  projectTask,
  scriptedAgent,
  startRun,
  waitForEnd
} from "./runs-helpers.js"

describe.each(testStores())("the event socket on %s", (store) => {
  let s: TestServer
  let alice: { id: string; key: string }
  let bob: { id: string; key: string }

  beforeAll(async () => {
    s = await startTestServer({
      store,
      env: { TASKWRIGHT_RATE_LIMIT: "1000000", TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "100000", TASKWRIGHT_SANDBOX: "off" }
    })
    alice = await s.createUser()
    bob = await s.createUser()
  })
  afterAll(async () => {
    await s.close()
  })

  const auth = (key: string) => ({ authorization: `Bearer ${key}` })

  it("refuses before the handshake, in the envelope: no credential, a bad one, a missing scope, a key in the URL, a bad since", async () => {
    const url = wsUrl(s.url)
    expect(await refusal(url)).toMatchObject({ status: 401, body: { error: { code: "UNAUTHORIZED" } } })
    expect(await refusal(url, auth("twk_nope"))).toMatchObject({ status: 401 })
    const projectsOnly = await createKey(s, alice.key, { scopes: ["projects:read"] })
    expect(await refusal(url, auth(projectsOnly.secret))).toMatchObject({
      status: 403,
      body: { error: { code: "FORBIDDEN" } }
    })
    expect(await refusal(`${url}?access_token=${alice.key}`)).toMatchObject({ status: 401 })
    expect(await refusal(`${url}?since=abc`, auth(alice.key))).toMatchObject({ status: 400 })
    expect(await refusal(wsUrl(s.url, "/api/nope"), auth(alice.key))).toMatchObject({ status: 404 })
  })

  it("refuses a bad since or topic with the very error an in-process subscriber gets", async () => {
    const actor: Actor = {
      userId: UserId.make(alice.id),
      scopes: new Set(["tasks:read"]),
      credential: { kind: "in_process", id: "test", expiresAt: null }
    }
    const inProcess = (options: { readonly since?: unknown; readonly topics?: unknown }) =>
      s.server
        .run(Effect.flip(Effect.flatMap(Events, (events) => events.subscribe({ actor, ...options, sink: () => true }))))
        .then((error) => errorBody(error as Parameters<typeof errorBody>[0]))
    const cases = [
      { query: "since=-5", options: { since: "-5" } },
      { query: "since=x", options: { since: "x" } },
      { query: "since=1.5", options: { since: 1.5 } },
      { query: "topics=tasks,everything", options: { topics: ["tasks", "everything"] } },
      { query: "topics=run:nope", options: { topics: ["run:nope"] } }
    ]
    for (const { query, options } of cases) {
      const http = await refusal(`${wsUrl(s.url)}?${query}`, auth(alice.key))
      expect(http.status, query).toBe(400)
      expect(http.body, query).toEqual(await inProcess(options))
    }
    expect((await inProcess({ topics: "tasks" })).error).toMatchObject({
      code: "BAD_REQUEST",
      message: "topics must be an array"
    })
  })

  it("delivers a run's events live: run.started, its log lines (run:<id>), run.completed, run.failed, run.stopped, review.created", async () => {
    const repo = await makeRepo({ "README.md": "hello\n" })
    await scriptedAgent(s, `live-${store}`, [
      { sleep_ms: 500 },
      { stdout: "one" },
      { stdout: "two" },
      { write: "x.txt", content: "x\n" },
      { stdout: "three" }
    ])
    await scriptedAgent(s, `failing-${store}`, [{ stdout: "trying" }, { exit: 3 }])
    await scriptedAgent(s, `slow-${store}`, [{ stdout: "waiting" }, { sleep_ms: 30_000 }])
    const { taskId } = await projectTask(s, alice.key, repo)
    const c = await connect(wsUrl(s.url), auth(alice.key))
    const run = await startRun(s, alice.key, taskId, { agent: `live-${store}` })
    // The agent waits half a second before its first line: time to ask for the run's log.
    await subscribe(c.ws, ["tasks", "runs", `run:${run.run_id}`])
    await until(() => c.events.some((e) => e.type === "run.completed"))
    const ofRun = c.events.filter((e) => e.type.startsWith("run.") && e.data.id === run.run_id)
    expect(ofRun.map((e) => e.type)).toEqual(["run.started", "run.completed"])
    const lines = c.events.filter((e) => e.type === "run.log" && e.data.run_id === run.run_id)
    expect(lines.map((l) => l.data.message)).toEqual(expect.arrayContaining(["one", "two", "three"]))
    const at = (type: string, message?: string) =>
      c.events.findIndex((e) => e.type === type && (message === undefined || e.data.message === message))
    expect(at("run.started")).toBeLessThan(at("run.log", "one"))
    expect(at("run.log", "one")).toBeLessThan(at("run.log", "two"))
    expect(at("run.log", "three")).toBeLessThan(at("run.completed"))
    expect(c.events.find((e) => e.type === "run.completed")?.data).toMatchObject({ status: "completed" })

    // The task is in review: a review arrives live with the task it moved.
    const reviewed = await s.request<{ review: { id: string } }>("POST", `/api/tasks/${taskId}/review`, {
      key: alice.key,
      body: { action: "reject", comment: "not now" }
    })
    expect(reviewed.status, reviewed.text).toBe(200)
    await until(() => c.events.some((e) => e.type === "review.created"))
    expect(c.events.find((e) => e.type === "review.created")?.data).toMatchObject({
      id: reviewed.body.review.id,
      task_id: taskId,
      action: "reject",
      comment: "not now"
    })
    expect(c.events.at(-1)).toMatchObject({ type: "task.updated", data: { id: taskId, status: "backlog" } })

    const failed = await startRun(s, alice.key, taskId, { agent: `failing-${store}` })
    await until(() => c.events.some((e) => e.type === "run.failed"))
    expect(c.events.find((e) => e.type === "run.failed")?.data).toMatchObject({ id: failed.run_id, status: "failed" })

    const slow = await startRun(s, alice.key, taskId, { agent: `slow-${store}` })
    await until(() => c.events.some((e) => e.type === "run.started" && e.data.id === slow.run_id))
    expect((await s.request("POST", `/api/runs/${slow.run_id}/stop`, { key: alice.key })).status).toBe(200)
    await until(() => c.events.some((e) => e.type === "run.stopped"))
    expect(c.events.find((e) => e.type === "run.stopped")?.data).toMatchObject({ id: slow.run_id, status: "stopped" })
    const ids = c.events.map((e) => e.id)
    expect(ids).toEqual([...ids].sort((x, y) => x - y))
    c.ws.close()
    await rm(repo, { recursive: true, force: true })
  }, 60_000)

  it("a rolled-back change leaves no event: a review whose follow-up cannot start, a refused PATCH's new label", async () => {
    const repo = await makeRepo({ "README.md": "hello\n" })
    const agent = `undone-${store}`
    await scriptedAgent(s, agent, [{ write: "y.txt", content: "y\n" }])
    const { taskId } = await projectTask(s, alice.key, repo)
    const run = await startRun(s, alice.key, taskId, { agent })
    await waitForEnd(s, alice.key, run.run_id)
    await configureAgent(s, agent, { enabled: false })
    const c = await connect(wsUrl(s.url), auth(alice.key))
    const r = await s.request("POST", `/api/tasks/${taskId}/review`, {
      key: alice.key,
      body: { action: "request_changes", comment: "again" }
    })
    expectError(r, 400, "BAD_REQUEST")
    expect(await s.query("SELECT id FROM reviews WHERE task_id = ?", [taskId])).toEqual([])
    // The task moved and moved back (both real, both told); the review that never stood is not.
    await until(() => c.events.filter((e) => e.type === "task.updated").length >= 2)
    await new Promise((r) => setTimeout(r, 200))
    expect(c.events.map((e) => [e.type, e.data.status])).toEqual([
      ["task.updated", "in_progress"],
      ["task.updated", "in_review"]
    ])
    const logged = await s.query<{ type: string; data: string }>(
      "SELECT type, data FROM events WHERE type = 'review.created'"
    )
    expect(logged.filter((e) => (JSON.parse(e.data) as { task_id: number }).task_id === taskId)).toEqual([])

    // Bob's PATCH of Alice's task with a label new to him is refused: the label it made rolls back.
    const label = `rolled-back-${store}`
    const patch = await s.request("PATCH", `/api/tasks/${taskId}`, { key: bob.key, body: { labels: [label] } })
    expect([403, 404]).toContain(patch.status)
    expect(await s.query("SELECT id FROM labels WHERE name = ?", [label])).toEqual([])
    expect(await s.query("SELECT id FROM events WHERE data LIKE ?", [`%${label}%`])).toEqual([])

    // With the agent back, the review stands once its follow-up run has started, and is told then.
    await configureAgent(s, agent, { enabled: true })
    const ok = await s.request<{ run_id: string }>("POST", `/api/tasks/${taskId}/review`, {
      key: alice.key,
      body: { action: "request_changes", comment: "once more" }
    })
    expect(ok.status, ok.text).toBe(200)
    await until(() => c.events.some((e) => e.type === "review.created"))
    const types = c.events.map((e) => e.type)
    expect(types.indexOf("run.started")).toBeLessThan(types.indexOf("review.created"))
    await waitForEnd(s, alice.key, ok.body.run_id)
    c.ws.close()
    await rm(repo, { recursive: true, force: true })
  }, 60_000)

  it("takes an access token in ?access_token=, and a session cookie only from the service's own origin", async () => {
    const token = await accessToken(s, alice.key)
    const viaToken = await connect(`${wsUrl(s.url)}?access_token=${token}`)
    viaToken.ws.close()
    const person = await createPasswordUser(s)
    const session = await login(s, person)
    expect(await refusal(wsUrl(s.url), { ...cookie(session), origin: "https://evil.example" })).toMatchObject({
      status: 403,
      body: { error: { code: "FORBIDDEN" } }
    })
    const own = await connect(wsUrl(s.url), { ...cookie(session), origin: s.url })
    own.ws.close()
  })

  it("delivers task, project and label events in order, as the REST API shows them; another user's never arrive", async () => {
    const a = await connect(wsUrl(s.url), auth(alice.key))
    const b = await connect(wsUrl(s.url), auth(bob.key))
    const admin = await connect(wsUrl(s.url), auth(s.adminKey))
    const project = await s.request<{ id: string }>("POST", "/api/projects", {
      key: alice.key,
      body: { name: "Events", path: await mkdtemp(join(tmpdir(), "tw-events-")) }
    })
    const task = await s.request<{ id: number }>("POST", "/api/tasks", {
      key: alice.key,
      body: { title: "Live", labels: [`fresh-${store}`], project_id: project.body.id }
    })
    await s.request("PATCH", `/api/tasks/${task.body.id}`, { key: alice.key, body: { status: "todo" } })
    await s.request("POST", "/api/labels", { key: alice.key, body: { name: `manual-${store}`, color: "#112233" } })
    await s.request("DELETE", `/api/tasks/${task.body.id}`, { key: alice.key })
    await s.request("DELETE", `/api/projects/${project.body.id}`, { key: alice.key })
    await until(() => a.events.length >= 7)
    expect(a.events.map((e) => e.type)).toEqual([
      "project.created",
      "label.created",
      "task.created",
      "task.updated",
      "label.created",
      "task.deleted",
      "project.deleted"
    ])
    const ids = a.events.map((e) => e.id)
    expect([...ids].sort((x, y) => x - y)).toEqual(ids)
    expect(a.events[2]?.data).toMatchObject({
      id: task.body.id,
      title: "Live",
      status: "backlog",
      project_id: project.body.id
    })
    expect(a.events[3]?.data).toMatchObject({ id: task.body.id, status: "todo" })
    expect(a.events[1]?.data).toMatchObject({ name: `fresh-${store}`, color: expect.stringMatching(/^#[0-9a-f]{6}$/) })
    for (const e of a.events) expect(e.timestamp).toMatch(/Z$/)
    await until(() => admin.events.length >= 7)
    // Bob saw none of it; a change of his own reaches him (and not Alice).
    await s.request("POST", "/api/tasks", { key: bob.key, body: { title: "Bob's" } })
    await until(() => b.events.length >= 1)
    expect(b.events.map((e) => e.type)).toEqual(["task.created"])
    expect(a.events.some((e) => e.data.title === "Bob's")).toBe(false)
    for (const c of [a, b, admin]) c.ws.close()
  })

  // On PostgreSQL a create without labels, a PATCH without labels and a DELETE are one statement
  // each, which builds the event's data itself; on SQLite a unit of work builds it in TypeScript.
  it("a task's events carry exactly what the REST API answered, for the owner's writes and an admin's", async () => {
    const a = await connect(wsUrl(s.url), auth(alice.key))
    const created = await s.request<Record<string, unknown> & { id: number }>("POST", "/api/tasks", {
      key: alice.key,
      body: { title: 'Quotes " and \\ and \u00e9 \u2603', description: "line\nbreak\ttab", priority: "high" }
    })
    expect(created.status).toBe(201)
    const path = `/api/tasks/${created.body.id}`
    const patched = await s.request<Record<string, unknown>>("PATCH", path, {
      key: alice.key,
      body: { status: "todo", title: "Renamed" }
    })
    const byAdmin = await s.request<Record<string, unknown>>("PATCH", path, {
      key: s.adminKey,
      body: { priority: "low" }
    })
    const withLabels = await s.request<Record<string, unknown>>("PATCH", path, {
      key: alice.key,
      body: { labels: [`exact-${store}`] }
    })
    // The label exists now: a PATCH and a create name it in another case and get its stored spelling.
    const sameLabel = await s.request<Record<string, unknown>>("PATCH", path, {
      key: alice.key,
      body: { labels: [`EXACT-${store}`, `exact-${store}`], status: "done" }
    })
    const second = await s.request<Record<string, unknown> & { id: number }>("POST", "/api/tasks", {
      key: alice.key,
      body: { title: "Second", labels: [`Exact-${store}`] }
    })
    expect([patched.status, byAdmin.status, withLabels.status, sameLabel.status, second.status]).toEqual([
      200, 200, 200, 200, 201
    ])
    expect([sameLabel.body.labels, second.body.labels]).toEqual([[`exact-${store}`], [`exact-${store}`]])
    expect((await s.request("DELETE", path, { key: alice.key })).status).toBe(200)
    expect((await s.request("DELETE", `/api/tasks/${second.body.id}`, { key: s.adminKey })).status).toBe(200)
    await until(() => a.events.length >= 9)
    const withoutRuns = ({ agent_runs: _, ...task }: Record<string, unknown>) => task
    expect(a.events.map((e) => [e.type, e.data])).toEqual([
      ["task.created", created.body],
      ["task.updated", withoutRuns(patched.body)],
      ["task.updated", withoutRuns(byAdmin.body)],
      ["label.created", expect.objectContaining({ name: `exact-${store}` })],
      ["task.updated", withoutRuns(withLabels.body)],
      ["task.updated", withoutRuns(sameLabel.body)],
      ["task.created", second.body],
      ["task.deleted", { id: created.body.id, project_id: null }],
      ["task.deleted", { id: second.body.id, project_id: null }]
    ])
    expect(a.events[0]?.timestamp).toBe(created.body.created_at)
    expect(a.events[1]?.timestamp).toBe(patched.body.updated_at)
    a.ws.close()
  })

  it("subscriptions choose families, and run:<id> brings a run's log lines with its events", async () => {
    const c = await connect(wsUrl(s.url), auth(alice.key))
    await subscribe(c.ws, ["labels"])
    await s.request("POST", "/api/tasks", { key: alice.key, body: { title: "not for this subscription" } })
    await s.request("POST", "/api/labels", { key: alice.key, body: { name: `only-${store}`, color: "#000000" } })
    await until(() => c.events.length >= 1)
    await new Promise((r) => setTimeout(r, 200))
    expect(c.events.map((e) => e.type)).toEqual(["label.created"])
    const bad = await new Promise<Record<string, unknown>>((resolve) => {
      c.ws.once("message", (d) => resolve(JSON.parse(d.toString()) as Record<string, unknown>))
      c.ws.send(JSON.stringify({ type: "subscribe", topics: ["everything"] }))
    })
    expect(bad).toMatchObject({ type: "error", code: "BAD_REQUEST" })
    c.ws.close()
  })

  it("a run's events and its log lines, in order, replayed with ?since=0&topics=run:<id>", async () => {
    const repo = await makeRepo({ "README.md": "hello\n" })
    await scriptedAgent(s, "chatty", [
      { stdout: "one" },
      { stdout: "two" },
      { write: "x.txt", content: "x\n" },
      { stdout: "three" }
    ])
    const { taskId } = await projectTask(s, alice.key, repo)
    const live = await connect(wsUrl(s.url), auth(alice.key))
    const run = await startRun(s, alice.key, taskId, { agent: "chatty" })
    await subscribe(live.ws, ["tasks", "runs", `run:${run.run_id}`])
    await waitForEnd(s, alice.key, run.run_id)
    const replay = await connect(`${wsUrl(s.url)}?since=0&topics=run:${run.run_id}`, auth(alice.key))
    await until(() => replay.events.some((e) => e.type === "run.completed"))
    const types = replay.events.map((e) => e.type)
    expect(types[0]).toBe("run.started")
    expect(types.at(-1)).toBe("run.completed")
    expect(types.slice(1, -1).every((t) => t === "run.log")).toBe(true)
    const lines = replay.events.filter((e) => e.type === "run.log").map((e) => e.data)
    const stored = await allLogs(s, alice.key, run.run_id)
    expect(lines.map((l) => l.message)).toEqual(stored.map((l) => l.message))
    expect(lines.map((l) => l.seq)).toEqual(stored.map((l) => l.seq))
    expect(lines.every((l) => l.run_id === run.run_id)).toBe(true)
    expect(lines.map((l) => l.message)).toEqual(expect.arrayContaining(["one", "two", "three"]))
    expect(replay.events.at(-1)?.data).toMatchObject({ id: run.run_id, status: "completed" })
    // Without run:<id> no log line arrives; the task moving to in_review does.
    const plain = await connect(`${wsUrl(s.url)}?since=0`, auth(alice.key))
    await until(() => plain.events.some((e) => e.type === "run.completed"))
    expect(plain.events.some((e) => e.type === "run.log")).toBe(false)
    expect(plain.events.filter((e) => e.type === "task.updated").map((e) => e.data.status)).toEqual(
      expect.arrayContaining(["in_progress", "in_review"])
    )
    for (const c of [live, replay, plain]) c.ws.close()
    await rm(repo, { recursive: true, force: true })
  })

  it("?since= replays what was missed, then goes live: nothing lost, nothing twice, while another client keeps writing", async () => {
    const admin = await connect(wsUrl(s.url), auth(s.adminKey))
    await s.request("POST", "/api/tasks", { key: alice.key, body: { title: "start" } })
    await until(() => admin.events.length >= 1)
    const from = admin.events[0]?.id ?? 0
    admin.ws.close()
    // Four clients write 2,000 tasks; the subscriber comes back with ?since after the first 500.
    let written = 0
    const writers = Array.from({ length: 4 }, async () => {
      while (written < 2_000) {
        written++
        await s.request("POST", "/api/tasks", { key: alice.key, body: { title: `w${written}` } })
      }
    })
    await until(() => written >= 500, 30_000)
    const again = await connect(`${wsUrl(s.url)}?since=${from}`, auth(s.adminKey))
    await Promise.all(writers)
    const newest = Number((await s.query<{ id: number }>("SELECT MAX(id) AS id FROM events"))[0]?.id ?? Number.NaN)
    await until(() => (again.events.at(-1)?.id ?? 0) >= newest)
    const got = again.events.map((e) => e.id)
    const stored = (await s.query<{ id: number }>("SELECT id FROM events WHERE id > ? ORDER BY id", [from])).map((r) =>
      Number(r.id)
    )
    expect(got.length).toBeGreaterThanOrEqual(2_000)
    expect(got).toEqual(stored)
    again.ws.close()
  }, 60_000)

  it("a revoked key's socket is closed", async () => {
    const key = await createKey(s, alice.key, { scopes: ["tasks:read"] })
    const c = await connect(wsUrl(s.url), auth(key.secret))
    expect((await s.request("DELETE", `/api/keys/${key.id}`, { key: alice.key })).status).toBe(200)
    const closed = await c.closed
    expect(closed.code).toBe(1008)
  }, 20_000)

  it("a logged-out session's socket is closed", async () => {
    const person = await createPasswordUser(s)
    const token = await login(s, person)
    const c = await connect(wsUrl(s.url), { ...cookie(token), origin: s.url })
    await s.request("POST", "/api/auth/logout", { headers: { ...cookie(token), origin: s.url } })
    expect((await c.closed).code).toBe(1008)
  }, 20_000)
})

describe.each(testStores())("a client that stops reading, on %s", (store: TestStore) => {
  let server: RunningServer
  let dir: string
  let key: string
  let dropDatabase = async () => {}

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "tw-slow-"))
    let databaseUrl = ":memory:"
    if (store === "postgres") {
      const db = await createPgDatabase()
      databaseUrl = db.url
      dropDatabase = db.drop
    }
    server = await serve(settingsFromEnv({ TASKWRIGHT_RATE_LIMIT: "100000000" }, { dataDir: dir, databaseUrl }), {
      port: 0,
      host: "127.0.0.1",
      log: "silent",
      eventsMaxBufferedBytes: 64 * 1024
    })
    key = Option.getOrThrow(Option.map(server.started.bootstrap.adminKey, Redacted.value))
  })
  afterAll(async () => {
    await server.close()
    await dropDatabase()
    await rm(dir, { recursive: true, force: true })
  })

  it("is cut off (1013) while the others keep receiving within their latency budget", async () => {
    const slow = await connect(wsUrl(server.url), { authorization: `Bearer ${key}` })
    const fast = await connect(wsUrl(server.url), { authorization: `Bearer ${key}` })
    const arrived = new Map<string, number>()
    fast.ws.on("message", (data) => {
      const title = (JSON.parse(data.toString()) as { data?: { title?: string } }).data?.title
      if (title !== undefined) arrived.set(title, performance.now())
    })
    // The slow client's socket stops reading: what the server sends piles up on its side.
    const raw = (slow.ws as unknown as { _socket: { pause(): void } })._socket
    raw.pause()
    // Past what the kernel's socket buffers hold on both sides, so frames pile up in the server.
    const description = "x".repeat(5_000)
    const count = 3_000
    const sent: Array<number> = []
    for (let i = 0; i < count; i++) {
      sent.push(performance.now())
      const r = await fetch(`${server.url}/api/tasks`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ title: `t${i}`, description })
      })
      expect(r.status).toBe(201)
    }
    await until(() => fast.events.length >= count, 30_000)
    expect(fast.events.map((e) => e.data.title)).toEqual(Array.from({ length: count }, (_, i) => `t${i}`))
    // From a write's start to its event at the client that keeps reading: the stalled one costs it
    // nothing (generous bounds: two shared cores).
    const delays = sent.map((at, i) => (arrived.get(`t${i}`) ?? Number.POSITIVE_INFINITY) - at).sort((a, b) => a - b)
    const p99 = delays[Math.floor(delays.length * 0.99)] ?? Number.POSITIVE_INFINITY
    expect(p99).toBeLessThan(500)
    ;(slow.ws as unknown as { _socket: { resume(): void } })._socket.resume()
    expect((await slow.closed).code).toBe(1013)
    fast.ws.close()
  }, 90_000)
})
