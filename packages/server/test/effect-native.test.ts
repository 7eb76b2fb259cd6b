/** The Effect-native face serves the same handlers: checked in process through its web handler. */
import { engineLayer, settingsFromEnv, Users } from "@taskwright/core"
import { makeEffectWebHandler } from "@taskwright/server"
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

describe("Effect-native face (HttpApiBuilder)", () => {
  const core = engineLayer(settingsFromEnv({}, { databaseUrl: ":memory:" }), {})
  const runtime = ManagedRuntime.make(core)
  let web: ReturnType<typeof makeEffectWebHandler>
  let key: string
  let readOnly: string

  beforeAll(async () => {
    // One memo map, so the web handler and this test share the same in-memory store.
    const ctx = await runtime.runtime()
    web = makeEffectWebHandler(Layer.succeedContext(ctx.context))
    const made = await runtime.runPromise(
      Effect.gen(function* () {
        const users = yield* Users
        const u = yield* users.create({ email: "e@example.test", name: "E", password: null, admin: false })
        const rw = yield* users.createKey({
          userId: u.id,
          name: "rw",
          scopes: ["tasks:read", "tasks:write"],
          expiresAt: null
        })
        const ro = yield* users.createKey({ userId: u.id, name: "ro", scopes: ["tasks:read"], expiresAt: null })
        return { rw: rw.secret, ro: ro.secret }
      })
    )
    key = made.rw
    readOnly = made.ro
  })
  afterAll(async () => {
    await web.dispose()
    await runtime.dispose()
  })

  const call = (method: string, path: string, credential: string | undefined, body?: unknown) =>
    web.handler(
      new Request(`http://localhost${path}`, {
        method,
        headers: {
          ...(credential === undefined ? {} : { authorization: `Bearer ${credential}` }),
          ...(body === undefined ? {} : { "content-type": "application/json" })
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) })
      })
    )

  it("creates and reads a task like the fast path", async () => {
    const created = await call("POST", "/api/tasks", key, { title: "Native" })
    expect(created.status).toBe(201)
    const task = (await created.json()) as { id: number; status: string }
    expect(task.status).toBe("backlog")
    const got = await call("GET", `/api/tasks/${task.id}`, key)
    expect(got.status).toBe(200)
    expect(await got.json()).toMatchObject({ id: task.id, title: "Native", agent_runs: [] })
    const health = await call("GET", "/api/health", undefined)
    expect(await health.json()).toEqual({ status: "ok" })
  })

  it("answers 401, 403 and 404 in the common envelope", async () => {
    const anonymous = await call("GET", "/api/tasks", undefined)
    expect(anonymous.status).toBe(401)
    expect(await anonymous.json()).toMatchObject({ error: { code: "UNAUTHORIZED" } })
    const scoped = await call("POST", "/api/tasks", readOnly, { title: "x" })
    expect(scoped.status).toBe(403)
    expect(await scoped.json()).toMatchObject({
      error: { code: "FORBIDDEN", details: { required_scope: "tasks:write" } }
    })
    const missing = await call("GET", "/api/tasks/424242", key)
    expect(missing.status).toBe(404)
    expect(await missing.json()).toMatchObject({ error: { code: "NOT_FOUND" } })
  })
})
