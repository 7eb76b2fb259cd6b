import { Schema } from "effect"
import { RunId, TaskId } from "../domain/Ids.js"
import { Timestamp } from "../domain/Timestamp.js"

export const RunStatus = Schema.Literal("running", "completed", "failed", "stopped")
export type RunStatus = typeof RunStatus.Type

export const Autonomy = Schema.Literal("read-only", "workspace-write", "danger-full-access")
export type Autonomy = typeof Autonomy.Type

/** A run as the get-task response lists it. */
export const RunSummary = Schema.Struct({
  id: RunId,
  agent: Schema.String,
  status: RunStatus,
  started_at: Timestamp,
  completed_at: Schema.NullOr(Timestamp)
})
export type RunSummary = typeof RunSummary.Type

export const RunOutput = Schema.Struct({
  files_modified: Schema.Array(Schema.String),
  lines_added: Schema.Number,
  lines_removed: Schema.Number
})

export const Run = Schema.Struct({
  id: RunId,
  task_id: TaskId,
  agent: Schema.String,
  status: RunStatus,
  started_at: Timestamp,
  completed_at: Schema.NullOr(Timestamp),
  output: RunOutput
})
export type Run = typeof Run.Type
