/** The task resource: its fields, enumerations, and the create/update payloads with every rule of DECISIONS. */
import { Schema } from "effect"
import { ProjectId, TaskId } from "../domain/Ids.js"
import { PageParams } from "../domain/Paging.js"
import { Timestamp } from "../domain/Timestamp.js"
import { LabelName } from "../labels/Label.js"
import { RunSummary } from "../runs/Run.js"

export const TaskStatus = Schema.Literal("backlog", "todo", "in_progress", "in_review", "done", "cancelled")
export type TaskStatus = typeof TaskStatus.Type

export const TaskPriority = Schema.Literal("low", "medium", "high", "urgent")
export type TaskPriority = typeof TaskPriority.Type

const Title = Schema.compose(
  Schema.Trim,
  Schema.String.pipe(
    Schema.minLength(1, { message: () => "title must not be empty" }),
    Schema.maxLength(500, { message: () => "title must be at most 500 characters" })
  )
)
const Description = Schema.String.pipe(
  Schema.maxLength(100_000, { message: () => "description must be at most 100,000 characters" })
)
const Labels = Schema.Array(LabelName).pipe(Schema.maxItems(50, { message: () => "a task carries at most 50 labels" }))

/** A task in a list: everything but `project_id` and `agent_runs` (spec part 2). */
export const TaskListItem = Schema.Struct({
  id: TaskId,
  title: Schema.String,
  description: Schema.String,
  status: TaskStatus,
  priority: TaskPriority,
  labels: Schema.Array(Schema.String),
  created_at: Timestamp,
  updated_at: Timestamp
})
export type TaskListItem = typeof TaskListItem.Type

/** The create response: the task with `project_id`. */
export const CreatedTask = Schema.Struct({
  id: TaskId,
  title: Schema.String,
  description: Schema.String,
  status: TaskStatus,
  priority: TaskPriority,
  labels: Schema.Array(Schema.String),
  project_id: Schema.NullOr(ProjectId),
  created_at: Timestamp,
  updated_at: Timestamp
})
export type CreatedTask = typeof CreatedTask.Type

/** The get-task shape, with the task's runs. */
export const Task = Schema.Struct({
  ...CreatedTask.fields,
  agent_runs: Schema.Array(RunSummary)
})
export type Task = typeof Task.Type

export const TaskList = Schema.Struct({
  tasks: Schema.Array(TaskListItem),
  total: Schema.Number,
  limit: Schema.Number,
  offset: Schema.Number
})
export type TaskList = typeof TaskList.Type

/** `POST /api/tasks`: unknown fields, read-only fields and `status` are refused. */
export const TaskCreate = Schema.Struct({
  title: Title,
  description: Schema.optional(Description),
  priority: Schema.optional(TaskPriority),
  labels: Schema.optional(Labels),
  project_id: Schema.optional(Schema.NullOr(ProjectId))
})
export type TaskCreate = typeof TaskCreate.Type

/** `PATCH /api/tasks/:id`: any of the editable fields, at least one. */
export const TaskUpdate = Schema.Struct({
  title: Schema.optional(Title),
  description: Schema.optional(Description),
  status: Schema.optional(TaskStatus),
  priority: Schema.optional(TaskPriority),
  labels: Schema.optional(Labels),
  project_id: Schema.optional(Schema.NullOr(ProjectId))
}).pipe(
  Schema.filter((u) => Object.keys(u).length > 0 || "send at least one field to change", {
    identifier: "TaskUpdate"
  })
)
export type TaskUpdate = typeof TaskUpdate.Type

/** `GET /api/tasks` query. */
export const TaskListParams = Schema.Struct({
  status: Schema.optional(TaskStatus),
  priority: Schema.optional(TaskPriority),
  project_id: Schema.optional(ProjectId),
  ...PageParams
})
export type TaskListParams = typeof TaskListParams.Type
