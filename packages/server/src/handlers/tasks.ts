import { Tasks } from "@taskwright/core"
import { Effect } from "effect"
import type { Handlers } from "../http/Handler.js"

export const tasksHandlers: Handlers<Tasks>["tasks"] = {
  list: ({ actor, urlParams }) => Effect.flatMap(Tasks, (tasks) => tasks.list(actor, urlParams)),
  get: ({ actor, path }) => Effect.flatMap(Tasks, (tasks) => tasks.get(actor, path.id)),
  create: ({ actor, payload }) => Effect.flatMap(Tasks, (tasks) => tasks.create(actor, payload)),
  update: ({ actor, path, payload }) => Effect.flatMap(Tasks, (tasks) => tasks.update(actor, path.id, payload)),
  delete: ({ actor, path }) => Effect.flatMap(Tasks, (tasks) => tasks.delete(actor, path.id))
}
