/** The task resource: its fields, enumerations, and the create/update payloads with every rule of DECISIONS. */
import { Schema } from "effect"
import { Text, TrimmedText } from "./Bounds.js"
import { ProjectId, TaskId } from "./Ids.js"
import { LabelName, MAX_LABEL_NAME } from "./Label.js"
import { PageFields, PageParams, PageQuery } from "./Paging.js"
import { RunSummary } from "./Run.js"
import { Timestamp } from "./Timestamp.js"

export const TaskStatus = Schema.Literal(
  "backlog",
  "todo",
  "in_progress",
  "in_review",
  "done",
  "cancelled"
).annotations({ description: "Where the task stands. A new task is in the backlog." })
export type TaskStatus = typeof TaskStatus.Type

export const TaskPriority = Schema.Literal("low", "medium", "high", "urgent").annotations({
  description: "How urgent the task is (medium when not given)."
})
export type TaskPriority = typeof TaskPriority.Type

const MAX_TITLE = 500
const MAX_DESCRIPTION = 100_000
const MAX_LABELS = 50

const Title = TrimmedText(
  `title must be 1 to ${MAX_TITLE} characters long`,
  MAX_TITLE,
  `What is to be done, 1 to ${MAX_TITLE} characters (spaces around it are dropped).`
)
const Description = Schema.String.pipe(
  Schema.maxLength(MAX_DESCRIPTION, {
    message: () => "description must be at most 100,000 characters long",
    title: "description",
    description: "Free text: the details an agent or a colleague needs."
  })
)
const Labels = Schema.Array(LabelName).pipe(
  Schema.maxItems(MAX_LABELS, {
    message: () => `a task carries at most ${MAX_LABELS} labels`,
    title: "label names",
    description: "Label names; a name not seen before creates the label."
  })
)

/** The fields every shape of a task answers. */
const answered = {
  id: TaskId,
  title: Text(MAX_TITLE, "What is to be done."),
  description: Text(MAX_DESCRIPTION, "Free text (empty when none was given)."),
  status: TaskStatus,
  priority: TaskPriority,
  labels: Schema.Array(Text(MAX_LABEL_NAME)).annotations({
    description: "The names of the task's labels.",
    jsonSchema: { maxItems: MAX_LABELS }
  }),
  created_at: Timestamp,
  updated_at: Timestamp
}

const example = {
  id: TaskId.make(42),
  title: "Write the README",
  description: "Cover installation and the first API call.",
  status: "backlog",
  priority: "high",
  labels: ["docs"],
  project_id: ProjectId.make("proj_4bT9xQ2mLk7Wz1Rv"),
  created_at: "2026-11-21T23:43:04.123Z",
  updated_at: "2026-11-21T23:43:04.123Z"
} as const

/** A task in a list: everything but `project_id` and `agent_runs` (spec part 2). */
export const TaskListItem = Schema.Struct(answered)
export type TaskListItem = typeof TaskListItem.Type

/** The create response: the task with `project_id`. */
export const CreatedTask = Schema.Struct({
  ...answered,
  project_id: Schema.NullOr(ProjectId)
}).annotations({ description: "The task as created.", examples: [example] })
export type CreatedTask = typeof CreatedTask.Type

/** The get-task shape, with the task's runs. */
export const Task = Schema.Struct({
  ...CreatedTask.fields,
  // Not capped: every run is started by a person or a review, and all of them are shown.
  agent_runs: Schema.Array(RunSummary).annotations({ description: "The task's agent runs, oldest first." })
}).annotations({
  identifier: "Task",
  description: "A task with its agent runs.",
  examples: [
    {
      ...example,
      status: "in_review",
      agent_runs: [
        {
          id: RunSummary.fields.id.make("run_8Hc3JqN5vX0pTe6Y"),
          agent: "claude-code",
          status: "completed",
          started_at: "2026-11-22T09:00:00.000Z",
          completed_at: "2026-11-22T09:07:31.412Z"
        }
      ]
    }
  ]
})
export type Task = typeof Task.Type

export const TaskList = Schema.Struct({
  tasks: Schema.Array(TaskListItem).annotations({ jsonSchema: { maxItems: 200 } }),
  ...PageFields
}).annotations({
  description: "A page of tasks, newest first.",
  examples: [
    {
      tasks: [
        {
          id: example.id,
          title: example.title,
          description: example.description,
          status: example.status,
          priority: example.priority,
          labels: example.labels,
          created_at: example.created_at,
          updated_at: example.updated_at
        }
      ],
      total: 1,
      limit: 50,
      offset: 0
    }
  ]
})
export type TaskList = typeof TaskList.Type

/** `POST /api/tasks`: unknown fields, read-only fields and `status` are refused. */
export const TaskCreate = Schema.Struct({
  title: Title,
  description: Schema.optional(Description),
  priority: Schema.optional(TaskPriority),
  labels: Schema.optional(Labels),
  project_id: Schema.optional(Schema.NullOr(ProjectId))
}).annotations({
  description: "A new task: a title, and optionally its details, priority, labels and project.",
  examples: [
    {
      title: example.title,
      description: example.description,
      priority: example.priority,
      labels: example.labels,
      project_id: example.project_id
    }
  ]
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
    identifier: "TaskUpdate",
    description: "The fields to change, at least one; any status may follow any other.",
    jsonSchema: { minProperties: 1 },
    examples: [{ status: "in_progress", priority: "urgent" }]
  })
)
export type TaskUpdate = typeof TaskUpdate.Type

const taskFilters = {
  status: Schema.optional(TaskStatus.annotations({ description: "Only tasks with this status." })),
  priority: Schema.optional(TaskPriority.annotations({ description: "Only tasks with this priority." })),
  project_id: Schema.optional(ProjectId.annotations({ description: "Only the tasks of this project." }))
}

/** `GET /api/tasks`: filters and paging. */
export const TaskListParams = Schema.Struct({ ...taskFilters, ...PageParams })
export type TaskListParams = typeof TaskListParams.Type

/** {@link TaskListParams} as a query string (the contract). */
export const TaskListQuery = Schema.Struct({ ...taskFilters, ...PageQuery })
