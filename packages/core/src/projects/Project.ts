import { Schema } from "effect"
import { ProjectId } from "../domain/Ids.js"
import { PageParams } from "../domain/Paging.js"
import { Timestamp } from "../domain/Timestamp.js"

/** `https://`, `ssh://`, `git@host:path` or `file://` (DECISIONS). */
export const GitUrl = Schema.String.pipe(
  Schema.maxLength(2000),
  Schema.pattern(/^(https:\/\/[^\s]+|ssh:\/\/[^\s]+|git@[A-Za-z0-9.-]+:[^\s]+|file:\/\/\/[^\s]*)$/, {
    message: () => "git_url must be an https://, ssh://, git@host: or file:// URL"
  })
)

export const Project = Schema.Struct({
  id: ProjectId,
  name: Schema.String,
  path: Schema.String,
  git_url: Schema.NullOr(Schema.String),
  created_at: Timestamp
})
export type Project = typeof Project.Type

export const ProjectDetail = Schema.Struct({ ...Project.fields, task_count: Schema.Number })
export type ProjectDetail = typeof ProjectDetail.Type

export const ProjectList = Schema.Struct({
  projects: Schema.Array(Project),
  total: Schema.Number,
  limit: Schema.Number,
  offset: Schema.Number
})
export type ProjectList = typeof ProjectList.Type

export const ProjectCreate = Schema.Struct({
  name: Schema.compose(
    Schema.Trim,
    Schema.String.pipe(
      Schema.minLength(1, { message: () => "name must not be empty" }),
      Schema.maxLength(200, { message: () => "name must be at most 200 characters" })
    )
  ),
  path: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(4096)),
  git_url: Schema.optional(Schema.NullOr(GitUrl))
})
export type ProjectCreate = typeof ProjectCreate.Type

export const ProjectListParams = Schema.Struct(PageParams)

export const ProjectDeleteParams = Schema.Struct({
  cascade: Schema.optional(Schema.Literal("true", "false"))
})
