import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import {
  Project,
  ProjectCreate,
  ProjectDeleteParams,
  ProjectDetail,
  ProjectId,
  ProjectList,
  ProjectListParams
} from "@taskwright/core"
import { Schema } from "effect"
import { ConflictError, NotFoundError } from "../Errors.js"
import { Authentication, RequiredScope } from "../Security.js"
import { Success } from "./Common.js"

const ProjectPath = Schema.Struct({ id: ProjectId })

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
