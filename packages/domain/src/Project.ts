import { Schema } from "effect"
import { Count, Text, TrimmedText } from "./Bounds.js"
import { ProjectId } from "./Ids.js"
import { PageFields, PageParams, PageQuery } from "./Paging.js"
import { Timestamp } from "./Timestamp.js"

const MAX_NAME = 200
const MAX_PATH = 4096
const MAX_GIT_URL = 2000

const gitUrlMessage = () => "git_url must be an https://, ssh://, git@host: or file:// URL of at most 2000 characters"

/** `https://`, `ssh://`, `git@host:path` or `file://` (DECISIONS). */
export const GitUrl = Schema.String.pipe(
  Schema.maxLength(MAX_GIT_URL, { message: gitUrlMessage }),
  Schema.pattern(/^(https:\/\/[^\s]+|ssh:\/\/[^\s]+|git@[A-Za-z0-9.-]+:[^\s]+|file:\/\/\/[^\s]*)$/, {
    message: gitUrlMessage,
    title: "git URL",
    description:
      "A repository to clone into path: an https://, ssh://, git@host: or file:// URL (ssh and file:// for admins)."
  })
)

const projectExample = {
  id: ProjectId.make("proj_4bT9xQ2mLk7Wz1Rv"),
  name: "Website",
  path: "/srv/projects/website",
  git_url: "https://github.com/example/website.git",
  created_at: "2026-11-21T23:43:04.123Z"
}

const projectFields = {
  id: ProjectId,
  name: Text(MAX_NAME, "The project's name."),
  path: Text(MAX_PATH, "The project's directory on the service's host: an absolute, normalised path."),
  git_url: Schema.NullOr(Text(MAX_GIT_URL, "The repository the project was cloned from.")),
  created_at: Timestamp
}

export const Project = Schema.Struct(projectFields).annotations({
  description: "A project: a git repository on the service's host that agents work in.",
  examples: [projectExample]
})
export type Project = typeof Project.Type

export const ProjectDetail = Schema.Struct({
  ...projectFields,
  task_count: Count("How many tasks belong to the project.")
}).annotations({
  description: "A project and how many tasks it has.",
  examples: [{ ...projectExample, task_count: 3 }]
})
export type ProjectDetail = typeof ProjectDetail.Type

export const ProjectList = Schema.Struct({
  projects: Schema.Array(Project).annotations({ jsonSchema: { maxItems: 200 } }),
  ...PageFields
}).annotations({
  description: "A page of projects, newest first.",
  examples: [{ projects: [projectExample], total: 1, limit: 50, offset: 0 }]
})
export type ProjectList = typeof ProjectList.Type

const pathMessage = () => `path must be 1 to ${MAX_PATH} characters long`

export const ProjectCreate = Schema.Struct({
  name: TrimmedText(
    `name must be 1 to ${MAX_NAME} characters long`,
    MAX_NAME,
    `The project's name, 1 to ${MAX_NAME} characters (spaces around it are dropped).`
  ),
  path: Schema.String.pipe(
    Schema.minLength(1, { message: pathMessage }),
    Schema.maxLength(MAX_PATH, {
      message: pathMessage,
      title: "path",
      description:
        "An absolute, normalised directory: an existing git repository, or with git_url a path that does not exist yet."
    })
  ),
  git_url: Schema.optional(Schema.NullOr(GitUrl))
}).annotations({
  description: "A new project over a directory, or a clone of git_url into it.",
  examples: [{ name: projectExample.name, path: projectExample.path, git_url: projectExample.git_url }]
})
export type ProjectCreate = typeof ProjectCreate.Type

export const ProjectListParams = Schema.Struct(PageParams)
/** {@link ProjectListParams} as a query string (the contract). */
export const ProjectListQuery = Schema.Struct(PageQuery)

export const ProjectDeleteParams = Schema.Struct({
  cascade: Schema.optional(
    Schema.Literal("true", "false").annotations({
      description: "true deletes the project's tasks with it; without it a project with tasks is not deleted (409)."
    })
  )
})
