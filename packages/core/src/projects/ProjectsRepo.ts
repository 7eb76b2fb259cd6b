import { Effect } from "effect"
import type { ProjectId } from "../domain/Ids.js"
import { StoreTag, statement } from "../store/Store.js"
import type { Project } from "./Project.js"

export interface ProjectRow {
  readonly id: ProjectId
  readonly owner_id: string
  readonly name: string
  readonly path: string
  readonly git_url: string | null
  readonly created_at: string
}

const columns = "id, owner_id, name, path, git_url, created_at"
const q = {
  get: statement<ProjectRow>("projects.get", `SELECT ${columns} FROM projects WHERE id = ?`),
  insert: statement(
    "projects.insert",
    "INSERT INTO projects (id, owner_id, name, path, git_url, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
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
  deleteTasks: statement("projects.deleteTasks", "DELETE FROM tasks WHERE project_id = ?"),
  runningRuns: statement<{ one: number }>(
    "projects.runningRuns",
    "SELECT 1 AS one FROM runs r JOIN tasks t ON t.id = r.task_id WHERE t.project_id = ? AND r.status = 'running' LIMIT 1"
  )
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
    return {
      get: (id: string) => store.get(q.get, [id]),
      insert: (row: ProjectRow) =>
        store.run(q.insert, [row.id, row.owner_id, row.name, row.path, row.git_url, row.created_at, row.created_at]),
      list: (ownerId: string | null, limit: number, offset: number) =>
        Effect.all(
          ownerId === null
            ? [store.all(q.listAll, [limit, offset]), store.get(q.countAll)]
            : [store.all(q.listOwn, [ownerId, limit, offset]), store.get(q.countOwn, [ownerId])]
        ).pipe(Effect.map(([rows, count]) => ({ projects: rows.map(toProject), total: Number(count?.total ?? 0) }))),
      taskCount: (id: string) => Effect.map(store.get(q.taskCount, [id]), (r) => Number(r?.total ?? 0)),
      hasRunningRuns: (id: string) => Effect.map(store.get(q.runningRuns, [id]), (r) => r !== undefined),
      /** Deletes the project, and its tasks first when `cascade`. */
      delete: (id: string, cascade: boolean) =>
        store.transaction(
          Effect.gen(function* () {
            if (cascade) yield* store.run(q.deleteTasks, [id])
            return yield* store.run(q.delete, [id])
          })
        )
    }
  })
}) {}
