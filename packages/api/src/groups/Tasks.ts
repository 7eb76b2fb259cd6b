import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { CreatedTask, Task, TaskCreate, TaskIdFromString, TaskList, TaskListParams, TaskUpdate } from "@taskwright/core"
import { Schema } from "effect"
import { ConflictError, NotFoundError } from "../Errors.js"
import { Authentication, RequiredScope } from "../Security.js"
import { Success } from "./Common.js"

export const TaskPath = Schema.Struct({ id: TaskIdFromString })

export class TasksGroup extends HttpApiGroup.make("tasks")
  .add(
    HttpApiEndpoint.get("list", "/api/tasks")
      .setUrlParams(TaskListParams)
      .addSuccess(TaskList)
      .annotate(RequiredScope, "tasks:read")
      .annotate(OpenApi.Summary, "List tasks, newest first, filtered and paged")
  )
  .add(
    HttpApiEndpoint.get("get", "/api/tasks/:id")
      .setPath(TaskPath)
      .addSuccess(Task)
      .addError(NotFoundError)
      .annotate(RequiredScope, "tasks:read")
      .annotate(OpenApi.Summary, "A task with its agent runs")
  )
  .add(
    HttpApiEndpoint.post("create", "/api/tasks")
      .setPayload(TaskCreate)
      .addSuccess(CreatedTask, { status: 201 })
      .addError(NotFoundError)
      .annotate(RequiredScope, "tasks:write")
      .annotate(OpenApi.Summary, "Create a task (status backlog)")
  )
  .add(
    HttpApiEndpoint.patch("update", "/api/tasks/:id")
      .setPath(TaskPath)
      .setPayload(TaskUpdate)
      .addSuccess(Task)
      .addError(NotFoundError)
      .annotate(RequiredScope, "tasks:write")
      .annotate(OpenApi.Summary, "Change any of title, description, status, priority, labels, project_id")
  )
  .add(
    HttpApiEndpoint.del("delete", "/api/tasks/:id")
      .setPath(TaskPath)
      .addSuccess(Success)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(RequiredScope, "tasks:write")
      .annotate(OpenApi.Summary, "Delete a task (409 while one of its runs is running)")
  )
  .middleware(Authentication) {}
