/**
 * The harness as a host's test suite uses it: a store per test, the bootstrap key in hand, the
 * API without a socket and the typed client over one, and a run of the scripted agent that ends
 * on the in-memory store, sandboxed as the product runs agents.
 */
import { it as effectIt, layer } from "@effect/vitest"
import { TaskwrightError } from "@taskwright/api"
import { Users } from "@taskwright/core"
import { createHarness, EventWaitTimeout, type Harness, harness, isRunning, TestHarness } from "@taskwright/testing"
import { Effect, Either } from "effect"
import { afterEach, beforeEach, describe, expect, it } from "vitest"

const rejection = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    () => undefined,
    (error: unknown) => error
  )

describe("createHarness in plain vitest", () => {
  let h: Harness
  beforeEach(async () => {
    h = await createHarness()
  })
  afterEach(() => h.close())

  it("answers the bootstrap admin key and a user with a key", async () => {
    expect(h.adminKey).toMatch(/^twk_/)
    expect(h.user.key).toMatch(/^twk_/)
    const me = await h.clientFor(h.adminKey).auth.me()
    expect(me.scopes).toContain("admin")
  })

  it("serves the whole API through inject, without a socket", async () => {
    const health = await h.inject("/api/health")
    expect(health.status).toBe(200)
    expect(await health.json()).toEqual({ status: "ok" })
    expect((await h.inject("/api/tasks")).status).toBe(401)
    const created = await h.request<{ id: number }>("POST", "/api/tasks", {
      key: h.user.key,
      body: { title: "Injected" }
    })
    expect(created.status).toBe(201)
    const listed = await h.inject(
      new Request("http://any.host/api/tasks", { headers: { authorization: `Bearer ${h.user.key}` } })
    )
    expect(await listed.json()).toMatchObject({ total: 1, tasks: [{ id: created.body.id, title: "Injected" }] })
  })

  it("gives the typed client over a real socket, failing with TaskwrightError", async () => {
    expect(h.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    const task = await h.client.tasks.create({ title: "Over the socket", priority: "high" })
    expect(await h.as.tasks.get(task.id)).toMatchObject({ title: "Over the socket", priority: "high" })
    const missing = await rejection(h.client.tasks.get(task.id + 1000))
    expect(missing).toBeInstanceOf(TaskwrightError)
    expect(missing).toMatchObject({ code: "NOT_FOUND", status: 404 })
    const bad = await rejection(h.client.tasks.create({ title: "" }))
    expect(bad).toMatchObject({ code: "BAD_REQUEST", status: 400, details: { fields: [{ path: "title" }] } })
    // The same client without the socket, through the in-process handler.
    expect((await h.clientFor(h.user.key, { socket: false }).tasks.list()).total).toBe(1)
  })

  it("gives each harness its own store", async () => {
    const other = await createHarness({ listen: false })
    try {
      await h.as.tasks.create({ title: "Mine" })
      expect((await other.as.tasks.list()).total).toBe(0)
      expect((await h.as.tasks.list()).total).toBe(1)
    } finally {
      await other.close()
    }
  })

  it("starts a run of the scripted agent and sees it complete", async () => {
    const project = await h.project()
    const task = await h.as.tasks.create({ title: "Write HARNESS.md", project_id: project.id })
    const started = performance.now()
    const { run_id } = await h.startRun({ taskId: task.id })
    const run = await h.awaitRun(run_id)
    const elapsed = performance.now() - started
    expect(run).toMatchObject({ status: "completed", output: { files_modified: ["HARNESS.md"], lines_added: 1 } })
    // Not a race (how fast a run is belongs in a benchmark; a slow CI machine took 1.05 s): a
    // scripted run that waited on something, a poll interval or a timeout, would take far longer.
    expect(elapsed).toBeLessThan(10_000)
    const logs = (await h.logs(run.id)).map((l) => l.message)
    expect(logs).toContain("done")
    // Sandboxed, as the product runs agents by default.
    expect(logs.some((m) => m.startsWith("Sandboxed with bubblewrap"))).toBe(true)
  })

  it("awaits an event, whether the change comes before the wait or after, as the user sees it", async () => {
    const before = await h.as.tasks.create({ title: "Already there" })
    expect(await h.awaitEvent((e) => e.type === "task.created" && e.data.id === before.id)).toMatchObject({
      type: "task.created",
      data: { title: "Already there" }
    })
    const waiting = h.awaitEvent((e) => e.type === "task.updated" && e.data.status === "todo")
    await h.as.tasks.update(before.id, { status: "todo" })
    expect((await waiting).data).toMatchObject({ id: before.id, status: "todo" })
    // Another user's change never matches for this user, and the wait ends with EventWaitTimeout.
    const other = await h.createUser()
    await h.tw.as(other.id).tasks.create({ title: "Not yours" })
    const missed = await h.awaitEvent((e) => e.data.title === "Not yours", { timeoutMs: 300 }).catch((e: unknown) => e)
    expect(missed).toBeInstanceOf(EventWaitTimeout)
    // A run's log lines, with its topic.
    const { run_id } = await h.startRun({ script: [{ stdout: "from the agent" }] })
    const line = await h.awaitEvent((e) => e.type === "run.log" && e.data.message === "from the agent", {
      topics: [`run:${run_id}`]
    })
    expect(line.data).toMatchObject({ run_id })
    await h.awaitRun(run_id)
    const bad = await rejection(h.awaitEvent(() => true, { topics: ["everything" as "tasks"] }))
    expect(bad).toMatchObject({ code: "BAD_REQUEST", status: 400 })
  })

  it("runs a script of the test's own, and checks what the agent left", async () => {
    const run = await h.run({ script: [{ stdout: "child" }, { exit: 3 }] })
    expect(run.status).toBe("failed")
    expect((await h.logs(run.id)).map((l) => l.message)).toContain("child")
    expect(isRunning(process.pid)).toBe(true)
    const rows = await h.query<{ status: string }>("SELECT status FROM runs WHERE id = ?", [run.id])
    expect(rows).toEqual([{ status: "failed" }])
  })
})

describe("harness with @effect/vitest", () => {
  effectIt.scoped("gives a harness per test, closed with the scope", () =>
    Effect.gen(function* () {
      const h = yield* harness({ listen: false })
      const task = yield* Effect.promise(() => h.as.tasks.create({ title: "From Effect" }))
      expect(task.status).toBe("backlog")
    })
  )

  layer(TestHarness.layer({ listen: false }))("TestHarness.layer", (it) => {
    it.effect("provides the harness and the engine's services", () =>
      Effect.gen(function* () {
        const h = yield* TestHarness
        const created = yield* Effect.promise(() => h.as.tasks.create({ title: "Shared engine" }))
        // The engine's services in the same context: the user the harness made is in its store.
        const user = yield* Effect.flatMap(Users, (users) => users.findByEmail(h.user.email))
        expect(user.id).toBe(h.user.id)
        expect((yield* Effect.promise(() => h.as.tasks.get(created.id))).title).toBe("Shared engine")
      })
    )

    it.effect("awaits an event with TestHarness.awaitEvent, failing with EventWaitTimeout", () =>
      Effect.gen(function* () {
        const h = yield* TestHarness
        const created = yield* Effect.promise(() => h.as.tasks.create({ title: "Awaited in Effect" }))
        const event = yield* TestHarness.awaitEvent((e) => e.type === "task.created" && e.data.id === created.id)
        expect(event.data).toMatchObject({ title: "Awaited in Effect" })
        const none = yield* Effect.either(TestHarness.awaitEvent(() => false, { timeoutMs: 200 }))
        expect(Either.isLeft(none) && none.left).toBeInstanceOf(EventWaitTimeout)
      })
    )
  })
})
