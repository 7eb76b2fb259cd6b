/**
 * The Taskwright HTTP contract: one `HttpApi` shared by the server, the typed client, the
 * in-process API and the tests. The OpenAPI document is generated from it.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import {
  CreatedTask,
  Label,
  LabelCreate,
  LabelList,
  LabelListParams,
  Project,
  ProjectCreate,
  ProjectDeleteParams,
  ProjectDetail,
  ProjectId,
  ProjectList,
  ProjectListParams,
  Task,
  TaskCreate,
  TaskIdFromString,
  TaskList,
  TaskListParams,
  TaskUpdate
} from "@taskwright/core"
import { Schema } from "effect"
import {
  BadRequestError,
  ConflictError,
  ForbiddenError,
  InternalServerError,
  NotFoundError,
  PayloadTooLargeError,
  RateLimitedError,
  UnauthorizedError
} from "./Errors.js"
import { Authentication, RequiredScope } from "./Security.js"

export const Success = Schema.Struct({ success: Schema.Literal(true) })

const TaskPath = Schema.Struct({ id: TaskIdFromString })
const ProjectPath = Schema.Struct({ id: ProjectId })

export class SystemGroup extends HttpApiGroup.make("system")
  .add(
    HttpApiEndpoint.get("health", "/api/health")
      .addSuccess(Schema.Struct({ status: Schema.Literal("ok") }))
      .annotate(OpenApi.Summary, "Liveness: ok once the store answers")
  )
  .annotate(RequiredScope, "public") {}

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

export class ProjectsGroup extends HttpApiGroup.make("projects")
  .add(
    HttpApiEndpoint.get("list", "/api/projects")
      .setUrlParams(ProjectListParams)
      .addSuccess(ProjectList)
      .annotate(RequiredScope, "projects:read")
  )
  .add(
    HttpApiEndpoint.get("get", "/api/projects/:id")
      .setPath(ProjectPath)
      .addSuccess(ProjectDetail)
      .addError(NotFoundError)
      .annotate(RequiredScope, "projects:read")
  )
  .add(
    HttpApiEndpoint.post("create", "/api/projects")
      .setPayload(ProjectCreate)
      .addSuccess(Project, { status: 201 })
      .annotate(RequiredScope, "projects:write")
      .annotate(OpenApi.Summary, "Create a project over an existing directory, or clone git_url into path")
  )
  .add(
    HttpApiEndpoint.del("delete", "/api/projects/:id")
      .setPath(ProjectPath)
      .setUrlParams(ProjectDeleteParams)
      .addSuccess(Success)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(RequiredScope, "projects:write")
      .annotate(OpenApi.Summary, "Delete a project (409 while it has tasks, unless ?cascade=true)")
  )
  .middleware(Authentication) {}

export class LabelsGroup extends HttpApiGroup.make("labels")
  .add(
    HttpApiEndpoint.get("list", "/api/labels")
      .setUrlParams(LabelListParams)
      .addSuccess(LabelList)
      .annotate(RequiredScope, "tasks:read")
  )
  .add(
    HttpApiEndpoint.post("create", "/api/labels")
      .setPayload(LabelCreate)
      .addSuccess(Label, { status: 201 })
      .addError(ConflictError)
      .annotate(RequiredScope, "tasks:write")
  )
  .middleware(Authentication) {}

/** The whole contract. Errors every endpoint may answer are declared once, here. */
export class TaskwrightApi extends HttpApi.make("taskwright")
  .add(SystemGroup)
  .add(TasksGroup)
  .add(ProjectsGroup)
  .add(LabelsGroup)
  .addError(BadRequestError)
  .addError(UnauthorizedError)
  .addError(ForbiddenError)
  .addError(PayloadTooLargeError)
  .addError(RateLimitedError)
  .addError(InternalServerError)
  .annotate(OpenApi.Title, "Taskwright")
  .annotate(
    OpenApi.Description,
    "Tasks, projects and labels with AI coding agents attached. Every error is {error:{code,message,details}}."
  ) {}
