import { Projects } from "@taskwright/core"
import { Effect } from "effect"
import type { Handlers } from "../http/Handler.js"

export const projectsHandlers: Handlers<Projects>["projects"] = {
  list: ({ actor, urlParams }) => Effect.flatMap(Projects, (projects) => projects.list(actor, urlParams)),
  get: ({ actor, path }) => Effect.flatMap(Projects, (projects) => projects.get(actor, path.id)),
  create: ({ actor, payload }) => Effect.flatMap(Projects, (projects) => projects.create(actor, payload)),
  delete: ({ actor, path, urlParams }) =>
    Effect.flatMap(Projects, (projects) => projects.delete(actor, path.id, urlParams))
}
