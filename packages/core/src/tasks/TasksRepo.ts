/**
 * Task rows. The hot statements (get, list page, count, insert) are prepared once per store.
 * Labels are kept on the row as a JSON array of names, so a page of tasks is one query.
 */
import {
  type CreatedTask,
  DEFAULT_PAGE_SIZE,
  MAX_PAGE_SIZE,
  type ProjectId,
  type RunSummary,
  type TaskId,
  type TaskListItem,
  type TaskPriority,
  type TaskStatus
} from "@taskwright/domain"
import { Effect, Exit } from "effect"
import { pgAppendEventsOf } from "../events/EventsRepo.js"
import {
  bothDirect,
  type Direct,
  directOrEffect,
  effectAndNow,
  flatMapDirect,
  JsonText,
  LATER,
  mapDirect,
  type SqlParam,
  type Statement,
  type StoreError,
  StoreTag,
  statement,
  toPgPlaceholders
} from "../store/Store.js"
import * as Unit from "../store/Unit.js"

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

/** The fields a PATCH changes; `labels` is the stored JSON; `project_id: null` clears the project. */
export interface TaskChange {
  readonly title?: string | undefined
  readonly description?: string | undefined
  readonly status?: TaskStatus | undefined
  readonly priority?: TaskPriority | undefined
  readonly labels?: string | undefined
  readonly project_id?: ProjectId | null | undefined
}

export interface TaskFilter {
  readonly ownerId: string | null
  readonly status: TaskStatus | undefined
  readonly priority: TaskPriority | undefined
  readonly projectId: ProjectId | undefined
}

export const taskColumns =
  "id, owner_id, project_id, title, description, status, priority, labels, created_at, updated_at"

/** A task's columns (as `t`) and its runs' (as `r`), one row per run: what `splitRuns` takes apart. */
const taskWithRunColumns =
  "t.id, t.owner_id, t.project_id, t.title, t.description, t.status, t.priority, t.labels, t.created_at, t.updated_at, r.id AS run_id, r.agent AS run_agent, r.status AS run_status, r.started_at AS run_started_at, r.completed_at AS run_completed_at"

const runningRun = "SELECT 1 FROM runs WHERE task_id = tasks.id AND status = 'running'"

interface DeletedRow {
  readonly id: TaskId
  readonly owner_id: string
  readonly project_id: ProjectId | null
}

const q = {
  get: statement<TaskRow>("tasks.get", `SELECT ${taskColumns} FROM tasks WHERE id = ?`),
  // The task and its runs in one statement: one index probe on SQLite, one round trip on PostgreSQL.
  withRuns: statement<TaskWithRunRow>(
    "tasks.withRuns",
    `SELECT ${taskWithRunColumns} FROM tasks t LEFT JOIN runs r ON r.task_id = t.id WHERE t.id = ? ORDER BY r.started_at, r.id`
  ),
  runs: statement<RunSummary>(
    "tasks.runs",
    "SELECT id, agent, status, started_at, completed_at FROM runs WHERE task_id = ? ORDER BY started_at, id"
  ),
  insert: statement<{ id: TaskId }>(
    "tasks.insert",
    "INSERT INTO tasks (owner_id, project_id, title, description, status, priority, labels, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
  ),
  delete: statement("tasks.delete", "DELETE FROM tasks WHERE id = ?"),
  // Ownership and the running-run rule checked by the DELETE itself: one statement for the
  // common case; the caller looks closer only when nothing was deleted.
  deleteIdle: statement<DeletedRow>(
    "tasks.deleteIdle",
    `DELETE FROM tasks WHERE id = ? AND NOT EXISTS (${runningRun}) RETURNING id, owner_id, project_id`
  ),
  deleteIdleOwned: statement<DeletedRow>(
    "tasks.deleteIdleOwned",
    `DELETE FROM tasks WHERE id = ? AND owner_id = ? AND NOT EXISTS (${runningRun}) RETURNING id, owner_id, project_id`
  ),
  running: statement<{ one: number }>(
    "tasks.running",
    "SELECT 1 AS one FROM runs WHERE task_id = ? AND status = 'running' LIMIT 1"
  )
}

/** The columns a PATCH may set, in the order of their parameters. */
const patchable = ["title", "description", "status", "priority", "labels", "project_id"] as const

