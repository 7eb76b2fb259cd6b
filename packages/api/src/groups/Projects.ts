import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import {
  Project,
  ProjectCreate,
  ProjectDeleteParams,
  ProjectDetail,
  ProjectId,
  ProjectList,
  ProjectListQuery
} from "@taskwright/domain"
import { Schema } from "effect"
import { ConflictError, ForbiddenError, NotFoundError, RequestErrors } from "../Errors.js"
import { Authentication, RequiredScope } from "../Security.js"
import { contractQuery, Success } from "./Common.js"

const ProjectPath = Schema.Struct({ id: ProjectId })

export class ProjectsGroup extends HttpApiGroup.make("projects")
  .add(
    HttpApiEndpoint.get("list", "/api/projects")
      .setUrlParams(contractQuery(ProjectListQuery))
      .addSuccess(ProjectList)
      .annotate(RequiredScope, "projects:read")
      .annotate(OpenApi.Summary, "List projects")
      .annotate(
        OpenApi.Description,
        "The caller's projects (an admin's: everyone's), newest first, a page at a time. Needs projects:read."
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/api/projects/:id")
      .setPath(ProjectPath)
      .addSuccess(ProjectDetail)
      .addError(NotFoundError)
      .annotate(RequiredScope, "projects:read")
      .annotate(OpenApi.Summary, "Get a project")
      .annotate(
        OpenApi.Description,
        "A project with its git_url and how many tasks it has. Another user's project is 403. Needs projects:read."
      )
  )
  .add(
    HttpApiEndpoint.post("create", "/api/projects")
      .setPayload(ProjectCreate)
      .addSuccess(Project, { status: 201 })
      .addError(ConflictError)
      .annotate(RequiredScope, "projects:write")
      .annotate(OpenApi.Summary, "Create a project")
      .annotate(
        OpenApi.Description,
        "Creates a project over an existing directory, or clones git_url into path (which must not exist yet; hooks are disabled during the clone). path must be absolute and normalised; a non-admin's must lie inside the projects root. A location another project owns is 409. Needs projects:write."
      )
  )
  .add(
    HttpApiEndpoint.del("delete", "/api/projects/:id")
      .setPath(ProjectPath)
      .setUrlParams(ProjectDeleteParams)
      .addSuccess(Success)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(RequiredScope, "projects:write")
      .annotate(OpenApi.Summary, "Delete a project")
      .annotate(
        OpenApi.Description,
        "Deletes the project (never its directory). 409 while it has tasks, unless cascade=true deletes them too, and in any case while one of its runs is running. Needs projects:write."
      )
  )
  .middleware(Authentication)
  .addError(RequestErrors)
  .addError(ForbiddenError)
  .annotate(OpenApi.Description, "Projects: git repositories on the service's host that agents work in.") {}
