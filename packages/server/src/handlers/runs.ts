import { Runs } from "@taskwright/core"
import { Effect } from "effect"
import type { Handlers } from "../http/Handler.js"

export const runsHandlers: Handlers<Runs>["runs"] = {
  start: ({ actor, path, payload }) => Effect.flatMap(Runs, (runs) => runs.start(actor, path.id, payload)),
  get: ({ actor, path }) => Effect.flatMap(Runs, (runs) => runs.get(actor, path.run_id)),
  logs: ({ actor, path, urlParams }) => Effect.flatMap(Runs, (runs) => runs.logs(actor, path.run_id, urlParams)),
  stop: ({ actor, path }) => Effect.flatMap(Runs, (runs) => runs.stop(actor, path.run_id))
}
