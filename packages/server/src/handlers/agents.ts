import { Agents } from "@taskwright/core"
import { Effect } from "effect"
import type { Handlers } from "../http/Handler.js"

export const agentsHandlers: Handlers<Agents>["agents"] = {
  list: () => Effect.flatMap(Agents, (agents) => agents.list),
  update: ({ path, payload }) => Effect.flatMap(Agents, (agents) => agents.update(path.name, payload))
}
