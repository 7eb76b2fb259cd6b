/**
 * Tasks: the board's items. Every method takes the acting user and enforces ownership
 * (404 for a missing task, 403 for another user's, admins see all) and DECISIONS' rules.
 */

import { Effect } from "effect"
import { type Actor, seesAll } from "../auth/Actor.js"
import { authorizeOwned } from "../auth/Policy.js"
import { Conflict } from "../domain/Errors.js"
import type { ProjectId, TaskId } from "../domain/Ids.js"
import { now } from "../domain/Timestamp.js"
import { fn } from "../domain/Traced.js"
import { defaultColor } from "../labels/Label.js"
import { LabelsRepo } from "../labels/LabelsRepo.js"
import { Projects } from "../projects/Projects.js"
import type { CreatedTask, Task, TaskCreate, TaskList, TaskListParams, TaskUpdate } from "./Task.js"
import { type TaskRow, TasksRepo } from "./TasksRepo.js"

const createdShape = (row: TaskRow): CreatedTask => ({
  id: Number(row.id) as TaskId,
  title: row.title,
  description: row.description,
  status: row.status,
  priority: row.priority,
  labels: JSON.parse(row.labels) as Array<string>,
  project_id: row.project_id,
  created_at: row.created_at,
  updated_at: row.updated_at
})

// The key is added to the literal (one map transition) rather than written `{ ...created, agent_runs }`:
// a key after a spread takes V8's slow define-property path, measurable on every task read.
const taskShape = (row: TaskRow, agent_runs: Task["agent_runs"]): Task => {
  const task: CreatedTask & { agent_runs?: Task["agent_runs"] } = createdShape(row)
  task.agent_runs = agent_runs
  return task as Task
}

export class Tasks extends Effect.Service<Tasks>()("@taskwright/core/Tasks", {
  effect: Effect.gen(function* () {
    const repo = yield* TasksRepo
    const labelsRepo = yield* LabelsRepo
    const projects = yield* Projects

    /** The task if the actor may touch it. */
    const load = (actor: Actor, id: TaskId) =>
      Effect.flatMap(repo.get(id), (row) => authorizeOwned(actor, "task", id, row))

    /** Resolves label names to the owner's stored labels, creating unknown ones with a default colour. */
    const resolveLabels = (ownerId: string, names: ReadonlyArray<string>, at: string) =>
      Effect.gen(function* () {
        const seen = new Set<string>()
        const out: Array<string> = []
        for (const name of names) {
          const folded = name.toLowerCase()
          if (seen.has(folded)) continue
          seen.add(folded)
          const label = yield* labelsRepo.ensure(ownerId, name, defaultColor(name), at)
          out.push(label?.name ?? name)
        }
        return JSON.stringify(out)
      })

    const checkProject = (actor: Actor, projectId: ProjectId | null | undefined) =>
      projectId === undefined || projectId === null ? Effect.void : Effect.asVoid(projects.load(actor, projectId))

    const toTask = (row: TaskRow) => Effect.map(repo.runSummaries(row.id), (agent_runs) => taskShape(row, agent_runs))

    return {
      load,
      list: fn("Tasks.list")(function* (actor: Actor, params: TaskListParams) {
        const { tasks, total } = yield* repo.page(
          {
            ownerId: seesAll(actor) ? null : actor.userId,
            status: params.status,
            priority: params.priority,
            projectId: params.project_id
          },
          params.limit,
          params.offset
        )
        return { tasks, total, limit: params.limit, offset: params.offset } satisfies TaskList
      }),
      get: fn("Tasks.get")(function* (actor: Actor, id: TaskId) {
        const found = yield* repo.getWithRuns(id)
        const row = yield* authorizeOwned(actor, "task", id, found?.task)
        return taskShape(row, found?.runs ?? [])
      }),
      create: fn("Tasks.create")(function* (actor: Actor, input: TaskCreate) {
        yield* checkProject(actor, input.project_id)
        const at = now()
        const names = input.labels ?? []
        const write = Effect.gen(function* () {
          const labels = yield* resolveLabels(actor.userId, names, at)
          const row: Omit<TaskRow, "id"> = {
            owner_id: actor.userId,
            project_id: input.project_id ?? null,
            title: input.title,
            description: input.description ?? "",
            status: "backlog",
            priority: input.priority ?? "medium",
            labels,
            created_at: at,
            updated_at: at
          }
          const id = yield* repo.insert(row)
          return createdShape({ ...row, id })
        })
        // Without labels the task is one INSERT, atomic on its own; labels add rows, so a transaction.
        return yield* names.length === 0 ? write : repo.transaction(write)
      }),
      update: fn("Tasks.update")(function* (actor: Actor, id: TaskId, patch: TaskUpdate) {
        const current = yield* load(actor, id)
        yield* checkProject(actor, patch.project_id)
        const at = now()
        const next = yield* repo.transaction(
          Effect.gen(function* () {
            const row: TaskRow = {
              ...current,
              title: patch.title ?? current.title,
              description: patch.description ?? current.description,
              status: patch.status ?? current.status,
              priority: patch.priority ?? current.priority,
              project_id: patch.project_id === undefined ? current.project_id : patch.project_id,
              labels:
                patch.labels === undefined ? current.labels : yield* resolveLabels(current.owner_id, patch.labels, at),
              updated_at: at
            }
            yield* repo.update(row)
            return row
          })
        )
        return yield* toTask(next)
      }),
      delete: fn("Tasks.delete")(function* (actor: Actor, id: TaskId) {
        yield* load(actor, id)
        if (yield* repo.hasRunningRun(id)) {
          return yield* new Conflict({
            message: "the task has a running agent run; stop it first",
            details: { reason: "run_running" }
          })
        }
        yield* repo.delete(id)
        return { success: true as const }
      })
    }
  })
}) {}
