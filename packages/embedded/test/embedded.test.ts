/**
 * The in-process API as a host uses it: typed operations as a user, validated as over HTTP and
 * failing with `TaskwrightError`; the HTTP API through `handler` and `nodeHandler` (mounted under a
 * prefix too); the Effect face sharing the same engine; `close()` settling, also in a plain script.
 */
import { spawn } from "node:child_process"
import { mkdtemp, rm, writeFile } from "node:fs/promises"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { type Actor, Events, errorWire, Tasks, UserId } from "@taskwright/core"
import { StoreTag, statement } from "@taskwright/core/internal"
import { createTaskwright, type Taskwright, TaskwrightError } from "@taskwright/embedded"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { rejection } from "./rejection.js"

describe("createTaskwright on an in-memory store", () => {
  let tw: Taskwright
  let ada: string
  let bob: string

  beforeAll(async () => {
    tw = await createTaskwright({ database: ":memory:" })
    ada = (await tw.users.create({ email: "ada@example.test", name: "Ada" })).id
    bob = (await tw.users.create({ email: "bob@example.test", name: "Bob" })).id
  })
  afterAll(async () => {
    await tw.close()
  })

  it("answers the bootstrap admin key instead of only writing a file", () => {
    expect(tw.adminKey).toMatch(/^twk_[0-9A-Za-z]{49}$/)
    expect(tw.started.bootstrap.created).toBe(true)
  })

  it("creates, reads, lists, updates and deletes a task in the HTTP API's JSON shapes, paging defaults applied", async () => {
    const me = tw.as("ada@example.test")
    const created = await me.tasks.create({ title: "  Write the docs  ", labels: ["docs"], priority: "high" })
    expect(created).toMatchObject({ title: "Write the docs", status: "backlog", priority: "high", labels: ["docs"] })
    expect(await me.tasks.get(created.id)).toMatchObject({ id: created.id, agent_runs: [] })
    const list = await me.tasks.list()
    expect(list).toMatchObject({ limit: 50, offset: 0, total: 1 })
    expect((await me.tasks.list({ limit: 1, status: "backlog" })).tasks).toHaveLength(1)
    expect((await me.tasks.list({ limit: "1" })).limit).toBe(1)
    expect(await me.tasks.update(created.id, { status: "todo" })).toMatchObject({ status: "todo" })
    expect(await me.tasks.delete(created.id)).toEqual({ success: true })
    expect((await rejection(me.tasks.get(created.id))).code).toBe("NOT_FOUND")
  })

  it("refuses what HTTP refuses, with the same envelope, and stores none of it", async () => {
    const me = tw.as(ada)
    const cases: Array<[() => Promise<unknown>, string]> = [
      [() => me.tasks.create({ title: "" }), "title"],
      [() => me.tasks.create({ title: "x".repeat(1000) }), "title"],
      [() => me.tasks.create({ title: "ok", priority: "bogus" as "high" }), "priority"],
      [() => me.tasks.create({ title: "ok", extra: 1 } as { title: string }), "extra"],
      [() => me.tasks.list({ limit: 100_000 }), "limit"],
      [() => me.tasks.list({ offset: -5 }), "offset"],
      [() => me.tasks.get(-1), "id"],
      [() => me.tasks.get(Number.NaN), "id"],
      [() => me.labels.create({ name: "x", color: "red" }), "color"]
    ]
    for (const [call, field] of cases) {
      const error = await rejection(call())
      expect(error).toBeInstanceOf(TaskwrightError)
      expect(error.status).toBe(400)
      expect(error.code).toBe("BAD_REQUEST")
      const fields = error.details.fields as Array<{ path: string; message: string }>
      expect(fields.map((f) => f.path)).toContain(field)
      expect(error.toJSON()).toEqual({ error: { code: "BAD_REQUEST", message: error.message, details: error.details } })
    }
    expect((await me.tasks.list()).total).toBe(0)
  })

  it("enforces ownership and scopes as over HTTP; `scopes` narrows a user's", async () => {
    const task = await tw.as(ada).tasks.create({ title: "Ada's" })
    const stranger = await rejection(tw.as(bob).tasks.get(task.id))
    expect([stranger.status, stranger.code]).toEqual([403, "FORBIDDEN"])
    const narrow = await rejection(tw.as(ada, { scopes: ["tasks:read"] }).tasks.create({ title: "no" }))
    expect(narrow.status).toBe(403)
    expect(narrow.details).toEqual({ required_scope: "tasks:write" })
    // The admin sees everyone's.
    expect((await tw.as("admin@localhost").tasks.get(task.id)).title).toBe("Ada's")
    expect((await rejection(tw.as("nobody@example.test").tasks.list())).code).toBe("NOT_FOUND")
  })

  it("manages keys like the CLI: the secret once; the key works over the HTTP handler", async () => {
    const key = await tw.keys.create({ user: "ada@example.test", name: "ci", scopes: ["tasks:read"], expires: "90d" })
    expect(key.secret).toMatch(/^twk_/)
    expect(Date.parse(key.expires_at ?? "")).toBeGreaterThan(Date.now() + 89 * 86_400_000)
    const r = await tw.handler(
      new Request("http://localhost/api/tasks", { headers: { authorization: `Bearer ${key.secret}` } })
    )
    expect(r.status).toBe(200)
    expect(r.headers.get("x-ratelimit-limit")).toBe("1000")
    expect((await tw.keys.list("ada@example.test")).map((k) => k.name)).toContain("ci")
  })

  it("serves the HTTP API in process: the same envelope, and mounted under a prefix", async () => {
    const bad = await tw.handler(
      new Request("http://localhost/api/tasks", {
        method: "POST",
        headers: { authorization: `Bearer ${tw.adminKey}`, "content-type": "application/json" },
        body: JSON.stringify({ title: "ok", bogus: true })
      })
    )
    expect(bad.status).toBe(400)
    expect(await bad.json()).toMatchObject({ error: { code: "BAD_REQUEST", details: { fields: [{ path: "bogus" }] } } })
    const mounted = tw.http({ prefix: "/tasks-api" })
    const ok = await mounted.handler(
      new Request("http://localhost/tasks-api/api/tasks", { headers: { authorization: `Bearer ${tw.adminKey}` } })
    )
    expect(ok.status).toBe(200)
    expect((await mounted.handler(new Request("http://localhost/api/tasks"))).status).toBe(404)
    const doc = await tw.handler(new Request("http://localhost/api/openapi.json"))
    expect(doc.status).toBe(200)
  })

  it("serves node:http through nodeHandler", async () => {
    const server = createServer(tw.nodeHandler)
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done))
    try {
      const { port } = server.address() as AddressInfo
      const r = await fetch(`http://127.0.0.1:${port}/api/tasks`, {
        headers: { authorization: `Bearer ${tw.adminKey}` }
      })
      expect(r.status).toBe(200)
    } finally {
      await new Promise((done) => server.close(done))
    }
  })

  it("subscribes to events in process: the user's own, as they happen, and replays from since", async () => {
    const seen: Array<{ id: number; type: string; data: unknown }> = []
    const stop = await tw.as(ada).events.subscribe(["tasks"], (event) => seen.push(event))
    const mine = await tw.as(ada).tasks.create({ title: "evented" })
    await tw.as(bob).tasks.create({ title: "not Ada's" })
    await tw.as(ada).tasks.update(mine.id, { status: "todo" })
    const deadline = Date.now() + 5_000
    while (seen.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
    stop()
    expect(seen.map((e) => e.type)).toEqual(["task.created", "task.updated"])
    expect(seen.map((e) => (e.data as { title: string }).title)).toEqual(["evented", "evented"])
    const replayed: Array<{ id: number }> = []
    const again = await tw.as(ada).events.subscribe(["tasks"], (event) => replayed.push(event), {
      since: (seen[0]?.id ?? 1) - 1
    })
    again()
    expect(replayed.map((e) => e.id)).toEqual(seen.map((e) => e.id))
    const narrow = await tw
      .as(ada, { scopes: ["tasks:write"] })
      .events.subscribe(undefined, () => {})
      .then(
        () => undefined,
        (e: unknown) => e
      )
    expect(narrow).toBeInstanceOf(TaskwrightError)
  })

  it("refuses in process what the event socket refuses over HTTP, with the same 400", async () => {
    const refused = (topics: unknown, since?: unknown) =>
      rejection(
        tw
          .as(ada)
          .events.subscribe(
            topics as ReadonlyArray<"tasks">,
            () => {},
            since === undefined ? {} : { since: since as number }
          )
      )
    expect(await refused(["tasks", "everything"])).toMatchObject({
      code: "BAD_REQUEST",
      status: 400,
      message: "topics.1 must be tasks, projects, labels, runs or run:<run_id>",
      details: { fields: [{ path: "topics.1" }] }
    })
    // A plain string is not a list of topics (it was once read letter by letter).
    expect(await refused("tasks")).toMatchObject({ code: "BAD_REQUEST", message: "topics must be an array" })
    expect(await refused(["run:not-a-run"])).toMatchObject({
      code: "BAD_REQUEST",
      details: { fields: [{ path: "topics.0" }] }
    })
    for (const since of [-5, "x", 1.5]) {
      expect(await refused(undefined, since)).toMatchObject({
        code: "BAD_REQUEST",
        message: `since must be a whole number from 0 to ${Number.MAX_SAFE_INTEGER}`,
        details: { fields: [{ path: "since" }] }
      })
    }
  })

  it("refuses a since the log no longer holds with 410 GONE naming since and oldest, and GET /api/events without Upgrade with 426", async () => {
    const me = tw.as(ada)
    for (let i = 0; i < 4; i++) await me.tasks.create({ title: `old ${i}` })
    const newest = await tw.effect.runtime.runPromise(
      Effect.flatMap(StoreTag, (store) =>
        Effect.zipLeft(
          Effect.map(store.get(statement<{ id: number }>("test.newest", "SELECT MAX(id) AS id FROM events")), (row) =>
            Number(row?.id)
          ),
          store.run(statement("test.age", "UPDATE events SET created_at = '2000-01-01T00:00:00.000Z'"))
        )
      )
    )
    await tw.effect.runtime.runPromise(Effect.flatMap(Events, (events) => events.prune))
    const tooOld = await rejection(me.events.subscribe(["tasks"], () => {}, { since: newest - 3 }))
    expect(tooOld).toMatchObject({
      code: "GONE",
      status: 410,
      message: expect.stringMatching(/no longer kept/),
      details: { since: newest - 3, oldest: newest }
    })
    expect(tooOld.toJSON().error.details).toEqual({ since: newest - 3, oldest: newest })
    const ahead = await rejection(me.events.subscribe(undefined, () => {}, { since: newest + 1000 }))
    expect(ahead).toMatchObject({ code: "GONE", status: 410, details: { since: newest + 1000, oldest: newest } })
    // Right after what is kept is served.
    const stop = await me.events.subscribe(["tasks"], () => {}, { since: newest - 1 })
    stop()

    // Over HTTP the socket closes with 4410 instead; a plain GET is told to upgrade, from the same table.
    const plain = await tw.handler(
      new Request("http://localhost/api/events", { headers: { authorization: `Bearer ${tw.adminKey}` } })
    )
    expect(plain.status).toBe(errorWire.UpgradeRequired.status)
    expect(plain.headers.get("upgrade")).toBe("websocket")
    expect(await plain.json()).toEqual({
      error: {
        code: "UPGRADE_REQUIRED",
        message: "GET /api/events is a WebSocket: open it with Upgrade: websocket",
        details: { upgrade: "websocket" }
      }
    })
  })

  it("shares one engine with Effect code through tw.effect", async () => {
    const created = await tw.as(ada).tasks.create({ title: "seen by Effect" })
    const actor: Actor = {
      userId: UserId.make(ada),
      scopes: new Set(["tasks:read"]),
      credential: { kind: "in_process", id: "effect host", expiresAt: null }
    }
    const seen = await tw.effect.runtime.runPromise(Effect.flatMap(Tasks, (tasks) => tasks.list(actor, {})))
    expect(seen.tasks.map((t) => t.id)).toContain(created.id)
  })
})

