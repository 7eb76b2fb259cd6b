/**
 * Projects: a name and a filesystem path (a git checkout for agent runs). A project's path is
 * where agents run and commit, so who may use which path is a security boundary:
 *
 * - absolute and normalised; an existing directory unless `git_url` is given (then the
 *   repository is cloned there, once the path is known to be the actor's to take; `file://` and
 *   ssh clones are for admins only: they read the host, or use the service's ssh identity);
 * - never the service's data directory, a directory that contains it, or anything inside it
 *   but the projects root (keys, the database, other runs' worktrees live there);
 * - non-admins only inside the projects root (`TASKWRIGHT_PROJECTS_ROOT`, default
 *   `<data dir>/projects`); admins anywhere else;
 * - one owner per path, after symlinks are resolved: a path equal to, inside or around another
 *   user's project is 409, checked and recorded under one lock so two users cannot race for it;
 * - the same for where its repository keeps its data (a `.git` file, a `commondir` file or a
 *   symlinked `.git` may lead anywhere): outside the project, only in another of the owner's
 *   projects (an admin: where an admin's project may be). Checked again before every run.
 */

import { mkdir, realpath, rename, rm, rmdir, stat } from "node:fs/promises"
import { basename, dirname, isAbsolute, join, normalize, relative, sep } from "node:path"
import {
  type Actor,
  BadRequest,
  Conflict,
  decoder,
  Forbidden,
  newProjectId,
  now,
  ProjectCreate,
  ProjectDeleteParams,
  type ProjectDetail,
  type ProjectId,
  type ProjectList,
  ProjectListParams,
  randomBase62,
  seesAll
} from "@taskwright/domain"
import { Effect, Exit, Option } from "effect"
import { authorizeOwned } from "../auth/Policy.js"
import { TaskwrightConfig } from "../Config.js"
import { fn } from "../domain/Traced.js"
import { Events } from "../events/Events.js"
import { cloneRepository, type RepositoryDirs, repositoryDirs } from "../runs/GitWorkspace.js"
import type { StoreError } from "../store/Store.js"
import { taskDeleted } from "../tasks/TaskEvents.js"
import { type ProjectRow, ProjectsRepo, toProject } from "./ProjectsRepo.js"

const checkShape = (path: string): string | null => {
  if (!isAbsolute(path)) return "path must be absolute"
  if (path.includes("\0")) return "path must not contain NUL"
  const normalised = normalize(path)
  if (normalised !== path && normalised !== path.replace(/\/+$/, "")) return `path must be normalised (${normalised})`
  return null
}

/** `inner` is `outer` itself or below it. */
const within = (inner: string, outer: string): boolean => {
  const rel = relative(outer, inner)
  return rel === "" || (rel !== ".." && !rel.startsWith(`..${sep}`) && !isAbsolute(rel))
}

/** The path with every symlink resolved; for a path that does not exist yet, its nearest existing ancestor's. */
const resolveReal = (path: string): Promise<string> =>
  realpath(path).catch(async () => {
    const parent = dirname(path)
    return parent === path ? path : join(await resolveReal(parent), basename(path))
  })

interface Places {
  readonly dataDir: string
  readonly root: string
}

/** Why the actor may not put a project (or what `subject` names) at `real` (symlinks resolved), or null. */
const placementProblem = (real: string, places: Places, admin: boolean, subject = "path"): string | null => {
  if (within(places.dataDir, real)) return `${subject} must not be the service's data directory or contain it`
  if (within(real, places.dataDir) && !(within(real, places.root) && real !== places.root)) {
    return `${subject} must not be inside the service's data directory (other than inside ${places.root})`
  }
  if (!admin && (!within(real, places.root) || real === places.root)) return `${subject} must be inside ${places.root}`
  return null
}

/** Why a project's repository may not be written where it keeps its data; `taken` when another user's project is why. */
interface RepositoryProblem {
  readonly message: string
  readonly taken: boolean
}

