/**
 * Starts Taskwright: the core over the configured store, the bootstrap admin on an empty store,
 * recovery of agent runs a previous process left `running`, and the fast HTTP path on
 * `node:http`. `SIGTERM` drains: stop accepting, finish in-flight requests, stop agent runs
 * (their work committed and their state recorded), close the store.
 */
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { OpenApi } from "@effect/platform"
import { TaskwrightApi } from "@taskwright/api"
import {
  type CoreServices,
  coreLayer,
  ensureAdmin,
  Runs,
  StoreTag,
  statement,
  type TaskwrightConfig,
  type TaskwrightSettings
} from "@taskwright/core"
import { Cause, Effect, Layer, ManagedRuntime, type Option, RuntimeFlags } from "effect"
import { makeRequestListener } from "./FastServer.js"
import { VERSION } from "./version.js"

export interface ServeOptions {
  readonly port: number
  readonly host: string
  /** Spans for every service call; off by default because they cost on the hot path. */
  readonly tracing?: boolean
  readonly log?: (line: string) => void
}

export interface RunningServer {
  readonly url: string
  readonly port: number
  readonly server: Server
  /** Where the bootstrap admin key was written, on the first start of an empty store. */
  readonly adminKeyFile: Option.Option<string>
  /** Runs an effect on the server's own runtime (same store, same services). */
  readonly run: <A, E>(effect: Effect.Effect<A, E, CoreServices | TaskwrightConfig>) => Promise<A>
  readonly close: () => Promise<void>
}

const ping = statement<{ one: number }>("health.ping", "SELECT 1 AS one")

/** The OpenAPI document of the contract, with this server's version. */
export const openApiDocument = () => {
  const spec = OpenApi.fromApi(TaskwrightApi)
  return { ...spec, info: { ...spec.info, version: VERSION } }
}

const docsPage = `<!doctype html>
<html>
  <head>
    <title>Taskwright API reference</title>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
  </head>
  <body>
    <script id="api-reference" data-url="/api/openapi.json"></script>
    <script src="https://cdn.jsdelivr.net/npm/@scalar/api-reference"></script>
  </body>
</html>
`

/**
 * The runtime every request runs on: core services, the chosen store, tracing off unless asked.
 * Effect's built-in fiber metrics (a counter and a histogram updated for every fiber, so for
 * every request) are off too: nothing reads them here.
 */
export const makeRuntime = (settings: TaskwrightSettings, options: { readonly tracing?: boolean } = {}) =>
  ManagedRuntime.make(
    Layer.mergeAll(
      coreLayer(settings),
      Layer.setTracerEnabled(options.tracing === true),
      RuntimeFlags.disableRuntimeMetrics
    )
  )

export const serve = async (settings: TaskwrightSettings, options: ServeOptions): Promise<RunningServer> => {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`))
  const managed = makeRuntime(settings, options)
  const runtime = await managed.runtime()
  const bootstrap = await managed.runPromise(ensureAdmin)
  // Before the first request: a run still `running` in the store has no process supervising it.
  const recovered = await managed.runPromise(Effect.flatMap(Runs, (runs) => runs.recover))
  if (recovered > 0) log(`[taskwright] marked ${recovered} run(s) failed that a previous process left running`)
  const listener = makeRequestListener(runtime, {
    version: VERSION,
    staticRoutes: [
      {
        path: "/api/openapi.json",
        contentType: "application/json; charset=utf-8",
        // Built on the first request: start-up time and idle memory that most servers never need.
        body: () => JSON.stringify(openApiDocument())
      },
      { path: "/api/docs", contentType: "text/html; charset=utf-8", body: docsPage }
    ],
    health: Effect.flatMap(StoreTag, (store) => store.get(ping)).pipe(
      Effect.map((row) => row !== undefined),
      Effect.orElseSucceed(() => false)
    ),
    onDefect: (route, cause) => log(`[taskwright] 500 in ${route}: ${Cause.pretty(cause)}`)
  })
  const server = createServer({ keepAliveTimeout: 5_000 }, listener)
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(options.port, options.host, () => {
      server.off("error", reject)
      resolve()
    })
  })
  const port = (server.address() as AddressInfo).port
  const host = options.host.includes(":") ? `[${options.host}]` : options.host
  let closing: Promise<void> | undefined
  const close = () => {
    closing ??= new Promise<void>((resolve) => {
      server.close(() => resolve())
      server.closeIdleConnections()
    }).then(() => managed.dispose())
    return closing
  }
  return {
    url: `http://${host}:${port}`,
    port,
    server,
    adminKeyFile: bootstrap.keyFile,
    run: (effect) => managed.runPromise(effect),
    close
  }
}