/**
 * A statement per combination of the fields a PATCH sends and whether it checks the owner, built by
 * `build` on first use; with the fields' parameters, in order.
 */
const perPatchShape = <Row>(
  build: (fields: ReadonlyArray<(typeof patchable)[number]>, owned: boolean, key: string) => Statement<Row>
) => {
  const built = new Map<string, Statement<Row>>()
  return (change: TaskChange, owned: boolean) => {
    const fields = patchable.filter((field) => change[field] !== undefined)
    const key = `${fields.join(",")}${owned ? "|owned" : ""}`
    let found = built.get(key)
    if (found === undefined) {
      found = build(fields, owned, key)
      built.set(key, found)
    }
    return { statement: found, params: fields.map((field): SqlParam => change[field] ?? null) }
  }
}

// One UPDATE per combination of fields sent, built on first use: only the fields sent change, in
// one statement on the row as it is when the write lands, so two concurrent PATCHes of different
// fields both take effect. A column not sent is not in the SET list, so an index on it is not
// touched and the count trigger (`UPDATE OF status, priority, ...`) does not fire for a change of
// labels. `updated_at` never moves backwards: a PATCH that commits after another is never stamped
// older than the one before it.
const patchStatement = perPatchShape((fields, owned, key) => {
  const set = fields.map((field) => `${field} = ?, `).join("")
  const where = owned ? "id = ? AND owner_id = ?" : "id = ?"
  return statement<TaskRow>(
    `tasks.patch.${key}`,
    `UPDATE tasks SET ${set}updated_at = MAX(?, updated_at) WHERE ${where} RETURNING ${taskColumns}`,
    toPgPlaceholders(
      `UPDATE tasks SET ${set}updated_at = GREATEST(?, updated_at) WHERE ${where} RETURNING ${taskColumns}`
    )
  )
})

/** A page of tasks and the filter's total; the tasks as JSON text where the store wrote them so. */
export interface TasksPage {
  readonly tasks: ReadonlyArray<TaskListItem> | JsonText<ReadonlyArray<TaskListItem>>
  readonly total: number
}

/** A page's row with the filter's total. */
interface PageRow extends ListRow {
  readonly total: number
}

// The 16 filter combinations each get one list and one count statement (SQLite), and on PostgreSQL
// one statement of both, built on first use.
const listStatements = new Map<
  string,
  {
    page: Statement<ListRow>
    pageJson: Statement<{ item: string }>
    count: Statement<{ total: number }>
    pageWithTotal: Statement<PageRow>
    /** By page size (`SIZES_IN_TEXT`): a first page, and a later one. */
    sizedPageWithTotal: ReadonlyMap<number, { readonly first: Statement<PageRow>; readonly later: Statement<PageRow> }>
  }
>()

/**
 * PostgreSQL plans a statement whose `LIMIT` and `OFFSET` are parameters again at every
 * execution: its generic plan, not knowing them, is costed for a tenth of the rows, looks dearer
 * than a plan made for the values, and is never chosen (docs/serving.md). So the sizes clients ask
 * for most, the default and the web board's, have statements of their own with the size in the
 * text, and these read the filter's values and the offset through subqueries (`(SELECT $1::text)`),
 * which the planner does not look into: a plan made for the values is then costed exactly as the
 * generic one, and from the sixth execution the connection keeps the generic plan (the database's
 * time per page down by a fifth to a third). Were the values in sight, an owner or a status with
 * fewer tasks than the average would get a plan costed below the generic one, and a store with one
 * large owner would plan every page of the others again. Only for the filters an index reads
 * exactly: the plan is that index whatever the values, so a plan made once fits every owner,
 * status and offset. With other filters the planner's choice depends on the values, and those keep
 * a plan made for them.
 */
const SIZES_IN_TEXT = [DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE]

/** Filter keys (as {@link filterStatements} spells them) whose index reads exactly the filter's tasks in id order. */
const indexedExactly = new Set(["", "o", "os", "op", "s", "p", "j"])