/**
 * Clone URLs that act with the service's own rights on this host, so only an admin may give one:
 * `file://` reads its files, ssh authenticates with its identity (keys, agent, known hosts).
 */
const adminOnlyClone = (url: string): Forbidden | null => {
  if (url.startsWith("file:")) {
    return new Forbidden({
      message: "cloning a file:// URL reads this host's files: only an admin may",
      details: { field: "git_url", reason: "file_clone_needs_admin" }
    })
  }
  if (url.startsWith("ssh:") || url.startsWith("git@")) {
    return new Forbidden({
      message: "cloning an ssh URL uses this service's own ssh identity (its keys and agent): only an admin may",
      details: { field: "git_url", reason: "ssh_clone_needs_admin" }
    })
  }
  return null
}

const pathTaken = () =>
  new Conflict({
    message: "another user's project already uses this path, one inside it, or one around it",
    details: { field: "path", reason: "path_taken" }
  })

/** The nearest ancestor of `path` (or `path` itself) that exists. */
const nearestExisting = async (path: string): Promise<string> => {
  const found = await stat(path).then(
    () => true,
    () => false
  )
  return found || dirname(path) === path ? path : nearestExisting(dirname(path))
}

/** Removes `path`, then the directories above it up to (not including) `keep`, as long as they are empty. */
const removeUpTo = async (path: string, keep: string): Promise<void> => {
  await rm(path, { recursive: true, force: true }).catch(() => undefined)
  for (let dir = dirname(path); dir !== keep && within(dir, keep); dir = dirname(dir)) {
    if (
      !(await rmdir(dir).then(
        () => true,
        () => false
      ))
    )
      return
  }
}

