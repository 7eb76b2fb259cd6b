/**
 * One handler per endpoint: load, call the domain service, answer. Shared by every way the
 * contract is served.
 */
import type { Handlers } from "@taskwright/api"
import { Labels, Projects, Tasks } from "@taskwright/core"
import { Effect } from "effect"

export type HandlerServices = Tasks | Projects | Labels

export const handlers: Handlers<HandlerServices> = {
  tasks: {
    list: ({ actor, urlParams }) => Effect.flatMap(Tasks, (tasks) => tasks.list(actor, urlParams)),
    get: ({ actor, path }) => Effect.flatMap(Tasks, (tasks) => tasks.get(actor, path.id)),
    create: ({ actor, payload }) => Effect.flatMap(Tasks, (tasks) => tasks.create(actor, payload)),
    update: ({ actor, path, payload }) => Effect.flatMap(Tasks, (tasks) => tasks.update(actor, path.id, payload)),
    delete: ({ actor, path }) => Effect.flatMap(Tasks, (tasks) => tasks.delete(actor, path.id))
  },
  projects: {
    list: ({ actor, urlParams }) => Effect.flatMap(Projects, (projects) => projects.list(actor, urlParams)),
    get: ({ actor, path }) => Effect.flatMap(Projects, (projects) => projects.get(actor, path.id)),
    create: ({ actor, payload }) => Effect.flatMap(Projects, (projects) => projects.create(actor, payload)),
    delete: ({ actor, path, urlParams }) =>
      Effect.flatMap(Projects, (projects) => projects.delete(actor, path.id, urlParams.cascade === "true"))
  },
  labels: {
    list: ({ actor, urlParams }) => Effect.flatMap(Labels, (labels) => labels.list(actor, urlParams)),
    create: ({ actor, payload }) => Effect.flatMap(Labels, (labels) => labels.create(actor, payload))
  }
}
