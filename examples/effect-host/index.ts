// An Effect application serving Taskwright from its own @effect/platform server: its own routes,
// and Taskwright's whole HTTP API mounted under /tasks-api (TaskwrightHttp.layer() over the engine
// layer: the same gate, scopes, errors and documents as `taskwright serve`). The engine logs
// through this program's Logger. Run with --smoke to call both and exit.
import { mkdtempSync } from "node:fs"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { HttpRouter, HttpServer, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { engineLayer, settingsFromEnv, TaskwrightEngine } from "@taskwright/core"
import { TaskwrightHttp } from "@taskwright/server"
import { Effect, Layer, Option, Redacted } from "effect"

const settings = settingsFromEnv(process.env, {
  databaseUrl: ":memory:",
  dataDir: mkdtempSync(join(tmpdir(), "taskwright-effect-host-"))
})

/** The host's router: a route of its own, and Taskwright under /tasks-api. */
const HttpLive = Layer.unwrapEffect(
  Effect.gen(function* () {
    const { app } = yield* TaskwrightHttp
    const router = HttpRouter.empty.pipe(
      HttpRouter.get("/", HttpServerResponse.text("The Effect host's own home page")),
      HttpRouter.mountApp("/tasks-api", app)
    )
    return HttpServer.serve(router)
  })
)

/** With --smoke: calls the host's route and the API with the bootstrap admin's key, then ends. */
const smoke = Effect.gen(function* () {
  const address = yield* HttpServer.addressFormattedWith((url) => Effect.succeed(url))
  const { bootstrap } = yield* TaskwrightEngine
  const key = Option.getOrElse(Option.map(bootstrap.adminKey, Redacted.value), () => "")
  yield* Effect.log(`listening on ${address}`)
  const call = (path: string, init?: RequestInit) =>
    Effect.promise(async () => {
      const response = await fetch(`${address}${path}`, init)
      return `${response.status} ${await response.text()}`
    })
  console.log("own route", yield* call("/"))
  console.log("api without a key", yield* call("/tasks-api/api/tasks"))
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
  console.log(
    "api with a key",
    yield* call("/tasks-api/api/tasks", {
      method: "POST",
      headers,
      body: JSON.stringify({ title: "From an Effect host" })
    })
  )
  console.log("bad input", yield* call("/tasks-api/api/tasks", { method: "POST", headers, body: '{"title":1}' }))
})

const program = process.argv.includes("--smoke")
  ? Layer.launch(HttpLive).pipe(Effect.race(smoke))
  : Layer.launch(HttpLive)

program.pipe(
  Effect.provide(TaskwrightHttp.layer()),
  Effect.provide(engineLayer(settings)),
  Effect.provide(NodeHttpServer.layer(createServer, { port: Number(process.env.PORT ?? 0), host: "127.0.0.1" })),
  NodeRuntime.runMain
)
