/**
 * Projects: a name and a filesystem path (a git checkout for agent runs). The path rules of
 * DECISIONS are enforced here: absolute, normalised, inside `TASKWRIGHT_PROJECTS_ROOT` when set,
 * an existing directory unless `git_url` is given (then the repository is cloned there).
 */
import { stat } from "node:fs/promises"
import { isAbsolute, normalize, relative, sep } from "node:path"
import { Effect, Option } from "effect"
import { type Actor, seesAll } from "../auth/Actor.js"
import { authorizeOwned } from "../auth/Policy.js"
import { TaskwrightConfig } from "../Config.js"
import { BadRequest, Conflict } from "../domain/Errors.js"
import { newProjectId, type ProjectId } from "../domain/Ids.js"
import type { Page } from "../domain/Paging.js"
import { now } from "../domain/Timestamp.js"
import { fn } from "../domain/Traced.js"
import { cloneRepository } from "../runs/GitWorkspace.js"
import type { ProjectCreate, ProjectDetail, ProjectList } from "./Project.js"
import { type ProjectRow, ProjectsRepo, toProject } from "./ProjectsRepo.js"

const checkPath = (path: string, root: Option.Option<string>): string | null => {
  if (!isAbsolute(path)) return "path must be absolute"
  if (path.includes("\0")) return "path must not contain NUL"
  const normalised = normalize(path)
  if (normalised !== path && normalised !== path.replace(/\/+$/, "")) return `path must be normalised (${normalised})`
  if (Option.isSome(root)) {
    const rel = relative(root.value, normalised)
    if (rel === "" || rel.startsWith(`..${sep}`) || rel === ".." || isAbsolute(rel)) {
      return `path must be inside ${root.value}`
    }
  }
  return null
}

const directoryExists = (path: string) =>
  Effect.promise(() =>
    stat(path).then(
      (s) => s.isDirectory(),
      () => false
    )
  )
const pathExists = (path: string) =>
  Effect.promise(() =>
    stat(path).then(
      () => true,
      () => false
    )
  )

export class Projects extends Effect.Service<Projects>()("@taskwright/core/Projects", {
  effect: Effect.gen(function* () {
    const repo = yield* ProjectsRepo
    const config = yield* TaskwrightConfig

    /** Loads a project the actor may use: 404 when missing, 403 when another user's. */
    const load = (actor: Actor, id: ProjectId) =>
      Effect.flatMap(repo.get(id), (row) => authorizeOwned(actor, "project", id, row))

    return {
      load,
      list: fn("Projects.list")(function* (actor: Actor, page: Page) {
        const { projects, total } = yield* repo.list(seesAll(actor) ? null : actor.userId, page.limit, page.offset)
        return { projects, total, limit: page.limit, offset: page.offset } satisfies ProjectList
      }),
      get: fn("Projects.get")(function* (actor: Actor, id: ProjectId) {
        const row = yield* load(actor, id)
        const task_count = yield* repo.taskCount(id)
        return { ...toProject(row), task_count } satisfies ProjectDetail
      }),
      create: fn("Projects.create")(function* (actor: Actor, input: ProjectCreate) {
        const problem = checkPath(input.path, config.projectsRoot)
        if (problem !== null) return yield* BadRequest.field("path", problem)
        const path = normalize(input.path).replace(/(.)\/+$/, "$1")
        const gitUrl = input.git_url ?? null
        if (gitUrl === null) {
          if (!(yield* directoryExists(path))) {
            return yield* BadRequest.field(
              "path",
              "path must be an existing directory (or give git_url to clone into it)"
            )
          }
        } else {
          if (yield* pathExists(path))
            return yield* BadRequest.field("path", "path must not exist yet when git_url is given")
          yield* cloneRepository({ url: gitUrl, path }).pipe(
            Effect.mapError(
              (e) => new BadRequest({ message: `cannot clone git_url: ${e.message}`, details: { field: "git_url" } })
            )
          )
        }
        const row: ProjectRow = {
          id: newProjectId(),
          owner_id: actor.userId,
          name: input.name,
          path,
          git_url: gitUrl,
          created_at: now()
        }
        yield* repo.insert(row)
        return toProject(row)
      }),
      delete: fn("Projects.delete")(function* (actor: Actor, id: ProjectId, cascade: boolean) {
        yield* load(actor, id)
        if (yield* repo.hasRunningRuns(id)) {
          return yield* new Conflict({
            message: "the project has a running agent run",
            details: { reason: "run_running" }
          })
        }
        if (!cascade && (yield* repo.taskCount(id)) > 0) {
          return yield* new Conflict({
            message: "the project still has tasks; delete them first or pass ?cascade=true",
            details: { reason: "has_tasks" }
          })
        }
        yield* repo.delete(id, cascade)
        return { success: true as const }
      })
    }
  })
}) {}