const filterStatements = (f: TaskFilter) => {
  const key = `${f.ownerId === null ? "" : "o"}${f.status === undefined ? "" : "s"}${f.priority === undefined ? "" : "p"}${f.projectId === undefined ? "" : "j"}`
  let found = listStatements.get(key)
  if (found === undefined) {
    // The filtered columns, all TEXT, in the order of `filterParams`.
    const filtered: Array<string> = []
    if (f.ownerId !== null) filtered.push("owner_id")
    if (f.status !== undefined) filtered.push("status")
    if (f.priority !== undefined) filtered.push("priority")
    if (f.projectId !== undefined) filtered.push("project_id")
    const clauseOf = (param: string) =>
      filtered.length === 0 ? "" : ` WHERE ${filtered.map((column) => `${column} = ${param}`).join(" AND ")}`
    const clause = clauseOf("?")
    const columns = "id, title, description, status, priority, labels, created_at, updated_at"
    const page = `SELECT ${columns} FROM tasks${clause} ORDER BY id DESC LIMIT ? OFFSET ?`
    const countOf = (where: string) => `SELECT COALESCE(SUM(n), 0) AS total FROM task_counts${where}`
    const count = countOf(clause)
    // PostgreSQL does not know that the newest tasks may all have another status than the one
    // asked for, so for `WHERE status = ? ORDER BY id DESC` it walks the primary key backwards
    // and filters (100,000 rows at 1,000,000 tasks when the newest 100,000 are done). The page's
    // ids are picked first, from the filter's own index alone (an index-only scan the planner
    // always prefers), then the rows are fetched by id; as an array, so a generic plan fetches
    // them by index too. SQLite picks the filter's index for the plain form by itself.
    const pgPageFromOf = (where: string, bounds: string) =>
      toPgPlaceholders(
        `FROM tasks WHERE id = ANY (ARRAY(SELECT id FROM tasks${where} ORDER BY id DESC ${bounds})) ORDER BY id DESC`
      )
    const pgTotalOf = (where: string) => `(${toPgPlaceholders(countOf(where))}) AS total`
    const pgPageFrom = pgPageFromOf(clause, "LIMIT ? OFFSET ?")
    const pgTotal = pgTotalOf(clause)
    // The sized pages' filter, its values out of the planner's sight (SIZES_IN_TEXT).
    const hidden = clauseOf("(SELECT ?::text)")
    found = {
      page: statement<ListRow>(`tasks.list.${key}`, page, `SELECT ${columns} ${pgPageFrom}`),
      // SQLite: each of the page's tasks as the API's JSON, written by SQLite (the same text as the
      // row made into a list item and stringified: the tests compare the two).
      pageJson: statement<{ item: string }>(
        `tasks.listJson.${key}`,
        `SELECT json_object(${listItemJson}) AS item FROM tasks${clause} ORDER BY id DESC LIMIT ? OFFSET ?`,
        "-- SQLite only"
      ),
      count: statement<{ total: number }>(`tasks.count.${key}`, count),
      // PostgreSQL: the page and its total in one round trip, not two queries side by side (each
      // costs both processes a wake-up); the total as a scalar subquery on every row, which
      // PostgreSQL plans in about 40 us less than a join of the count and the page (it plans this
      // statement at every execution: see docs/serving.md). A page past the end has no row to
      // carry the total, so then the count runs on its own. The count takes the filter's
      // parameters, `$1` to `$n`, as the page does (which then has its limit and offset).
      pageWithTotal: statement<PageRow>(
        `tasks.listWithTotal.${key}`,
        "-- PostgreSQL only",
        `SELECT ${pgTotal}, ${columns} ${pgPageFrom}`
      ),
      // PostgreSQL: the same with the page size in the text and the parameters out of the
      // planner's sight (SIZES_IN_TEXT).
      sizedPageWithTotal: new Map(
        (indexedExactly.has(key) ? SIZES_IN_TEXT : []).map((size) => {
          const sized = (name: string, bounds: string) =>
            statement<PageRow>(
              `tasks.listWithTotal.${key}.${name}${size}`,
              "-- PostgreSQL only",
              `SELECT ${pgTotalOf(hidden)}, ${columns} ${pgPageFromOf(hidden, bounds)}`
            )
          return [
            size,
            { first: sized("first", `LIMIT ${size}`), later: sized("sized", `LIMIT ${size} OFFSET (SELECT ?::bigint)`) }
          ]
        })
      )
    }
    listStatements.set(key, found)
  }
  return found
}

