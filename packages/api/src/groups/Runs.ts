import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Run, RunId, RunLogs, RunLogsParams, RunStart, RunStarted } from "@taskwright/core"
import { Schema } from "effect"
import { ConflictError, NotFoundError } from "../Errors.js"
import { Authentication, RequiredScope } from "../Security.js"
import { TaskPath } from "./Tasks.js"

export const RunPath = Schema.Struct({ run_id: RunId })

/** Agent runs: start one on a task, read it and its log, stop it. */
export class RunsGroup extends HttpApiGroup.make("runs")
  .add(
    HttpApiEndpoint.post("start", "/api/tasks/:id/run")
      .setPath(TaskPath)
      .setPayload(RunStart)
      .addSuccess(RunStarted, { status: 201 })
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(RequiredScope, "agents:run")
      .annotate(
        OpenApi.Summary,
        "Start an agent on the task in a git worktree on its branch (409 task_busy / capacity)"
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/api/runs/:run_id")
      .setPath(RunPath)
      .addSuccess(Run)
      .addError(NotFoundError)
      .annotate(RequiredScope, "tasks:read")
      .annotate(OpenApi.Summary, "A run: its status and output (figures so far while it runs)")
  )
  .add(
    HttpApiEndpoint.get("logs", "/api/runs/:run_id/logs")
      .setPath(RunPath)
      .setUrlParams(RunLogsParams)
      .addSuccess(RunLogs)
      .addError(NotFoundError)
      .annotate(RequiredScope, "tasks:read")
      .annotate(OpenApi.Summary, "A page of the run's log, oldest first (since exclusive, after=<seq>, limit ≤ 1000)")
  )
  .add(
    HttpApiEndpoint.post("stop", "/api/runs/:run_id/stop")
      .setPath(RunPath)
      .addSuccess(Run)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(RequiredScope, "agents:run")
      .annotate(OpenApi.Summary, "Stop a running run (SIGTERM to its process group, SIGKILL after a grace period)")
  )
  .middleware(Authentication) {}
