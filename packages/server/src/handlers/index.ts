/**
 * One handler per endpoint: load, call the domain service, answer. Shared by every way the
 * contract is served.
 */
import type { Handlers } from "@taskwright/api"
import type { Auth, Labels, Projects, Sessions, Tasks, Users } from "@taskwright/core"
import { authHandlers } from "./auth.js"
import { keysHandlers } from "./keys.js"
import { labelsHandlers } from "./labels.js"
import { projectsHandlers } from "./projects.js"
import { tasksHandlers } from "./tasks.js"

export type HandlerServices = Tasks | Projects | Labels | Auth | Sessions | Users

export const handlers: Handlers<HandlerServices> = {
  tasks: tasksHandlers,
  projects: projectsHandlers,
  labels: labelsHandlers,
  auth: authHandlers,
  keys: keysHandlers
}
