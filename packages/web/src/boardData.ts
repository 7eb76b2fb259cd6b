/**
 * The board's tasks, read as early as the page allows: when the page opened is the board, the
 * script asks for them at once, alongside `/api/auth/me`, instead of after it answers. The board
 * takes that read for its first drawing; every later read is a new one.
 */
import { allPages, PAGE_SIZE } from "./api.js"
import type { TaskItem } from "./types.js"

/** How many tasks the last read found: the next one asks for all their pages at once. */
let lastCount = 0

/** The first two pages at once (the server preloads them with the page), or as many as the last read had. */
const fetchTasks = (project: string): Promise<Array<TaskItem>> =>
  allPages<"tasks", TaskItem>(
    project === "" ? "/api/tasks" : `/api/tasks?project_id=${encodeURIComponent(project)}`,
    "tasks",
    Math.max(2, Math.ceil(lastCount / PAGE_SIZE))
  ).then((list) => {
    lastCount = list.length
    return list
  })

let early: Promise<Array<TaskItem>> | undefined

/** Starts reading every task (the board opens on all projects). Signed out, it answers 401 like `/api/auth/me`. */
export const prefetchTasks = (): Promise<Array<TaskItem>> => {
  early = fetchTasks("")
  // Not taken (signed out, another screen): its failure is nobody's to report.
  early.catch(() => {})
  return early
}

/** Drops the early read (it was made signed out, so it failed: the board must read anew). */
export const forgetEarlyTasks = (): void => {
  early = undefined
}

/** The early read when it is for `project` and not taken yet, else a new read. */
export const takeTasks = (project: string): Promise<Array<TaskItem>> => {
  const taken = project === "" ? early : undefined
  early = undefined
  return taken ?? fetchTasks(project)
}
