/**
 * Tasks: the board's items. Every method takes the acting user and enforces ownership
 * (404 for a missing task, 403 for another user's, admins see all) and DECISIONS' rules.
 */

import {
  type Actor,
  Conflict,
  type CreatedTask,
  decoder,
  type EventDraft,
  NotFound,
  now,
  type ProjectId,
  seesAll,
  type Task,
  TaskCreate,
  type TaskId,
  type TaskList,
  TaskListParams,
  TaskUpdate
} from "@taskwright/domain"
import { Effect } from "effect"
import { authorizeOwned, ownershipError } from "../auth/Policy.js"
import { fn } from "../domain/Traced.js"
import { Events } from "../events/Events.js"
import { LabelsRepo } from "../labels/LabelsRepo.js"
import { Projects } from "../projects/Projects.js"
import * as Unit from "../store/Unit.js"
import { taskDeleted, taskUpdated } from "./TaskEvents.js"
import { type TaskRow, TasksRepo, toCreatedTask } from "./TasksRepo.js"

// The key is added to the literal (one map transition) rather than written `{ ...created, agent_runs }`:
// a key after a spread takes V8's slow define-property path, measurable on every task read.
const taskShape = (row: TaskRow, agent_runs: Task["agent_runs"]): Task => {
  const task: CreatedTask & { agent_runs?: Task["agent_runs"] } = toCreatedTask(row)
  task.agent_runs = agent_runs
  return task as Task
}

const noLabels = { labels: "[]", events: [] as ReadonlyArray<EventDraft> }

const decodeCreate = decoder(TaskCreate, "body")
const decodeUpdate = decoder(TaskUpdate, "body")
const decodeList = decoder(TaskListParams, "query")

export class Tasks extends Effect.Service<Tasks>()("@taskwright/core/Tasks", {
  effect: Effect.gen(function* () {
    const repo = yield* TasksRepo
    const labelsRepo = yield* LabelsRepo
    const projects = yield* Projects
    const events = yield* Events

    /** The task if the actor may touch it. */
    const load = (actor: Actor, id: TaskId) =>
      Effect.flatMap(repo.get(id), (row) => authorizeOwned(actor, "task", id, row))

    /**
     * Resolves label names to the owner's stored labels, creating unknown ones with a default colour;
     * answers the names to store on the task and the `label.created` events of the new ones. A unit step.
     */
    function* resolveLabels(
      ownerId: string,
      names: ReadonlyArray<string>,
      at: string
    ): Unit.Work<{ readonly labels: string; readonly events: ReadonlyArray<EventDraft> }> {
      const { names: stored, created } = yield* labelsRepo.ensureAll(ownerId, names, at)
      return {
        labels: JSON.stringify(stored),
        events: created.map((label): EventDraft => ({ type: "label.created", ownerId, data: label }))
      }
    }

    const checkProject = (actor: Actor, projectId: ProjectId | null | undefined) =>
      projectId === undefined || projectId === null ? Effect.void : Effect.asVoid(projects.load(actor, projectId))

    const toTask = (row: TaskRow) => Effect.map(repo.runSummaries(row.id), (agent_runs) => taskShape(row, agent_runs))

    return {
      load,
      /** `GET /api/tasks`; `query` as a client sends it ({@link TaskListParams}). */
      list: fn("Tasks.list")(function* (actor: Actor, query: unknown) {
        const params = yield* decodeList(query)
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
      /** `POST /api/tasks`; `body` as a client sends it ({@link TaskCreate}). */
      create: fn("Tasks.create")(function* (actor: Actor, body: unknown) {
        const input = yield* decodeCreate(body)
        yield* checkProject(actor, input.project_id)
        const at = now()
        const names = input.labels ?? []
        return yield* repo.unit(function* () {
          const { labels, events: labelEvents } =
            names.length === 0 ? noLabels : yield* resolveLabels(actor.userId, names, at)
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
          const task = toCreatedTask({ ...row, id: yield* repo.insert(row) })
          yield* events.appendWork([...labelEvents, { type: "task.created", ownerId: actor.userId, data: task }], at)
          return task
        })
      }),
      /** `PATCH /api/tasks/:id`; `body` as a client sends it ({@link TaskUpdate}). */
      update: fn("Tasks.update")(function* (actor: Actor, id: TaskId, body: unknown) {
        const patch = yield* decodeUpdate(body)
        // A user's own PATCH without a project change is checked by the UPDATE itself (`AND
        // owner_id = ?`), so the common case reads nothing first; an admin's needs the owner for the
        // labels, and a project change is checked in the order the rules give (task, then project).
        const guarded = !seesAll(actor) && patch.project_id === undefined
        const ownerId = guarded ? actor.userId : (yield* load(actor, id)).owner_id
        yield* checkProject(actor, patch.project_id)
        const at = now()
        const next = yield* repo.unit(function* () {
          const resolved = patch.labels === undefined ? undefined : yield* resolveLabels(ownerId, patch.labels, at)
          const row = yield* repo.patch(id, { ...patch, labels: resolved?.labels }, at, guarded ? ownerId : undefined)
          if (row === undefined) {
            // Missing or another user's: the 404 or 403, failing inside so new labels roll back.
            const refusal = guarded ? ownershipError(actor, "task", id, yield* repo.read(id)) : undefined
            return refusal === undefined ? undefined : yield* Unit.fail(refusal)
          }
          yield* events.appendWork([...(resolved?.events ?? []), taskUpdated(row)], at)
          return row
        })
        // Deleted between the ownership check and the write.
        if (next === undefined) return yield* NotFound.of("task", id)
        return yield* toTask(next)
      }),
      delete: fn("Tasks.delete")(function* (actor: Actor, id: TaskId) {
        // One guarded DELETE (owner and no running run); only when it deletes nothing is the reason
        // looked up, in the order of the rules: 404, 403, then 409.
        const deleted = yield* repo.unit(function* () {
          const row = yield* repo.deleteIdle(id, seesAll(actor) ? undefined : actor.userId)
          if (row !== undefined) yield* events.appendWork([taskDeleted(row)], now())
          return row
        })
        if (deleted === undefined) {
          const current = yield* load(actor, id)
          if (yield* repo.hasRunningRun(id)) {
            return yield* new Conflict({
              message: "the task has a running agent run; stop it first",
              details: { reason: "run_running" }
            })
          }
          // Its run finished between the two looks: delete it now.
          yield* repo.unit(function* () {
            // Deleted meanwhile by someone else: nothing happened here, nothing to announce.
            if ((yield* repo.delete(id)) === 0) return
            yield* events.appendWork([taskDeleted(current)], now())
          })
        }
        return { success: true as const }
      })
    }
  })
}) {}
