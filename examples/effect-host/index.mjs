// An Effect host serving Taskwright's contract from its own @effect/platform server (the
// Effect-native face: same handlers, same contract, served by HttpApiBuilder). Build first:
// `npm run build`, then `node index.mjs` and `curl localhost:3001/api/health`.
import { createServer } from "node:http"
import { HttpApiBuilder } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { coreLayer, settingsFromEnv } from "@taskwright/core"
import { TaskwrightHttpApiLive } from "@taskwright/server"
import { Layer } from "effect"

const settings = settingsFromEnv(process.env, { databaseUrl: process.env.DATABASE_URL ?? ":memory:" })

const ServerLive = HttpApiBuilder.serve().pipe(
  Layer.provide(TaskwrightHttpApiLive),
  Layer.provide(coreLayer(settings)),
  Layer.provide(NodeHttpServer.layer(createServer, { port: 3001, host: "127.0.0.1" }))
)

NodeRuntime.runMain(Layer.launch(ServerLive))
