import { Tasks } from "@taskwright/core"
import { Context, Effect } from "effect"
import { answeringNow, type Handlers } from "../http/Handler.js"

// Every task endpoint can be answered at once on the embedded store (no fiber): the board's hot path.
export const tasksHandlers: Handlers<Tasks>["tasks"] = {
  list: answeringNow(
    ({ actor, urlParams }) => Effect.flatMap(Tasks, (tasks) => tasks.list(actor, urlParams)),
    ({ actor, urlParams }, services) => Context.get(services, Tasks).listNow(actor, urlParams)
  ),
  get: answeringNow(
    ({ actor, path }) => Effect.flatMap(Tasks, (tasks) => tasks.get(actor, path.id)),
    ({ actor, path }, services) => Context.get(services, Tasks).getNow(actor, path.id)
  ),
  create: answeringNow(
    ({ actor, payload }) => Effect.flatMap(Tasks, (tasks) => tasks.create(actor, payload)),
    ({ actor, payload }, services) => Context.get(services, Tasks).createNow(actor, payload)
  ),
  update: answeringNow(
    ({ actor, path, payload }) => Effect.flatMap(Tasks, (tasks) => tasks.update(actor, path.id, payload)),
    ({ actor, path, payload }, services) => Context.get(services, Tasks).updateNow(actor, path.id, payload)
  ),
  delete: answeringNow(
    ({ actor, path }) => Effect.flatMap(Tasks, (tasks) => tasks.delete(actor, path.id)),
    ({ actor, path }, services) => Context.get(services, Tasks).deleteNow(actor, path.id)
  )
}
