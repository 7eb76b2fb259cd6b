/**
 * Tasks: the board's items. Every method takes the acting user and enforces ownership
 * (404 for a missing task, 403 for another user's, admins see all) and DECISIONS' rules.
 */

import {
  type Actor,
  type BadRequest,
  Conflict,
  type CreatedTask,
  decoder,
  type EventDraft,
  type Forbidden,
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
import { Effect, Exit } from "effect"
import { authorizeOwned, ownershipError } from "../auth/Policy.js"
import { fn } from "../domain/Traced.js"
import { Events } from "../events/Events.js"
import { LabelsRepo } from "../labels/LabelsRepo.js"
import { Projects } from "../projects/Projects.js"
import {
  type Direct,
  directOrEffect,
  flatMapDirect,
  JsonText,
  LATER,
  mapDirect,
  type StoreError
} from "../store/Store.js"
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

const orLater = <A, E>(answer: Direct<A, E> | typeof LATER): Direct<A, E> | undefined =>
  answer === LATER ? undefined : answer

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

    /** A task as `GET /api/tasks/:id` shows it, if the actor may see it. */
    const shown = (
      actor: Actor,
      id: TaskId,
      found: { readonly task: TaskRow; readonly runs: Task["agent_runs"] } | undefined
    ): Exit.Exit<Task, NotFound | Forbidden> => {
      const refusal = ownershipError(actor, "task", id, found?.task)
      if (refusal !== undefined) return Exit.fail(refusal)
      return found === undefined ? Exit.fail(NotFound.of("task", id)) : Exit.succeed(taskShape(found.task, found.runs))
    }

    const filterOf = (actor: Actor, params: TaskListParams) => ({
      ownerId: seesAll(actor) ? null : actor.userId,
      status: params.status,
      priority: params.priority,
      projectId: params.project_id
    })

    // The writes, each one unit of work; the Effect methods and their `...Now` forms (answered at
    // once on the embedded store, without a fiber) run the same units. On PostgreSQL a write with no
    // label to create runs as one statement instead (see `oneStatement` below).

    const newRow = (actor: Actor, input: TaskCreate, labels: string, at: string): Omit<TaskRow, "id"> => ({
      owner_id: actor.userId,
      project_id: input.project_id ?? null,
      title: input.title,
      description: input.description ?? "",
      status: "backlog",
      priority: input.priority ?? "medium",
      labels,
      created_at: at,
      updated_at: at
    })

    const createWork = (actor: Actor, input: TaskCreate, at: string) =>
      function* (): Unit.Work<CreatedTask> {
        const names = input.labels ?? []
        const { labels, events: labelEvents } =
          names.length === 0 ? noLabels : yield* resolveLabels(actor.userId, names, at)
        const row = newRow(actor, input, labels, at)
        const task = toCreatedTask({ ...row, id: yield* repo.insert(row) })
        yield* events.appendWork([...labelEvents, { type: "task.created", ownerId: actor.userId, data: task }], at)
        return task
      }

    /**
     * A user's own PATCH (`guarded`) is checked by the UPDATE itself (`AND owner_id = ?`), so it reads
     * nothing first; an admin's comes with the owner, looked up before.
     */
    const updateWork = (actor: Actor, id: TaskId, patch: TaskUpdate, ownerId: string, guarded: boolean, at: string) =>
      function* (): Unit.Work<Task, NotFound | Forbidden> {
        // The runs are read first, before any row is locked. On PostgreSQL the UPDATE locks the
        // owner's task-count rows (its trigger) and the append the event log, both until commit,
        // and every other write of that owner waits meanwhile: a round trip fewer while they are held.
        const runs = yield* repo.runsOf(id)
        const resolved = patch.labels === undefined ? undefined : yield* resolveLabels(ownerId, patch.labels, at)
        const row = yield* repo.patch(id, { ...patch, labels: resolved?.labels }, at, guarded ? ownerId : undefined)
        if (row === undefined) {
          // Missing or another user's (or deleted since an admin's look): the 404 or 403, failing
          // inside so that new labels roll back.
          const refusal = guarded ? ownershipError(actor, "task", id, yield* repo.read(id)) : undefined
          return yield* Unit.fail(refusal ?? NotFound.of("task", id))
        }
        yield* events.appendWork([...(resolved?.events ?? []), taskUpdated(row)], at)
        return taskShape(row, runs)
      }

    const deleted = { success: true as const }

    // PostgreSQL (`TasksRepo.writesInOneStatement`): the common writes as one statement each, after
    // one read of the labels a request names. When a label must be created first, the unit does the
    // write; when a statement changes nothing, the unit runs and finds out why (the 404, 403 or 409).
    const oneStatement = repo.writesInOneStatement

    /**
     * The labels as a one-statement write stores them (JSON): none, or the stored spelling of each
     * name when the owner has every one already; `undefined` when one must be created.
     */
    const storedLabels = (ownerId: string, names: ReadonlyArray<string>) =>
      names.length === 0
        ? { effect: Effect.succeed<string | undefined>("[]"), now: () => Exit.succeed<string | undefined>("[]") }
        : labelsRepo.storedNames(ownerId, names)

    /** A unit's answer without a fiber (from its Effect should the store say `LATER`). */
    const unitDirect = <A, E>(work: () => Unit.Work<A, E>) =>
      directOrEffect({ effect: repo.unit(work), now: () => repo.unitNow(work) })

    /** A one-statement write's answer: `done` of what it wrote, subscribers told; the unit's when it wrote nothing. */
    const thenDone = <R, A, E>(
      written: Direct<R | undefined, StoreError>,
      done: (r: R) => A,
      work: () => Unit.Work<A, E>
    ): Direct<A, E | StoreError> =>
      flatMapDirect(written, (r): Direct<A, E | StoreError> => {
        if (r === undefined) return unitDirect(work)
        events.appendedNow()
        return Exit.succeed(done(r))
      })

    /**
     * One guarded DELETE (owner and no running run) for the common case; only when it deletes nothing
     * is the reason looked up, in the order of the rules: 404, 403, then 409.
     */
    const deleteWork = (actor: Actor, id: TaskId) =>
      function* (): Unit.Work<typeof deleted, NotFound | Forbidden | Conflict> {
        const row = yield* repo.deleteIdle(id, seesAll(actor) ? undefined : actor.userId)
        if (row !== undefined) {
          yield* events.appendWork([taskDeleted(row)], now())
          return deleted
        }
        const current = yield* repo.read(id)
        const refusal = ownershipError(actor, "task", id, current)
        if (current === undefined || refusal !== undefined) return yield* Unit.fail(refusal ?? NotFound.of("task", id))
        if (yield* repo.runs(id)) {
          return yield* Unit.fail(
            new Conflict({
              message: "the task has a running agent run; stop it first",
              details: { reason: "run_running" }
            })
          )
        }
        // Its run finished between the two statements: delete it now (unless someone else just did).
        if ((yield* repo.delete(id)) > 0) yield* events.appendWork([taskDeleted(current)], now())
        return deleted
      }

    return {
      load,
      /** `GET /api/tasks`; `query` as a client sends it ({@link TaskListParams}). */
      list: fn("Tasks.list")(function* (actor: Actor, query: unknown) {
        const params = yield* decodeList(query)
        const { tasks, total } = yield* repo.page(filterOf(actor, params), params.limit, params.offset)
        return { tasks, total, limit: params.limit, offset: params.offset } satisfies TaskList
      }),
      /**
       * {@link list} answered without a fiber when the store can, else `undefined`; on SQLite as
       * the JSON text of the answer.
       */
      listNow: (
        actor: Actor,
        query: unknown
      ): Direct<TaskList | JsonText<TaskList>, BadRequest | StoreError> | undefined => {
        const params = decodeList(query)
        if (Exit.isFailure(params)) return Exit.failCause(params.cause)
        const { limit, offset } = params.value
        const page = repo.pageNow(filterOf(actor, params.value), limit, offset)
        if (page === LATER) return undefined
        return mapDirect(page, ({ tasks, total }) =>
          Exit.succeed(
            tasks instanceof JsonText
              ? new JsonText<TaskList>(`{"tasks":${tasks.text},"total":${total},"limit":${limit},"offset":${offset}}`)
              : { tasks, total, limit, offset }
          )
        )
      },
      get: fn("Tasks.get")(function* (actor: Actor, id: TaskId) {
        return yield* shown(actor, id, yield* repo.getWithRuns(id))
      }),
      /** {@link get} answered without a fiber when the store can, else `undefined`. */
      getNow: (actor: Actor, id: TaskId): Direct<Task, NotFound | Forbidden | StoreError> | undefined => {
        const found = repo.getWithRunsNow(id)
        return found === LATER ? undefined : mapDirect(found, (f) => shown(actor, id, f))
      },
      /** `POST /api/tasks`; `body` as a client sends it ({@link TaskCreate}). */
      create: fn("Tasks.create")(function* (actor: Actor, body: unknown) {
        const input = yield* decodeCreate(body)
        yield* checkProject(actor, input.project_id)
        const at = now()
        if (oneStatement !== undefined) {
          const labels = yield* storedLabels(actor.userId, input.labels ?? []).effect
          if (labels !== undefined) {
            const row = newRow(actor, input, labels, at)
            const id = yield* oneStatement.create(row).effect
            yield* events.appended
            return toCreatedTask({ ...row, id })
          }
        }
        return yield* repo.unit(createWork(actor, input, at))
      }),
      /** {@link create} done without a fiber when the store can, else `undefined` (nothing done). */
      createNow: (actor: Actor, body: unknown): Direct<CreatedTask, BadRequest | StoreError> | undefined => {
        const input = decodeCreate(body)
        if (Exit.isFailure(input)) return Exit.failCause(input.cause)
        // A project is checked first, through its service: the Effect path's work.
        if (input.value.project_id !== undefined && input.value.project_id !== null) return undefined
        const at = now()
        const work = createWork(actor, input.value, at)
        if (oneStatement !== undefined) {
          return flatMapDirect(directOrEffect(storedLabels(actor.userId, input.value.labels ?? [])), (labels) => {
            if (labels === undefined) return unitDirect(work)
            const row = newRow(actor, input.value, labels, at)
            return thenDone(directOrEffect(oneStatement.create(row)), (id) => toCreatedTask({ ...row, id }), work)
          })
        }
        return orLater(repo.unitNow(work))
      },
      /** `PATCH /api/tasks/:id`; `body` as a client sends it ({@link TaskUpdate}). */
      update: fn("Tasks.update")(function* (actor: Actor, id: TaskId, body: unknown) {
        const patch = yield* decodeUpdate(body)
        // A project change is checked in the order the rules give: the task, then the project.
        const guarded = !seesAll(actor) && patch.project_id === undefined
        const ownerId = guarded ? actor.userId : (yield* load(actor, id)).owner_id
        yield* checkProject(actor, patch.project_id)
        const at = now()
        if (oneStatement !== undefined) {
          const labels = patch.labels === undefined ? undefined : yield* storedLabels(ownerId, patch.labels).effect
          if (patch.labels === undefined || labels !== undefined) {
            const change = { ...patch, labels }
            const found = yield* oneStatement.patch(id, change, at, guarded ? ownerId : undefined).effect
            if (found !== undefined) {
              yield* events.appended
              return taskShape(found.task, found.runs)
            }
          }
        }
        return yield* repo.unit(updateWork(actor, id, patch, ownerId, guarded, at))
      }),
      /** {@link update} done without a fiber when the store can and no look comes first, else `undefined` (nothing done). */
      updateNow: (
        actor: Actor,
        id: TaskId,
        body: unknown
      ): Direct<Task, BadRequest | NotFound | Forbidden | StoreError> | undefined => {
        const patch = decodeUpdate(body)
        if (Exit.isFailure(patch)) return Exit.failCause(patch.cause)
        if (seesAll(actor) || patch.value.project_id !== undefined) return undefined
        const at = now()
        const work = updateWork(actor, id, patch.value, actor.userId, true, at)
        if (oneStatement !== undefined) {
          const names = patch.value.labels
          const labels =
            names === undefined ? Exit.succeed(undefined) : directOrEffect(storedLabels(actor.userId, names))
          return flatMapDirect(labels, (stored) => {
            if (names !== undefined && stored === undefined) return unitDirect(work)
            const written = directOrEffect(oneStatement.patch(id, { ...patch.value, labels: stored }, at, actor.userId))
            return thenDone(written, (found) => taskShape(found.task, found.runs), work)
          })
        }
        return orLater(repo.unitNow(work))
      },
      delete: fn("Tasks.delete")(function* (actor: Actor, id: TaskId) {
        if (oneStatement !== undefined) {
          const row = yield* oneStatement.delete(id, now(), seesAll(actor) ? undefined : actor.userId).effect
          if (row !== undefined) {
            yield* events.appended
            return deleted
          }
        }
        return yield* repo.unit(deleteWork(actor, id))
      }),
      /** {@link delete} done without a fiber when the store can, else `undefined` (nothing done). */
      deleteNow: (
        actor: Actor,
        id: TaskId
      ): Direct<typeof deleted, NotFound | Forbidden | Conflict | StoreError> | undefined => {
        if (oneStatement !== undefined) {
          const written = directOrEffect(oneStatement.delete(id, now(), seesAll(actor) ? undefined : actor.userId))
          return thenDone(written, () => deleted, deleteWork(actor, id))
        }
        return orLater(repo.unitNow(deleteWork(actor, id)))
      }
    }
  })
}) {}
