/**
 * One handler per endpoint: load, call the domain service, answer. Shared by every way the
 * contract is served.
 */

import type { Agents, Auth, Labels, Projects, Reviews, Runs, Sessions, Tasks, Users } from "@taskwright/core"
import type { Handlers } from "../http/Handler.js"
import { agentsHandlers } from "./agents.js"
import { authHandlers } from "./auth.js"
import { keysHandlers } from "./keys.js"
import { labelsHandlers } from "./labels.js"
import { projectsHandlers } from "./projects.js"
import { reviewsHandlers } from "./reviews.js"
import { runsHandlers } from "./runs.js"
import { tasksHandlers } from "./tasks.js"

export type HandlerServices = Tasks | Projects | Labels | Auth | Sessions | Users | Runs | Reviews | Agents

export const handlers: Handlers<HandlerServices> = {
  tasks: tasksHandlers,
  projects: projectsHandlers,
  labels: labelsHandlers,
  auth: authHandlers,
  keys: keysHandlers,
  runs: runsHandlers,
  reviews: reviewsHandlers,
  agents: agentsHandlers
}