/** PostgreSQL: the statement of a page and its total, and its parameters. */
const pgPage = (
  s: ReturnType<typeof filterStatements>,
  params: ReadonlyArray<SqlParam>,
  limit: number,
  offset: number
): [Statement<PageRow>, Array<SqlParam>] => {
  const sized = s.sizedPageWithTotal.get(limit)
  if (sized === undefined) return [s.pageWithTotal, [...params, limit, offset]]
  return offset === 0 ? [sized.first, [...params]] : [sized.later, [...params, offset]]
}

const filterParams = (f: TaskFilter): Array<SqlParam> => {
  const params: Array<SqlParam> = []
  if (f.ownerId !== null) params.push(f.ownerId)
  if (f.status !== undefined) params.push(f.status)
  if (f.priority !== undefined) params.push(f.priority)
  if (f.projectId !== undefined) params.push(f.projectId)
  return params
}

/** A task row as the create and event answers show it: the task with `project_id`, without its runs. */
export const toCreatedTask = (row: TaskRow): CreatedTask => ({
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

/** PostgreSQL: {@link toCreatedTask} of the row `t`, built by the statement that wrote it: the same object, key for key. */
const pgTaskData = (t: string): string =>
  `json_build_object('id', ${t}.id, 'title', ${t}.title, 'description', ${t}.description, 'status', ${t}.status, 'priority', ${t}.priority, 'labels', ${t}.labels::json, 'project_id', ${t}.project_id, 'created_at', ${t}.created_at, 'updated_at', ${t}.updated_at)::text`

/** PostgreSQL: `taskDeleted` (`TaskEvents.ts`) of the row `t`. */
const pgTaskDeletedData = (t: string): string => `json_build_object('id', ${t}.id, 'project_id', ${t}.project_id)::text`

/**
 * PostgreSQL: the common writes as one statement each, the row, its event and what the answer needs
 * together, committed on their own. A unit of work takes four or five round trips for the same
 * (BEGIN, the write, the event, COMMIT, and a PATCH's runs), each a wake-up of the database's
 * process and of this one; and the rows a write locks (the owner's count rows, through the count
 * trigger, and the event log's order) are held for the statement and its commit only, never
 * across a round trip. Inside a caller's transaction a statement joins it like any other. SQLite
 * has no round trips to save: its units run the same steps in one synchronous call.
 */
const oneStatement = {
  create: statement<{ id: TaskId }>(
    "tasks.createWithEvent",
    "-- PostgreSQL only",
    `WITH t AS (INSERT INTO tasks (owner_id, project_id, title, description, status, priority, labels, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING ${taskColumns}),
       ${pgAppendEventsOf("t", "'task.created'", pgTaskData("t"), "$8")}
     SELECT id FROM t`
  )
}

/** {@link oneStatement}'s DELETE, with the owner checked (`$3`) or not. */
const deleteWithEvent = (owned: boolean) =>
  statement<DeletedRow>(
    `tasks.deleteWithEvent${owned ? ".owned" : ""}`,
    "-- PostgreSQL only",
    `WITH t AS (DELETE FROM tasks WHERE id = $1${owned ? " AND owner_id = $3" : ""} AND NOT EXISTS (${runningRun}) RETURNING id, owner_id, project_id),
       ${pgAppendEventsOf("t", "'task.deleted'", pgTaskDeletedData("t"), "$2")}
     SELECT id, owner_id, project_id FROM t`
  )
const deleteOwnedWithEvent = deleteWithEvent(true)
const deleteAnyWithEvent = deleteWithEvent(false)

// A PATCH's statement per combination of fields, as `patchStatement`'s, with the task's runs joined
// as `withRuns` joins them.
const patchWithEventStatement = perPatchShape((fields, owned, key) => {
  // $1..$n the fields, then the time, the id and the owner.
  const at = `$${fields.length + 1}`
  const set = fields.map((field, i) => `${field} = $${i + 1}, `).join("")
  const where = `id = $${fields.length + 2}${owned ? ` AND owner_id = $${fields.length + 3}` : ""}`
  return statement<TaskWithRunRow>(
    `tasks.patchWithEvent.${key}`,
    "-- PostgreSQL only",
    `WITH t AS (UPDATE tasks SET ${set}updated_at = GREATEST(${at}, updated_at) WHERE ${where} RETURNING ${taskColumns}),
       ${pgAppendEventsOf("t", "'task.updated'", pgTaskData("t"), at)}
     SELECT ${taskWithRunColumns} FROM t LEFT JOIN runs r ON r.task_id = t.id ORDER BY r.started_at, r.id`
  )
})

// The fields of a list item in the order `toListItem` gives them (`labels` is stored as JSON).
const listItemJson =
  "'id', id, 'title', title, 'description', description, 'status', status, 'priority', priority, " +
  "'labels', json(labels), 'created_at', created_at, 'updated_at', updated_at"

const toPage = (rows: ReadonlyArray<ListRow>, count: { readonly total: number } | undefined) => ({
  tasks: rows.map(toListItem),
  total: Number(count?.total ?? 0)
})

/** A page from {@link PageRow}s; `undefined` when there are none (the total is then unknown). */
const toPageOf = (rows: ReadonlyArray<PageRow>) => {
  const first = rows[0]
  return first === undefined ? undefined : { tasks: rows.map(toListItem), total: Number(first.total) }
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

const insertParams = (row: Omit<TaskRow, "id">): Array<SqlParam> => [
  row.owner_id,
  row.project_id,
  row.title,
  row.description,
  row.status,
  row.priority,
  row.labels,
  row.created_at,
  row.updated_at
]

/** The id an insert answered, as a number. */
const insertedId = (row: { id: TaskId } | undefined) => Number(row?.id) as TaskId

const deletedRow = (row: DeletedRow | undefined): DeletedRow | undefined =>
  row === undefined ? undefined : { ...row, id: Number(row.id) as TaskId }

export class TasksRepo extends Effect.Service<TasksRepo>()("@taskwright/core/TasksRepo", {
  effect: Effect.gen(function* () {
    const store = yield* StoreTag

    const both = <Row, A>(stmt: Statement<Row>, params: ReadonlyArray<SqlParam>, f: (rows: ReadonlyArray<Row>) => A) =>
      effectAndNow(store, stmt, params, f)
    /** An empty page with the filter's total: a page past the end on PostgreSQL. */
    const totalOnly = (count: Statement<{ total: number }>, params: ReadonlyArray<SqlParam>) =>
      both(count, params, (rows) => toPage([], rows[0]))

    /**
     * PostgreSQL's one-statement writes (`oneStatement` above); `undefined` on SQLite. Each appends
     * its event: the caller tells the event hub once the statement has committed.
     */
    const writesInOneStatement =
      store.dialect !== "pg"
        ? undefined
        : {
            /** Inserts the task and its `task.created`; answers its id. */
            create: (row: Omit<TaskRow, "id">) =>
              both(oneStatement.create, insertParams(row), (rows) => insertedId(rows[0])),
            /**
             * {@link TasksRepo.patch} and its `task.updated`; the row as stored with its runs, or
             * `undefined` when nothing changed (missing, or someone else's when `ownerId` is given).
             */
            patch: (id: TaskId, change: TaskChange, at: string, ownerId?: string) => {
              const { statement, params } = patchWithEventStatement(change, ownerId !== undefined)
              params.push(at, id)
              if (ownerId !== undefined) params.push(ownerId)
              return both(statement, params, splitRuns)
            },
            /** {@link TasksRepo.deleteIdle} and its `task.deleted`. */
            delete: (id: TaskId, at: string, ownerId?: string) =>
              ownerId === undefined
                ? both(deleteAnyWithEvent, [id, at], (rows) => deletedRow(rows[0]))
                : both(deleteOwnedWithEvent, [id, at, ownerId], (rows) => deletedRow(rows[0]))
          }

    return {
      writesInOneStatement,
      transaction: store.transaction,
      unit: store.unit,
      unitNow: store.unitNow,
      get: (id: TaskId) => store.get(q.get, [id]),
      /** {@link get} as a unit step. */
      read: (id: TaskId) => Unit.get(q.get, [id]),
      /** A task's run summaries, oldest first. A unit step. */
      runsOf: (id: TaskId) => Unit.all(q.runs, [id]),
      /** The task row and its run summaries, oldest run first; `undefined` when there is no such task. */
      getWithRuns: (id: TaskId) => Effect.map(store.all(q.withRuns, [id]), splitRuns),
      /** {@link getWithRuns} without a fiber ({@link Direct}), or `LATER`. */
      getWithRunsNow: (id: TaskId) => {
        const rows = store.allNow(q.withRuns, [id])
        return rows === LATER ? LATER : mapDirect(rows, (r) => Exit.succeed(splitRuns(r)))
      },
      hasRunningRun: (id: TaskId) => Effect.map(store.get(q.running, [id]), (r) => r !== undefined),
      /** {@link hasRunningRun} as a unit step. */
      *runs(id: TaskId): Unit.Work<boolean> {
        return (yield* Unit.get(q.running, [id])) !== undefined
      },
      page: (filter: TaskFilter, limit: number, offset: number) => {
        const s = filterStatements(filter)
        const params = filterParams(filter)
        if (store.dialect === "pg") {
          const [statement, bounded] = pgPage(s, params, limit, offset)
          return Effect.flatMap(store.all(statement, bounded), (rows) => {
            const page = toPageOf(rows)
            return page !== undefined ? Effect.succeed(page) : totalOnly(s.count, params).effect
          })
        }
        return Effect.zipWith(store.all(s.page, [...params, limit, offset]), store.get(s.count, params), toPage)
      },
      /**
       * {@link page} without a fiber ({@link Direct}), or `LATER`. On SQLite the page's tasks come
       * as JSON text, for the HTTP answer.
       */
      pageNow: (filter: TaskFilter, limit: number, offset: number): Direct<TasksPage, StoreError> | typeof LATER => {
        const s = filterStatements(filter)
        const params = filterParams(filter)
        if (store.dialect === "pg") {
          const rows = store.allNow(...pgPage(s, params, limit, offset))
          if (rows === LATER) return LATER
          return flatMapDirect(rows, (r) => {
            const page = toPageOf(r)
            return page !== undefined ? Exit.succeed(page) : directOrEffect(totalOnly(s.count, params))
          })
        }
        const json = store.allNow(s.pageJson, [...params, limit, offset])
        if (json === LATER) return LATER
        const count = store.allNow(s.count, params)
        if (count === LATER) return LATER
        return mapDirect(bothDirect(json, count), ([items, [c]]) =>
          Exit.succeed({
            tasks: new JsonText<ReadonlyArray<TaskListItem>>(`[${items.map((row) => row.item).join(",")}]`),
            total: Number(c?.total ?? 0)
          })
        )
      },
      /** Inserts a task (a unit step: run it inside the change's unit of work); answers its id. */
      *insert(row: Omit<TaskRow, "id">): Unit.Work<TaskId> {
        return insertedId(yield* Unit.get(q.insert, insertParams(row)))
      },
      /**
       * Changes the fields given (`project_id: null` clears it); the row as stored, or `undefined` if
       * it is gone or, when `ownerId` is given, belongs to someone else. A unit step.
       */
      *patch(id: TaskId, change: TaskChange, at: string, ownerId?: string): Unit.Work<TaskRow | undefined> {
        const { statement, params } = patchStatement(change, ownerId !== undefined)
        params.push(at, id)
        if (ownerId !== undefined) params.push(ownerId)
        const row = yield* Unit.get(statement, params)
        return row === undefined ? undefined : { ...row, id: Number(row.id) as TaskId }
      },
      /** Deletes the task; the rows deleted (0 or 1). A unit step. */
      delete: (id: TaskId) => Unit.run(q.delete, [id]),
      /**
       * Deletes the task unless a run of it is running or, when `ownerId` is given, it belongs to
       * someone else; the deleted row's identity, or `undefined` when nothing was deleted. A unit step.
       */
      *deleteIdle(id: TaskId, ownerId?: string): Unit.Work<DeletedRow | undefined> {
        return deletedRow(
          ownerId === undefined
            ? yield* Unit.get(q.deleteIdle, [id])
            : yield* Unit.get(q.deleteIdleOwned, [id, ownerId])
        )
      }
    }
  })
}) {}
