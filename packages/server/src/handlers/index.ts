/**
 * One handler per endpoint: load, call the domain service, answer. Shared by every way the
 * contract is served.
 */
import type { Handlers } from "@taskwright/api"
import type { Labels, Projects, Tasks } from "@taskwright/core"
import { labelsHandlers } from "./labels.js"
import { projectsHandlers } from "./projects.js"
import { tasksHandlers } from "./tasks.js"

export type HandlerServices = Tasks | Projects | Labels

export const handlers: Handlers<HandlerServices> = {
  tasks: tasksHandlers,
  projects: projectsHandlers,
  labels: labelsHandlers
}
