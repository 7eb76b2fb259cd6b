import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Run, RunId, RunLogs, RunLogsParams, RunStart, RunStarted } from "@taskwright/domain"
import { Schema } from "effect"
import { type ErrorExample, ErrorExamples, fieldExample, notFoundExample, ownedExample } from "../Documentation.js"
import { ConflictError, ForbiddenError, NotFoundError, RequestErrors } from "../Errors.js"
import { Authentication, RequiredScope } from "../Security.js"
import { contractQuery } from "./Common.js"
import { TaskPath } from "./Tasks.js"

export const RunPath = Schema.Struct({ run_id: RunId })

/** What a start is told when the service runs as many agents as it may (`TASKWRIGHT_MAX_RUNS`). */
export const capacityExample: ErrorExample = {
  summary: "The service runs as many agents as it may",
  message: "4 agent runs are already running, the most this service runs at once; try again when one ends",
  details: { reason: "capacity", max_runs: 4 }
}

const badRunId = fieldExample(
  "An id that is not a run id",
  "run_id",
  "run_id must look like run_ followed by 16 letters or digits",
  { bounds: { minLength: 20, maxLength: 20 } }
)

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
      .annotate(ErrorExamples, {
        400: [fieldExample("No agent named", "agent", "agent is required")],
        403: [ownedExample("task", 42)],
        404: [notFoundExample("task", 42)],
        409: [
          {
            summary: "An agent is already running on the task",
            message: "task 42 already has a running agent run",
            details: { reason: "task_busy" }
          },
          capacityExample,
          {
            summary: "The branch is checked out elsewhere",
            message:
              "branch taskwright/task-42 is checked out in another worktree (the project's own checkout or a running run)",
            details: { reason: "branch_in_use", branch: "taskwright/task-42" }
          },
          {
            summary: "The project's .git now leads into another user's project",
            message:
              "project proj_4bT9xQ2mLk7Wz1Rv: the repository's common git directory (/srv/projects/bob/app/.git, outside the project's directory) is in another user's project; no worktree or branch was made",
            details: { reason: "repository_taken", project_id: "proj_4bT9xQ2mLk7Wz1Rv" }
          }
        ]
      })
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
      .annotate(ErrorExamples, {
        400: [badRunId],
        403: [ownedExample("run", "run_8Hc3JqN5vX0pTe6Y")],
        404: [notFoundExample("run", "run_8Hc3JqN5vX0pTe6Y")]
      })
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
      .annotate(ErrorExamples, {
        400: [fieldExample("A negative after", "after", "after must be a whole number")],
        403: [ownedExample("run", "run_8Hc3JqN5vX0pTe6Y")],
        404: [notFoundExample("run", "run_8Hc3JqN5vX0pTe6Y")]
      })
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
      .annotate(ErrorExamples, {
        400: [badRunId],
        403: [ownedExample("run", "run_8Hc3JqN5vX0pTe6Y")],
        404: [notFoundExample("run", "run_8Hc3JqN5vX0pTe6Y")],
        409: [
          {
            summary: "The run has ended",
            message: "run run_8Hc3JqN5vX0pTe6Y has already ended (completed)",
            details: { reason: "run_ended", status: "completed" }
          }
        ]
      })
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
