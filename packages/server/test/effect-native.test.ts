/**
 * The Effect-native face serves the same handlers: checked in process through its web handler, and
 * its `HttpApp` served by `@effect/platform-node` on a real socket (plain and TLS): the event socket
 * on the platform's WebSocket (refusals before the upgrade, live events, a slow client cut off, a
 * silent one dropped) and a host serving HTTPS itself taken as secure.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import { createServer as createHttpsServer, request as httpsRequest } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { engineLayer, settingsFromEnv, Users } from "@taskwright/core"
import { type HttpFaceOptions, makeEffectWebHandler, makeHttpApp } from "@taskwright/server"
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { connect, refusal, until, wsUrl } from "./events-helpers.js"

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

  it("answers GET /api/events without Upgrade with 426 in the envelope", async () => {
    const r = await call("GET", "/api/events", key)
    expect(r.status).toBe(426)
    expect(r.headers.get("upgrade")).toBe("websocket")
    expect(await r.json()).toMatchObject({ error: { code: "UPGRADE_REQUIRED" } })
  })
})

/** An engine with an admin key, and its `HttpApp` served on a loopback port by `@effect/platform-node`. */
const serveEffectFace = async (
  options: HttpFaceOptions,
  listen: () => ReturnType<typeof createServer> = createServer
) => {
  const engine = ManagedRuntime.make(
    engineLayer(settingsFromEnv({ TASKWRIGHT_RATE_LIMIT: "100000000" }, { databaseUrl: ":memory:" }), {})
  )
  const app = makeHttpApp(await engine.runtime(), options)
  const served = ManagedRuntime.make(
    HttpServer.serve(app).pipe(Layer.provideMerge(NodeHttpServer.layer(listen, { port: 0, host: "127.0.0.1" })))
  )
  const url = await served.runPromise(HttpServer.addressFormattedWith((address) => Effect.succeed(address)))
  const made = await engine.runPromise(
    Effect.gen(function* () {
      const users = yield* Users
      const u = yield* users.create({
        email: "effect@example.test",
        name: "E",
        password: "correct horse battery",
        admin: true
      })
      const k = yield* users.createKey({ userId: u.id, name: "admin", scopes: ["admin"], expiresAt: null })
      return k.secret
    })
  )
  return {
    url,
    key: made,
    close: async () => {
      await served.dispose()
      await engine.dispose()
    }
  }
}

describe("the event socket on the Effect face (makeHttpApp on @effect/platform-node)", () => {
  let face: Awaited<ReturnType<typeof serveEffectFace>>
  // Pings every 200 ms: a paused client, which cannot answer them, would be dropped as dead.
  let pinging: Awaited<ReturnType<typeof serveEffectFace>>
  beforeAll(async () => {
    face = await serveEffectFace({ eventsMaxBufferedBytes: 64 * 1024 })
    pinging = await serveEffectFace({ eventsPingMs: 200 })
  })
  afterAll(async () => {
    await face.close()
    await pinging.close()
  })

  const auth = () => ({ authorization: `Bearer ${face.key}` })
  const createTask = (body: Record<string, unknown>) =>
    fetch(`${face.url}/api/tasks`, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/json" },
      body: JSON.stringify(body)
    })

  it("refuses before the upgrade, in the envelope: no credential, a bad one, a bad since", async () => {
    expect(await refusal(wsUrl(face.url))).toMatchObject({ status: 401, body: { error: { code: "UNAUTHORIZED" } } })
    expect(await refusal(wsUrl(face.url), { authorization: "Bearer twk_nope" })).toMatchObject({ status: 401 })
    expect(await refusal(`${wsUrl(face.url)}?since=x`, auth())).toMatchObject({
      status: 400,
      body: { error: { code: "BAD_REQUEST", details: { fields: [{ path: "since" }] } } }
    })
  })

  it("delivers live events, in order", async () => {
    const c = await connect(wsUrl(face.url), auth())
    for (const title of ["one", "two", "three"]) expect((await createTask({ title })).status).toBe(201)
    await until(() => c.events.length >= 3)
    expect(c.events.map((e) => [e.type, e.data.title])).toEqual([
      ["task.created", "one"],
      ["task.created", "two"],
      ["task.created", "three"]
    ])
    c.ws.close()
  })

  it("drops a client that stops answering pings, keeps one that answers", async () => {
    const credential = { authorization: `Bearer ${pinging.key}` }
    const dead = await connect(wsUrl(pinging.url), credential, { autoPong: false })
    const alive = await connect(wsUrl(pinging.url), credential)
    const started = Date.now()
    expect((await dead.closed).code).toBe(1006)
    expect(Date.now() - started).toBeLessThan(2_000)
    await new Promise((r) => setTimeout(r, 600))
    expect(alive.ws.readyState).toBe(alive.ws.OPEN)
    alive.ws.close()
  })

  it("cuts off a client that stops reading (1013) while another keeps receiving", async () => {
    const slow = await connect(wsUrl(face.url), auth())
    const fast = await connect(wsUrl(face.url), auth())
    const raw = (slow.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket
    raw.pause()
    const description = "x".repeat(5_000)
    const count = 3_000
    for (let i = 0; i < count; i++) expect((await createTask({ title: `t${i}`, description })).status).toBe(201)
    await until(() => fast.events.length >= count, 30_000)
    expect(fast.events.map((e) => e.data.title)).toEqual(Array.from({ length: count }, (_, i) => `t${i}`))
    raw.resume()
    expect((await slow.closed).code).toBe(1013)
    fast.ws.close()
  }, 90_000)
})

describe("the Effect face on a host serving HTTPS itself", () => {
  const dir = mkdtempSync(join(tmpdir(), "tw-effect-tls-"))
  let face: Awaited<ReturnType<typeof serveEffectFace>>
  beforeAll(async () => {
    const key = join(dir, "key.pem")
    const cert = join(dir, "cert.pem")
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-days",
        "1",
        "-keyout",
        key,
        "-out",
        cert
      ],
      { stdio: "ignore" }
    )
    const tls = { key: readFileSync(key), cert: readFileSync(cert) }
    face = await serveEffectFace({}, () => createHttpsServer(tls) as unknown as ReturnType<typeof createServer>)
  })
  afterAll(async () => {
    await face.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it("sets the session cookie Secure", async () => {
    // The platform formats its address as http: whatever the server, the connection says TLS.
    const url = face.url.replace(/^http:/, "https:")
    const answer = await new Promise<{ status: number; cookie: string }>((resolve, reject) => {
      const body = JSON.stringify({ email: "effect@example.test", password: "correct horse battery" })
      const req = httpsRequest(
        `${url}/api/auth/login`,
        { method: "POST", rejectUnauthorized: false, headers: { "content-type": "application/json" } },
        (res) => {
          res.resume()
          res.on("end", () => resolve({ status: res.statusCode ?? 0, cookie: String(res.headers["set-cookie"]) }))
        }
      )
      req.on("error", reject)
      req.end(body)
    })
    expect(answer.status).toBe(200)
    expect(answer.cookie).toMatch(/service_session=.*; Secure/)
  })
})
