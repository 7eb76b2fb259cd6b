import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Run, RunId, RunLogs, RunLogsParams, RunStart, RunStarted } from "@taskwright/domain"
import { Schema } from "effect"
import { ConflictError, ForbiddenError, NotFoundError, RequestErrors } from "../Errors.js"
import { Authentication, RequiredScope } from "../Security.js"
import { contractQuery } from "./Common.js"
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
      .annotate(OpenApi.Summary, "Start an agent run")
      .annotate(
        OpenApi.Description,
        "Starts the agent on the task in a git worktree of the task's project, on its branch (default taskwright/task-<id>, reused if it exists), sandboxed; the task moves to in_progress. 400 if the task has no project or its path is not a git repository with a commit; 409 if the task already has a running run (task_busy), the service is at its limit of concurrent runs (capacity), or the branch is checked out elsewhere (branch_in_use); 503 when runs cannot be sandboxed on this host. Needs agents:run."
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/api/runs/:run_id")
      .setPath(RunPath)
      .addSuccess(Run)
      .addError(NotFoundError)
      .annotate(RequiredScope, "tasks:read")
      .annotate(OpenApi.Summary, "Get a run")
      .annotate(
        OpenApi.Description,
        "A run: its status, and what it changed so far while it runs (final once it ends); completed_at is null while it runs. Needs tasks:read."
      )
  )
  .add(
    HttpApiEndpoint.get("logs", "/api/runs/:run_id/logs")
      .setPath(RunPath)
      .setUrlParams(contractQuery(RunLogsParams))
      .addSuccess(RunLogs)
      .addError(NotFoundError)
      .annotate(RequiredScope, "tasks:read")
      .annotate(OpenApi.Summary, "Read a run's log")
      .annotate(
        OpenApi.Description,
        "A page of the run's log, oldest first: entries after since (a time, exclusive) or after (a seq), at most limit of them. Page with after=<the last seq seen>, which two entries of the same time cannot confuse. Needs tasks:read."
      )
  )
  .add(
    HttpApiEndpoint.post("stop", "/api/runs/:run_id/stop")
      .setPath(RunPath)
      .addSuccess(Run)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(RequiredScope, "agents:run")
      .annotate(OpenApi.Summary, "Stop a run")
      .annotate(
        OpenApi.Description,
        "Stops a running run: SIGTERM to the agent's process group, SIGKILL after 5 s, then commits what it left and answers the run, stopped. A run that has already ended is 409. Needs agents:run."
      )
  )
  .middleware(Authentication)
  .addError(RequestErrors)
  .addError(ForbiddenError)
  .annotate(OpenApi.Description, "Agent runs: an AI coding agent working on a task, its log, and stopping it.") {}
