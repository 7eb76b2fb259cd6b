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
import { ErrorExamples, fieldExample, notFoundExample, ownedExample } from "../Documentation.js"
import { ConflictError, ForbiddenError, NotFoundError, RequestErrors } from "../Errors.js"
import { Authentication, RequiredScope } from "../Security.js"
import { contractQuery, Success } from "./Common.js"

const ProjectPath = Schema.Struct({ id: ProjectId })

const badProjectId = fieldExample(
  "An id that is not a project id",
  "id",
  "id must look like proj_ followed by 16 letters or digits",
  { bounds: { minLength: 21, maxLength: 21 } }
)

export class ProjectsGroup extends HttpApiGroup.make("projects")
  .add(
    HttpApiEndpoint.get("list", "/api/projects")
      .setUrlParams(contractQuery(ProjectListQuery))
      .addSuccess(ProjectList)
      .annotate(RequiredScope, "projects:read")
      .annotate(ErrorExamples, {
        400: [
          fieldExample("A negative offset", "offset", "offset must be a whole number from 0 to 1000000000", {
            bounds: { minimum: 0, maximum: 1000000000, integer: true }
          })
        ]
      })
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
      .annotate(ErrorExamples, {
        400: [badProjectId],
        403: [ownedExample("project", "proj_4bT9xQ2mLk7Wz1Rv")],
        404: [notFoundExample("project", "proj_4bT9xQ2mLk7Wz1Rv")]
      })
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
      .annotate(ErrorExamples, {
        400: [
          fieldExample("A relative path", "path", "path must be absolute", { message: "path: path must be absolute" })
        ],
        403: [
          {
            summary: "A file:// clone by a non-admin",
            message: "cloning a file:// URL reads this host's files: only an admin may",
            details: { field: "git_url", reason: "file_clone_needs_admin" }
          }
        ],
        409: [
          {
            summary: "Another user's project is there",
            message: "another user's project already uses this path, one inside it, or one around it",
            details: { field: "path", reason: "path_taken" }
          },
          {
            summary: "Its .git leads into another user's project",
            message:
              "path: the repository's common git directory (/srv/projects/bob/app/.git, outside the project's directory) is in another user's project",
            details: {
              field: "path",
              reason: "repository_taken",
              fields: [
                {
                  path: "path",
                  message:
                    "the repository's common git directory (/srv/projects/bob/app/.git, outside the project's directory) is in another user's project"
                }
              ]
            }
          }
        ]
      })
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
      .annotate(ErrorExamples, {
        400: [badProjectId],
        403: [ownedExample("project", "proj_4bT9xQ2mLk7Wz1Rv")],
        404: [notFoundExample("project", "proj_4bT9xQ2mLk7Wz1Rv")],
        409: [
          {
            summary: "The project still has tasks",
            message: "the project still has tasks; delete them first or pass ?cascade=true",
            details: { reason: "has_tasks" }
          },
          {
            summary: "An agent is running in the project",
            message: "the project has a running agent run",
            details: { reason: "run_running" }
          }
        ]
      })
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
