/**
 * The typed client's two faces against a real socket: the Promise face (JSON in and out,
 * `TaskwrightError` on failure, a prefix in the base URL, a fetch of the caller's) and the Effect
 * face (`HttpApiClient` with decoded values and the contract's error classes).
 */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { FetchHttpClient } from "@effect/platform"
import { makeClient, makeEffectClient, TaskwrightError } from "@taskwright/api"
import { NotFound, TaskId } from "@taskwright/core"
import { createHarness, type Harness } from "@taskwright/testing"
import { Effect, Either } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
beforeAll(async () => {
  h = await createHarness()
})
afterAll(() => h.close())

describe("makeClient (Promise face)", () => {
  it("covers a resource's whole life in the API's JSON", async () => {
    const client = h.client
    expect(await client.system.health()).toEqual({ status: "ok" })
    const label = await client.labels.create({ name: `l-${Date.now()}`, color: "#aabbcc" })
    const task = await client.tasks.create({ title: "  Client  ", labels: [label.name] })
    expect(task).toMatchObject({ title: "Client", status: "backlog", labels: [label.name], project_id: null })
    expect(await client.tasks.update(task.id, { status: "todo" })).toMatchObject({ status: "todo" })
    expect((await client.tasks.list({ status: "todo", limit: 5 })).tasks.map((t) => t.id)).toContain(task.id)
    expect(await client.tasks.delete(task.id)).toEqual({ success: true })
    const me = await client.auth.me()
    expect(me).toMatchObject({ user: { id: h.user.id }, credential: { kind: "api_key" } })
  })

  it("rejects with TaskwrightError carrying the envelope, never another error", async () => {
    const failures = await Promise.all([
      h.client.tasks.get(999_999).catch((e: unknown) => e),
      h.client.tasks.list({ limit: 100_000 }).catch((e: unknown) => e),
      h
        .clientFor(undefined)
        .tasks.list()
        .catch((e: unknown) => e),
      h.client.agents.update("x", { enabled: true }).catch((e: unknown) => e),
      makeClient({ baseUrl: "http://127.0.0.1:1" })
        .system.health()
        .catch((e: unknown) => e)
    ])
    for (const failure of failures) expect(failure).toBeInstanceOf(TaskwrightError)
    expect(failures.map((f) => [(f as TaskwrightError).status, (f as TaskwrightError).code])).toEqual([
      [404, "NOT_FOUND"],
      [400, "BAD_REQUEST"],
      [401, "UNAUTHORIZED"],
      [403, "FORBIDDEN"],
      [0, "NETWORK_ERROR"]
    ])
    expect((failures[1] as TaskwrightError).details).toMatchObject({ fields: [{ path: "limit" }] })
    expect(JSON.parse(JSON.stringify(failures[0]))).toMatchObject({ error: { code: "NOT_FOUND" } })
  })

  it("talks to an API mounted under a prefix, with a fetch of the caller's", async () => {
    const faces = h.tw.http({ prefix: "/tasks-api" })
    const server = createServer(faces.nodeHandler)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    try {
      const port = (server.address() as AddressInfo).port
      const seen: Array<string> = []
      const client = makeClient({
        baseUrl: `http://127.0.0.1:${port}/tasks-api/`,
        apiKey: h.user.key,
        fetch: (request) => {
          seen.push(`${request.method} ${new URL(request.url).pathname}`)
          return fetch(request)
        }
      })
      const task = await client.tasks.create({ title: "Under a prefix" })
      expect((await client.tasks.get(task.id)).title).toBe("Under a prefix")
      expect(seen).toEqual(["POST /tasks-api/api/tasks", `GET /tasks-api/api/tasks/${task.id}`])
    } finally {
      server.close()
      server.closeAllConnections()
    }
  })
})

describe("makeEffectClient (Effect face)", () => {
  it("decodes answers and fails with the contract's error classes", async () => {
    const program = Effect.gen(function* () {
      const client = yield* makeEffectClient({ baseUrl: h.url, apiKey: h.user.key })
      const created = yield* client.tasks.create({ payload: { title: "From Effect", priority: "urgent" } })
      const got = yield* client.tasks.get({ path: { id: created.id } })
      const missing = yield* Effect.either(client.tasks.get({ path: { id: TaskId.make(999_999) } }))
      return { created, got, missing }
    }).pipe(Effect.provide(FetchHttpClient.layer))
    const { created, got, missing } = await Effect.runPromise(program)
    expect(got).toMatchObject({ id: created.id, title: "From Effect", priority: "urgent", agent_runs: [] })
    expect(Either.isLeft(missing) && missing.left).toBeInstanceOf(NotFound)
  })

  it("lists without paging parameters (the defaults apply) and with them", async () => {
    // Made in process, with an expiry without milliseconds: stored normalised, so it decodes here.
    await h.tw.keys.create({
      user: h.user.id,
      name: "expiring",
      scopes: ["tasks:read"],
      expires: "2099-01-01T00:00:00Z"
    })
    await h.as.tasks.create({ title: "Listed by Effect" })
    const program = Effect.gen(function* () {
      const client = yield* makeEffectClient({ baseUrl: h.url, apiKey: h.user.key })
      return {
        tasks: yield* client.tasks.list({ urlParams: {} }),
        page: yield* client.tasks.list({ urlParams: { limit: 1, offset: 0 } }),
        projects: yield* client.projects.list({ urlParams: {} }),
        labels: yield* client.labels.list({ urlParams: {} }),
        keys: yield* client.keys.list({ urlParams: {} })
      }
    }).pipe(Effect.provide(FetchHttpClient.layer))
    const { tasks, page, projects, labels, keys } = await Effect.runPromise(program)
    for (const list of [tasks, projects, labels, keys]) expect(list).toMatchObject({ limit: 50, offset: 0 })
    expect(tasks.tasks.map((t) => t.title)).toContain("Listed by Effect")
    expect(page.tasks).toHaveLength(1)
    expect(page.limit).toBe(1)
    expect(keys.keys.find((k) => k.name === "expiring")?.expires_at).toBe("2099-01-01T00:00:00.000Z")
  })
})