const decodeCreate = decoder(ProjectCreate, "body")
const decodeList = decoder(ProjectListParams, "query")
const decodeDelete = decoder(ProjectDeleteParams, "query")

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
    const events = yield* Events
    const config = yield* TaskwrightConfig

    /** Loads a project the actor may use: 404 when missing, 403 when another user's. */
    const load = (actor: Actor, id: ProjectId) =>
      Effect.flatMap(repo.get(id), (row) => authorizeOwned(actor, "project", id, row))

    const projectsRoot = Option.getOrElse(config.projectsRoot, () => join(config.dataDir, "projects"))
    // Resolved on first use, after the directories exist, so symlinked locations compare right.
    let places: Places | undefined
    const resolvePlaces = Effect.promise(async (): Promise<Places> => {
      if (places !== undefined) return places
      await mkdir(config.dataDir, { recursive: true })
      await mkdir(projectsRoot, { recursive: true })
      places = { dataDir: await resolveReal(config.dataDir), root: await resolveReal(projectsRoot) }
      return places
    })

    /**
     * Whether the repository at `real` may be written where it keeps its data (`dirs`): a run
     * writes its worktree entry and branch in the common git directory, wherever a `.git` file, a
     * `commondir` file or a symlinked `.git` puts it. Outside the project's own directory, that is
     * only inside another project of the same owner or, for an admin, where an admin's project may
     * be; never inside another user's project or the data directory.
     */
    const repositoryProblem = (real: string, dirs: RepositoryDirs, ownerId: string, admin: boolean) =>
      Effect.gen(function* () {
        if (dirs.topLevel !== null && dirs.topLevel !== real) {
          return {
            taken: false,
            message: `the repository's work tree is ${dirs.topLevel} (core.worktree), not the project's directory`
          } satisfies RepositoryProblem
        }
        const where = yield* resolvePlaces
        const kinds = [
          ["git directory", dirs.gitDir],
          ["common git directory", dirs.commonDir]
        ] as const
        for (const [kind, dir] of kinds) {
          if (within(dir, real)) continue
          const subject = `the repository's ${kind} (${dir}, outside the project's directory)`
          const placed = placementProblem(dir, where, admin, subject)
          if (placed !== null) return { taken: false, message: placed } satisfies RepositoryProblem
          if (yield* repo.claimedByOther(ownerId, dir)) {
            return { taken: true, message: `${subject} is in another user's project` } satisfies RepositoryProblem
          }
          if (!admin && !(yield* repo.ownedAt(ownerId, dir))) {
            return {
              taken: false,
              message: `${subject} must be inside the project or another of its owner's projects`
            } satisfies RepositoryProblem
          }
        }
        return null
      })

    const inspect = (path: string) =>
      repositoryDirs(path).pipe(
        Effect.mapError(
          (e) =>
            new BadRequest({
              message: `cannot inspect the repository at ${path}: ${e.message}`,
              details: { reason: "git_failed" }
            })
        )
      )

    /**
     * Clones `url` into a temporary sibling of `path`, then (if `record` claims the path) moves it
     * into place in the claim's transaction. Whatever was made is removed on any failure, a lost
     * claim included, along with the directories the clone created above it.
     */
    const cloneAndRecord = (
      url: string,
      path: string,
      record: (place: Effect.Effect<void, BadRequest>) => Effect.Effect<boolean, BadRequest | StoreError>
    ) =>
      Effect.gen(function* () {
        const keep = yield* Effect.promise(() => nearestExisting(dirname(path)))
        const staging = join(dirname(path), `.${basename(path)}.clone-${randomBase62(10)}`)
        let placed = false
        const place = Effect.tryPromise({
          try: () => rename(staging, path),
          catch: () => BadRequest.field("path", "path must not exist yet when git_url is given")
        }).pipe(
          Effect.tap(() => {
            placed = true
          })
        )
        return yield* Effect.gen(function* () {
          yield* cloneRepository({ url, path: staging }).pipe(
            Effect.mapError(
              (e) => new BadRequest({ message: `cannot clone git_url: ${e.message}`, details: { field: "git_url" } })
            )
          )
          return yield* record(place)
        }).pipe(
          Effect.onExit((exit) =>
            Exit.isSuccess(exit) && exit.value
              ? Effect.void
              : Effect.promise(async () => {
                  // Moved in, then rolled back: the path is the clone this request made.
                  if (placed) await rm(path, { recursive: true, force: true }).catch(() => undefined)
                  await removeUpTo(staging, keep)
                })
          )
        )
      })

    return {
      load,
      /**
       * The directories of a project's repository, checked again before a run writes there (the
       * project's directory and its `.git` may have changed since it was recorded): the project's
       * path must still resolve where its owner may have a project, and the repository keep its
       * data where {@link repositoryProblem} allows. 400 or 409 (another user's project) otherwise.
       */
      repositoryFor: fn("Projects.repositoryFor")(function* (project: ProjectRow) {
        const refuse = (message: string, reason: string, taken: boolean) => {
          const details = { reason, project_id: project.id }
          const full = `project ${project.id}: ${message}; no worktree or branch was made`
          return taken ? new Conflict({ message: full, details }) : new BadRequest({ message: full, details })
        }
        const admin = yield* repo.ownerIsAdmin(project.owner_id)
        const real = yield* Effect.promise(() => resolveReal(project.path))
        const placed = placementProblem(real, yield* resolvePlaces, admin, `its path (now ${real})`)
        if (placed !== null) return yield* refuse(placed, "project_path_moved", false)
        if (yield* repo.claimedByOther(project.owner_id, real)) {
          return yield* refuse(`its path now resolves to ${real}, in another user's project`, "path_taken", true)
        }
        const dirs = yield* inspect(project.path)
        if (dirs === null) return yield* refuse("its path is not a git repository", "not_a_git_repository", false)
        const problem = yield* repositoryProblem(real, dirs, project.owner_id, admin)
        if (problem !== null) {
          return yield* refuse(
            problem.message,
            problem.taken ? "repository_taken" : "repository_outside_project",
            problem.taken
          )
        }
        return dirs
      }),
      /** `GET /api/projects`; `query` as a client sends it ({@link ProjectListParams}). */
      list: fn("Projects.list")(function* (actor: Actor, query: unknown) {
        const page = yield* decodeList(query)
        const { projects, total } = yield* repo.list(seesAll(actor) ? null : actor.userId, page.limit, page.offset)
        return { projects, total, limit: page.limit, offset: page.offset } satisfies ProjectList
      }),
      get: fn("Projects.get")(function* (actor: Actor, id: ProjectId) {
        const row = yield* load(actor, id)
        const task_count = yield* repo.taskCount(id)
        return { ...toProject(row), task_count } satisfies ProjectDetail
      }),
      /** `POST /api/projects`; `body` as a client sends it ({@link ProjectCreate}). */
      create: fn("Projects.create")(function* (actor: Actor, body: unknown) {
        const input = yield* decodeCreate(body)
        const shape = checkShape(input.path)
        if (shape !== null) return yield* BadRequest.field("path", shape)
        const path = normalize(input.path).replace(/(.)\/+$/, "$1")
        const gitUrl = input.git_url ?? null
        const admin = seesAll(actor)
        const forbidden = gitUrl === null || admin ? null : adminOnlyClone(gitUrl)
        if (forbidden !== null) return yield* forbidden
        const real = yield* Effect.promise(() => resolveReal(path))
        const problem = placementProblem(real, yield* resolvePlaces, admin)
        if (problem !== null) return yield* BadRequest.field("path", problem)
        // Before anything is written there: a clone into another user's tree would stay in it.
        // (Checked again, under the lock, when the project is recorded.)
        if (yield* repo.claimedByOther(actor.userId, real)) return yield* pathTaken()
        if (gitUrl === null && !(yield* directoryExists(path))) {
          return yield* BadRequest.field(
            "path",
            "path must be an existing directory (or give git_url to clone into it)"
          )
        }
        if (gitUrl !== null && (yield* pathExists(path))) {
          return yield* BadRequest.field("path", "path must not exist yet when git_url is given")
        }
        // An existing repository whose `.git` leads elsewhere (runs check it again, it may change).
        const dirs = gitUrl === null ? yield* inspect(path) : null
        const refused = dirs === null ? null : yield* repositoryProblem(real, dirs, actor.userId, admin)
        if (refused !== null) {
          const details = {
            field: "path",
            reason: refused.taken ? "repository_taken" : "repository_outside_project",
            fields: [{ path: "path", message: refused.message }]
          }
          const message = `path: ${refused.message}`
          return yield* refused.taken ? new Conflict({ message, details }) : new BadRequest({ message, details })
        }
        const row: ProjectRow & { readonly real_path: string } = {
          id: newProjectId(),
          owner_id: actor.userId,
          name: input.name,
          path,
          real_path: real,
          git_url: gitUrl,
          created_at: now()
        }
        const project = toProject(row)
        /** Records the project unless another owner claimed its path meanwhile, after `place` (in the same transaction). */
        const record = <E>(place: Effect.Effect<void, E>) =>
          repo.transaction(
            Effect.gen(function* () {
              if (!(yield* repo.insertUnlessClaimed(row))) return false
              yield* place
              yield* events.append([{ type: "project.created", ownerId: row.owner_id, data: project }], row.created_at)
              return true
            })
          )
        const claimed = gitUrl === null ? yield* record(Effect.void) : yield* cloneAndRecord(gitUrl, path, record)
        if (!claimed) return yield* pathTaken()
        return project
      }),
      /** `DELETE /api/projects/:id`; `query` as a client sends it ({@link ProjectDeleteParams}). */
      delete: fn("Projects.delete")(function* (actor: Actor, id: ProjectId, query: unknown) {
        const cascade = (yield* decodeDelete(query)).cascade === "true"
        const project = yield* load(actor, id)
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
        yield* repo.transaction(
          Effect.gen(function* () {
            const { tasks, deleted } = yield* repo.delete(id, cascade)
            if (!deleted) return
            yield* events.append(
              [...tasks.map(taskDeleted), { type: "project.deleted", ownerId: project.owner_id, data: { id } }],
              now()
            )
          })
        )
        return { success: true as const }
      })
    }
  })
}) {}
