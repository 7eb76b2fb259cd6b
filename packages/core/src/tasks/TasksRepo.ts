/**
 * Task rows. The hot statements (get, list page, count, insert) are prepared once per store.
 * Labels are kept on the row as a JSON array of names, so a page of tasks is one query.
 */
import { Effect } from "effect"
import type { ProjectId, TaskId } from "../domain/Ids.js"
import type { RunSummary } from "../runs/Run.js"
import { type SqlParam, type Statement, StoreTag, statement } from "../store/Store.js"
import type { TaskListItem, TaskPriority, TaskStatus } from "./Task.js"

export interface TaskRow {
  readonly id: TaskId
  readonly owner_id: string
  readonly project_id: ProjectId | null
  readonly title: string
  readonly description: string
  readonly status: TaskStatus
  readonly priority: TaskPriority
  readonly labels: string
  readonly created_at: string
  readonly updated_at: string
}

type ListRow = Omit<TaskRow, "owner_id" | "project_id">

interface TaskWithRunRow extends TaskRow {
  readonly run_id: RunSummary["id"] | null
  readonly run_agent: string | null
  readonly run_status: RunSummary["status"] | null
  readonly run_started_at: string | null
  readonly run_completed_at: string | null
}

const splitRuns = (rows: ReadonlyArray<TaskWithRunRow>) => {
  const first = rows[0]
  if (first === undefined) return undefined
  const runs: Array<RunSummary> = []
  for (const r of rows) {
    if (r.run_id === null || r.run_agent === null || r.run_status === null || r.run_started_at === null) continue
    runs.push({
      id: r.run_id,
      agent: r.run_agent,
      status: r.run_status,
      started_at: r.run_started_at,
      completed_at: r.run_completed_at
    })
  }
  const task: TaskRow = {
    id: first.id,
    owner_id: first.owner_id,
    project_id: first.project_id,
    title: first.title,
    description: first.description,
    status: first.status,
    priority: first.priority,
    labels: first.labels,
    created_at: first.created_at,
    updated_at: first.updated_at
  }
  return { task, runs }
}

export interface TaskFilter {
  readonly ownerId: string | null
  readonly status: TaskStatus | undefined
  readonly priority: TaskPriority | undefined
  readonly projectId: ProjectId | undefined
}

const q = {
  get: statement<TaskRow>(
    "tasks.get",
    "SELECT id, owner_id, project_id, title, description, status, priority, labels, created_at, updated_at FROM tasks WHERE id = ?"
  ),
  // The task and its runs in one statement: one index probe on SQLite, one round trip on PostgreSQL.
  withRuns: statement<TaskWithRunRow>(
    "tasks.withRuns",
    "SELECT t.id, t.owner_id, t.project_id, t.title, t.description, t.status, t.priority, t.labels, t.created_at, t.updated_at, r.id AS run_id, r.agent AS run_agent, r.status AS run_status, r.started_at AS run_started_at, r.completed_at AS run_completed_at FROM tasks t LEFT JOIN runs r ON r.task_id = t.id WHERE t.id = ? ORDER BY r.started_at, r.id"
  ),
  runs: statement<RunSummary>(
    "tasks.runs",
    "SELECT id, agent, status, started_at, completed_at FROM runs WHERE task_id = ? ORDER BY started_at, id"
  ),
  insert: statement<{ id: TaskId }>(
    "tasks.insert",
    "INSERT INTO tasks (owner_id, project_id, title, description, status, priority, labels, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
  ),
  update: statement(
    "tasks.update",
    "UPDATE tasks SET project_id = ?, title = ?, description = ?, status = ?, priority = ?, labels = ?, updated_at = ? WHERE id = ?"
  ),
  delete: statement("tasks.delete", "DELETE FROM tasks WHERE id = ?"),
  running: statement<{ one: number }>(
    "tasks.running",
    "SELECT 1 AS one FROM runs WHERE task_id = ? AND status = 'running' LIMIT 1"
  )
}

// The 16 filter combinations each get one list and one count statement, built on first use.
const listStatements = new Map<string, { page: Statement<ListRow>; count: Statement<{ total: number }> }>()

const filterStatements = (f: TaskFilter) => {
  const key = `${f.ownerId === null ? "" : "o"}${f.status === undefined ? "" : "s"}${f.priority === undefined ? "" : "p"}${f.projectId === undefined ? "" : "j"}`
  let found = listStatements.get(key)
  if (found === undefined) {
    const where: Array<string> = []
    if (f.ownerId !== null) where.push("owner_id = ?")
    if (f.status !== undefined) where.push("status = ?")
    if (f.priority !== undefined) where.push("priority = ?")
    if (f.projectId !== undefined) where.push("project_id = ?")
    const clause = where.length === 0 ? "" : ` WHERE ${where.join(" AND ")}`
    found = {
      page: statement<ListRow>(
        `tasks.list.${key}`,
        `SELECT id, title, description, status, priority, labels, created_at, updated_at FROM tasks${clause} ORDER BY id DESC LIMIT ? OFFSET ?`
      ),
      count: statement<{ total: number }>(
        `tasks.count.${key}`,
        `SELECT COALESCE(SUM(n), 0) AS total FROM task_counts${clause}`
      )
    }
    listStatements.set(key, found)
  }
  return found
}

const filterParams = (f: TaskFilter): Array<SqlParam> => {
  const params: Array<SqlParam> = []
  if (f.ownerId !== null) params.push(f.ownerId)
  if (f.status !== undefined) params.push(f.status)
  if (f.priority !== undefined) params.push(f.priority)
  if (f.projectId !== undefined) params.push(f.projectId)
  return params
}

const toListItem = (row: ListRow): TaskListItem => ({
  id: Number(row.id) as TaskId,
  title: row.title,
  description: row.description,
  status: row.status,
  priority: row.priority,
  labels: JSON.parse(row.labels) as Array<string>,
  created_at: row.created_at,
  updated_at: row.updated_at
})

export class TasksRepo extends Effect.Service<TasksRepo>()("@taskwright/core/TasksRepo", {
  effect: Effect.gen(function* () {
    const store = yield* StoreTag
    return {
      transaction: store.transaction,
      get: (id: TaskId) => store.get(q.get, [id]),
      runSummaries: (id: TaskId) => store.all(q.runs, [id]),
      /** The task row and its run summaries, oldest run first; `undefined` when there is no such task. */
      getWithRuns: (id: TaskId) => Effect.map(store.all(q.withRuns, [id]), splitRuns),
      hasRunningRun: (id: TaskId) => Effect.map(store.get(q.running, [id]), (r) => r !== undefined),
      page: (filter: TaskFilter, limit: number, offset: number) => {
        const s = filterStatements(filter)
        const params = filterParams(filter)
        return Effect.zipWith(
          store.all(s.page, [...params, limit, offset]),
          store.get(s.count, params),
          (rows, count) => ({ tasks: rows.map(toListItem), total: Number(count?.total ?? 0) })
        )
      },
      insert: (row: Omit<TaskRow, "id">) =>
        Effect.map(
          store.get(q.insert, [
            row.owner_id,
            row.project_id,
            row.title,
            row.description,
            row.status,
            row.priority,
            row.labels,
            row.created_at,
            row.updated_at
          ]),
          (r) => Number(r?.id) as TaskId
        ),
      update: (row: TaskRow) =>
        store.run(q.update, [
          row.project_id,
          row.title,
          row.description,
          row.status,
          row.priority,
          row.labels,
          row.updated_at,
          row.id
        ]),
      delete: (id: TaskId) => store.run(q.delete, [id])
    }
  })
}) {}
