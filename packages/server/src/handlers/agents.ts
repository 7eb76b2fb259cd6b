import type { Handlers } from "@taskwright/api"
import { Agents } from "@taskwright/core"
import { Effect } from "effect"

export const agentsHandlers: Handlers<Agents>["agents"] = {
  list: () => Effect.flatMap(Agents, (agents) => agents.list),
  update: ({ path, payload }) => Effect.flatMap(Agents, (agents) => agents.update(path.name, payload))
}
