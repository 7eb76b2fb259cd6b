import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import {
  CreatedTask,
  Task,
  TaskCreate,
  TaskIdFromString,
  TaskList,
  TaskListQuery,
  TaskUpdate
} from "@taskwright/domain"
import { Schema } from "effect"
import { ErrorExamples, fieldExample, notFoundExample, ownedExample } from "../Documentation.js"
import { ConflictError, ForbiddenError, NotFoundError, RequestErrors } from "../Errors.js"
import { Authentication, RequiredScope } from "../Security.js"
import { contractQuery, Success } from "./Common.js"

export const TaskPath = Schema.Struct({ id: TaskIdFromString })

/** What a task id that is not one is told. */
export const badTaskId = fieldExample("An id that is not a task id", "id", "id must be a positive integer")

/** Tasks: the unit of work, what agents run on and people review. */
export class TasksGroup extends HttpApiGroup.make("tasks")
  .add(
    HttpApiEndpoint.get("list", "/api/tasks")
      .setUrlParams(contractQuery(TaskListQuery))
      .addSuccess(TaskList)
      .annotate(RequiredScope, "tasks:read")
      .annotate(ErrorExamples, {
        400: [
          fieldExample("A limit out of bounds", "limit", "limit must be a whole number from 1 to 200", {
            bounds: { minimum: 1, maximum: 200, integer: true }
          })
        ]
      })
      .annotate(OpenApi.Summary, "List tasks")
      .annotate(
        OpenApi.Description,
        "The caller's tasks (an admin's: everyone's), newest first, optionally filtered by status, priority and project, a page at a time. List items carry neither project_id nor agent_runs. Needs tasks:read."
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/api/tasks/:id")
      .setPath(TaskPath)
      .addSuccess(Task)
      .addError(NotFoundError)
      .annotate(RequiredScope, "tasks:read")
      .annotate(ErrorExamples, {
        400: [badTaskId],
        403: [ownedExample("task", 42)],
        404: [notFoundExample("task", 42)]
      })
      .annotate(OpenApi.Summary, "Get a task")
      .annotate(
        OpenApi.Description,
        "A task with its project and its agent runs. Another user's task is 403, a missing one 404. Needs tasks:read."
      )
  )
  .add(
    HttpApiEndpoint.post("create", "/api/tasks")
      .setPayload(TaskCreate)
      .addSuccess(CreatedTask, { status: 201 })
      .addError(NotFoundError)
      .annotate(RequiredScope, "tasks:write")
      .annotate(ErrorExamples, {
        400: [
          fieldExample("A title too long", "title", "title must be 1 to 500 characters long", {
            bounds: { minLength: 1, maxLength: 500 }
          })
        ],
        403: [ownedExample("project", "proj_4bT9xQ2mLk7Wz1Rv")],
        404: [notFoundExample("project", "proj_4bT9xQ2mLk7Wz1Rv")]
      })
      .annotate(OpenApi.Summary, "Create a task")
      .annotate(
        OpenApi.Description,
        "Creates a task in the backlog (status cannot be sent). Unknown label names create the labels, with a colour derived from the name. project_id must name a project the caller may use: 404 if there is none, 403 if it is another user's. Needs tasks:write."
      )
  )
  .add(
    HttpApiEndpoint.patch("update", "/api/tasks/:id")
      .setPath(TaskPath)
      .setPayload(TaskUpdate)
      .addSuccess(Task)
      .addError(NotFoundError)
      .annotate(RequiredScope, "tasks:write")
      .annotate(ErrorExamples, {
        400: [
          fieldExample(
            "An unknown status",
            "status",
            'status must be one of "backlog", "todo", "in_progress", "in_review", "done", "cancelled"'
          )
        ],
        403: [ownedExample("task", 42)],
        404: [notFoundExample("task", 42)]
      })
      .annotate(OpenApi.Summary, "Update a task")
      .annotate(
        OpenApi.Description,
        "Changes any of title, description, status, priority, labels and project_id (at least one); any status may follow any other. Answers the task as get does. Needs tasks:write."
      )
  )
  .add(
    HttpApiEndpoint.del("delete", "/api/tasks/:id")
      .setPath(TaskPath)
      .addSuccess(Success)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(RequiredScope, "tasks:write")
      .annotate(ErrorExamples, {
        400: [badTaskId],
        403: [ownedExample("task", 42)],
        404: [notFoundExample("task", 42)],
        409: [
          {
            summary: "An agent is running on the task",
            message: "the task has a running agent run; stop it first",
            details: { reason: "run_running" }
          }
        ]
      })
      .annotate(OpenApi.Summary, "Delete a task")
      .annotate(
        OpenApi.Description,
        "Deletes the task; 409 while one of its runs is running (stop it first). Needs tasks:write."
      )
  )
  .middleware(Authentication)
  .addError(RequestErrors)
  .addError(ForbiddenError)
  .annotate(OpenApi.Description, "Tasks: what is to be done, what agents run on and people review.") {}
