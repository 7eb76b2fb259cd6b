/**
 * The agent-run resource: a run as the API shows it, the start-run payload and answer, and the
 * run's log entries with their paging parameters.
 */
import { Schema } from "effect"
import { RunId, TaskId } from "../domain/Ids.js"
import { Timestamp, TimestampFromInput } from "../domain/Timestamp.js"
import { validateBranchName } from "./GitWorkspace.js"

export const RunStatus = Schema.Literal("running", "completed", "failed", "stopped")
export type RunStatus = typeof RunStatus.Type

export const Autonomy = Schema.Literal("read-only", "workspace-write", "danger-full-access")
export type Autonomy = typeof Autonomy.Type

export const RunLogLevel = Schema.Literal("debug", "info", "warn", "error")

/** A run as the get-task response lists it. */
export const RunSummary = Schema.Struct({
  id: RunId,
  agent: Schema.String,
  status: RunStatus,
  started_at: Timestamp,
  completed_at: Schema.NullOr(Timestamp)
})
export type RunSummary = typeof RunSummary.Type

/** Tokens and cost the agent reported for the whole run. */
export const RunUsage = Schema.Struct({
  input_tokens: Schema.Number,
  output_tokens: Schema.Number,
  cost_usd: Schema.NullOr(Schema.Number)
})

/**
 * What the run changed against its base commit, so far while it runs and final once it ends;
 * `usage` when the agent reported it, `commit` once the work is committed on the branch.
 */
export const RunOutput = Schema.Struct({
  files_modified: Schema.Array(Schema.String),
  lines_added: Schema.Number,
  lines_removed: Schema.Number,
  usage: Schema.optional(RunUsage),
  commit: Schema.optional(Schema.String)
})
export type RunOutput = typeof RunOutput.Type

/** `GET /api/runs/:run_id`: the spec's fields plus the branch, the autonomy and why it failed. */
export const Run = Schema.Struct({
  id: RunId,
  task_id: TaskId,
  agent: Schema.String,
  status: RunStatus,
  started_at: Timestamp,
  completed_at: Schema.NullOr(Timestamp),
  output: RunOutput,
  branch: Schema.String,
  autonomy: Autonomy,
  error: Schema.NullOr(Schema.String)
})
export type Run = typeof Run.Type

const Branch = Schema.String.pipe(
  Schema.filter((name) => validateBranchName(name) ?? true, { identifier: "BranchName" })
)

/** Names of agents: lower-case letters, digits, `.`, `_`, `-`. */
export const AgentName = Schema.String.pipe(
  Schema.pattern(/^[a-z0-9][a-z0-9._-]{0,63}$/, {
    message: () => "an agent name is 1-64 lower-case letters, digits, '.', '_' or '-'"
  })
)

/** `POST /api/tasks/:id/run`. */
export const RunStart = Schema.Struct({
  agent: AgentName,
  autonomy: Schema.optional(Autonomy),
  branch: Schema.optional(Branch)
})
export type RunStart = typeof RunStart.Type

/** The answer to `POST /api/tasks/:id/run`. */
export const RunStarted = Schema.Struct({
  run_id: RunId,
  task_id: TaskId,
  agent: Schema.String,
  status: Schema.Literal("running"),
  started_at: Timestamp,
  branch: Schema.String,
  autonomy: Autonomy
})
export type RunStarted = typeof RunStarted.Type

export const RunLogEntry = Schema.Struct({
  seq: Schema.Number,
  timestamp: Timestamp,
  level: RunLogLevel,
  message: Schema.String
})
export type RunLogEntry = typeof RunLogEntry.Type

export const RunLogs = Schema.Struct({ logs: Schema.Array(RunLogEntry) })
export type RunLogs = typeof RunLogs.Type

const digits = (what: string) =>
  Schema.String.pipe(Schema.pattern(/^[0-9]{1,15}$/, { message: () => `${what} must be a whole number` }))

/** `GET /api/runs/:run_id/logs`: `since` (exclusive) and `after` (a seq) narrow, `limit` 1-1000 (default 100). */
export const RunLogsParams = Schema.Struct({
  since: Schema.optional(TimestampFromInput),
  after: Schema.optional(digits("after").pipe(Schema.compose(Schema.NumberFromString))),
  limit: Schema.optionalWith(
    digits("limit").pipe(
      Schema.compose(Schema.NumberFromString),
      Schema.compose(Schema.Int.pipe(Schema.between(1, 1000, { message: () => "limit must be between 1 and 1000" })))
    ),
    { default: () => 100 }
  )
})
export type RunLogsParams = typeof RunLogsParams.Type