describe("close()", () => {
  it("settles on a file store after a write, and a plain script exits 0 on its own", async () => {
    const dir = await mkdtemp(join(tmpdir(), "tw-embedded-"))
    try {
      const script = join(dir, "script.mjs")
      const entry = resolve(__dirname, "../dist/index.js")
      await writeFile(
        script,
        `const { createTaskwright } = await import(${JSON.stringify(entry)})
const tw = await createTaskwright({ database: ${JSON.stringify(join(dir, "tw.db"))} })
await tw.as("admin@localhost").tasks.create({ title: "written" })
await tw.close()
console.log(JSON.stringify({ closed: true }))
`
      )
      const { code, stdout } = await new Promise<{ code: number | null; stdout: string }>((done) => {
        const child = spawn(process.execPath, [script], { stdio: ["ignore", "pipe", "inherit"] })
        // A close that never settles keeps the script alive: killed, it fails the test below.
        const stuck = setTimeout(() => child.kill("SIGKILL"), 20_000)
        let out = ""
        child.stdout.on("data", (c: Buffer) => {
          out += c.toString()
        })
        child.on("exit", (c) => {
          clearTimeout(stuck)
          done({ code: c, stdout: out })
        })
      })
      expect(code).toBe(0)
      // Exiting by itself is the check: a timer or a worker left behind by close() would keep the
      // script alive until the kill above. How long it takes is a figure for a benchmark, not a
      // bound here (a 2 s bound failed a CI run at 2.07 s on a slow machine).
      const report = JSON.parse(stdout.trim()) as { closed: boolean }
      expect(report.closed).toBe(true)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  }, 30_000)
})
