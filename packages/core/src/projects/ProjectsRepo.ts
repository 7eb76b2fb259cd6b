import { dirname } from "node:path"
import type { Project, ProjectId, TaskId } from "@taskwright/domain"
import { Effect } from "effect"
import { StoreTag, statement } from "../store/Store.js"

export interface ProjectRow {
  readonly id: ProjectId
  readonly owner_id: string
  readonly name: string
  readonly path: string
  /** `path` with every symlink resolved when the project was created: what ownership is decided on. */
  readonly real_path?: string
  readonly git_url: string | null
  readonly created_at: string
}

const columns = "id, owner_id, name, path, git_url, created_at"
const q = {
  get: statement<ProjectRow>("projects.get", `SELECT ${columns} FROM projects WHERE id = ?`),
  insert: statement(
    "projects.insert",
    "INSERT INTO projects (id, owner_id, name, path, real_path, git_url, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
  ),
  // SQLite serialises writers already (BEGIN IMMEDIATE); PostgreSQL needs the claim check and the
  // insert under one lock, or two users could both take a free path.
  lockPaths: statement<{ locked: unknown }>(
    "projects.lockPaths",
    "SELECT 1 AS locked",
    "SELECT pg_advisory_xact_lock(727001) AS locked"
  ),
  // Another owner's project at the path, below it (`substr` rather than LIKE: paths may hold % and _),
  // or at one of its ancestors (passed as a JSON array).
  claimedByOther: statement<{ one: number }>(
    "projects.claimedByOther",
    `SELECT 1 AS one FROM projects WHERE owner_id <> ? AND (real_path = ? OR substr(real_path, 1, ?) = ?
       OR real_path IN (SELECT value FROM json_each(?))) LIMIT 1`,
    `SELECT 1 AS one FROM projects WHERE owner_id <> $1 AND (real_path = $2 OR substr(real_path, 1, $3) = $4
       OR real_path IN (SELECT json_array_elements_text($5::json))) LIMIT 1`
  ),
  // The owner's own project at the path or at one of its ancestors (passed as a JSON array).
  ownedAt: statement<{ one: number }>(
    "projects.ownedAt",
    "SELECT 1 AS one FROM projects WHERE owner_id = ? AND (real_path = ? OR real_path IN (SELECT value FROM json_each(?))) LIMIT 1",
    "SELECT 1 AS one FROM projects WHERE owner_id = $1 AND (real_path = $2 OR real_path IN (SELECT json_array_elements_text($3::json))) LIMIT 1"
  ),
  ownerIsAdmin: statement<{ is_admin: number | boolean }>(
    "projects.ownerIsAdmin",
    "SELECT is_admin FROM users WHERE id = ?"
  ),
  delete: statement("projects.delete", "DELETE FROM projects WHERE id = ?"),
  listOwn: statement<ProjectRow>(
    "projects.listOwn",
    `SELECT ${columns} FROM projects WHERE owner_id = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`
  ),
  listAll: statement<ProjectRow>(
    "projects.listAll",
    `SELECT ${columns} FROM projects ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`
  ),
  countOwn: statement<{ total: number }>(
    "projects.countOwn",
    "SELECT COUNT(*) AS total FROM projects WHERE owner_id = ?"
  ),
  countAll: statement<{ total: number }>("projects.countAll", "SELECT COUNT(*) AS total FROM projects"),
  taskCount: statement<{ total: number }>(
    "projects.taskCount",
    "SELECT COALESCE(SUM(n), 0) AS total FROM task_counts WHERE project_id = ?"
  ),
  deleteTasks: statement<{ id: TaskId; owner_id: string; project_id: ProjectId | null }>(
    "projects.deleteTasks",
    "DELETE FROM tasks WHERE project_id = ? RETURNING id, owner_id, project_id"
  ),
  runningRuns: statement<{ one: number }>(
    "projects.runningRuns",
    "SELECT 1 AS one FROM runs r JOIN tasks t ON t.id = r.task_id WHERE t.project_id = ? AND r.status = 'running' LIMIT 1"
  )
}

/** `/a/b/c` → `["/a/b", "/a", "/"]`. */
const ancestors = (path: string): Array<string> => {
  const out: Array<string> = []
  let current = dirname(path)
  while (current !== path) {
    out.push(current)
    path = current
    current = dirname(current)
  }
  return out
}

export const toProject = (row: ProjectRow): Project => ({
  id: row.id,
  name: row.name,
  path: row.path,
  git_url: row.git_url,
  created_at: row.created_at
})

/** Project rows. */
export class ProjectsRepo extends Effect.Service<ProjectsRepo>()("@taskwright/core/ProjectsRepo", {
  effect: Effect.gen(function* () {
    const store = yield* StoreTag
    /** Whether another owner's project is at `realPath`, inside it or around it. */
    const claimedByOther = (ownerId: string, realPath: string) => {
      const below = realPath === "/" ? "/" : `${realPath}/`
      return Effect.map(
        store.get(q.claimedByOther, [ownerId, realPath, below.length, below, JSON.stringify(ancestors(realPath))]),
        (taken) => taken !== undefined
      )
    }
    return {
      get: (id: string) => store.get(q.get, [id]),
      claimedByOther,
      /** Whether one of the owner's projects is at `realPath` or around it. */
      ownedAt: (ownerId: string, realPath: string) =>
        Effect.map(
          store.get(q.ownedAt, [ownerId, realPath, JSON.stringify(ancestors(realPath))]),
          (found) => found !== undefined
        ),
      /** Whether the user is an admin (a project keeps its owner's rights, whoever starts a run in it). */
      ownerIsAdmin: (ownerId: string) =>
        Effect.map(store.get(q.ownerIsAdmin, [ownerId]), (row) => row !== undefined && Boolean(Number(row.is_admin))),
      /** Inserts the project unless another owner's project claims its real path; answers whether it did. */
      insertUnlessClaimed: (row: ProjectRow & { readonly real_path: string }) =>
        store.transaction(
          Effect.gen(function* () {
            yield* store.get(q.lockPaths)
            if (yield* claimedByOther(row.owner_id, row.real_path)) return false
            yield* store.run(q.insert, [
              row.id,
              row.owner_id,
              row.name,
              row.path,
              row.real_path,
              row.git_url,
              row.created_at,
              row.created_at
            ])
            return true
          })
        ),
      list: (ownerId: string | null, limit: number, offset: number) =>
        Effect.all(
          ownerId === null
            ? [store.all(q.listAll, [limit, offset]), store.get(q.countAll)]
            : [store.all(q.listOwn, [ownerId, limit, offset]), store.get(q.countOwn, [ownerId])]
        ).pipe(Effect.map(([rows, count]) => ({ projects: rows.map(toProject), total: Number(count?.total ?? 0) }))),
      taskCount: (id: string) => Effect.map(store.get(q.taskCount, [id]), (r) => Number(r?.total ?? 0)),
      hasRunningRuns: (id: string) => Effect.map(store.get(q.runningRuns, [id]), (r) => r !== undefined),
      transaction: store.transaction,
      /** Deletes the project, and its tasks first when `cascade`; answers the tasks deleted and whether the project was. */
      delete: (id: string, cascade: boolean) =>
        store.transaction(
          Effect.gen(function* () {
            const tasks = cascade ? yield* store.all(q.deleteTasks, [id]) : []
            const deleted = (yield* store.run(q.delete, [id])) > 0
            return { tasks, deleted }
          })
        )
    }
  })
}) {}
