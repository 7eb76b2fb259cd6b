/**
 * The rules of agent runs that need no service: branch and prompt defaults, how an agent's end
 * maps to the run's status, the commit message, the stored `output` read back, and the errors a
 * client sees when a run cannot start or stop.
 */
import {
  BadRequest,
  Conflict,
  type Run,
  type RunId,
  type RunOutput,
  RunReview,
  type RunStatus,
  ServiceUnavailable,
  type TaskId
} from "@taskwright/domain"
import { Option, Schema } from "effect"
import { type LogDraft, truncate } from "../agents/AgentStreams.js"
import type { AgentExit } from "./AgentProcess.js"
import type { DiffStats, GitError } from "./GitWorkspace.js"
import type { RunRow } from "./RunsRepo.js"

/** Who the service commits a run's work as. */
export const COMMIT_AUTHOR = { name: "Taskwright", email: "taskwright@localhost" } as const

/** The branch of a task's runs when the request names none. */
export const defaultBranch = (taskId: TaskId): string => `taskwright/task-${taskId}`

/** The prompt of a run: the task's title and description, and the review comment of a follow-up. */
export const buildPrompt = (
  task: { readonly title: string; readonly description: string },
  feedback: string | null
) => {
  const parts = [task.title.trim()]
  if (task.description.trim() !== "") parts.push(task.description.trim())
  if (feedback !== null && feedback.trim() !== "") {
    parts.push(`A reviewer asked for changes to the work done so far on this branch:\n${feedback.trim()}`)
  }
  return parts.join("\n\n")
}

/** `TASKWRIGHT_PROMPT` is cut to this many bytes: Linux refuses a single variable over 128 KiB. */
const MAX_PROMPT_ENV_BYTES = 96 * 1024

/** The prompt as `TASKWRIGHT_PROMPT` carries it. */
export const promptForEnv = (prompt: string): string => {
  const bytes = Buffer.from(prompt, "utf8")
  return bytes.length <= MAX_PROMPT_ENV_BYTES ? prompt : bytes.subarray(0, MAX_PROMPT_ENV_BYTES).toString("utf8")
}

/** The figures of a run that changed nothing (yet). */
export const emptyDiff: DiffStats = { files_modified: [], lines_added: 0, lines_removed: 0 }

const decodeStoredReview = Schema.decodeUnknownOption(RunReview)

/** The stored `output` JSON, whatever an older row holds. */
export const parseOutput = (text: string): RunOutput => {
  try {
    const o = JSON.parse(text) as Record<string, unknown>
    const usage = o.usage as RunOutput["usage"] | undefined
    return {
      files_modified: Array.isArray(o.files_modified) ? (o.files_modified as Array<string>) : [],
      lines_added: Number(o.lines_added) || 0,
      lines_removed: Number(o.lines_removed) || 0,
      ...(typeof usage === "object" && usage !== null ? { usage } : {}),
      ...(typeof o.commit === "string" ? { commit: o.commit } : {}),
      ...Option.match(decodeStoredReview(o.review), { onNone: () => ({}), onSome: (review) => ({ review }) })
    }
  } catch {
    return emptyDiff
  }
}

/** A run as the API shows it, from its row and its output. */
export const toRun = (row: RunRow, output: RunOutput): Run => ({
  id: row.id,
  task_id: row.task_id,
  agent: row.agent,
  status: row.status,
  started_at: row.started_at,
  completed_at: row.completed_at,
  output,
  branch: row.branch,
  autonomy: row.autonomy,
  error: row.error
})

/**
 * Who asked a run to stop: a user (`by`), the service shutting down, or the store saying another
 * process took the run over (this one had lost the store for longer than a heartbeat may lapse).
 */
export interface StopRequest {
  readonly kind: "user" | "shutdown" | "taken_over"
  readonly by: string | null
}

/** How the agent's process ended, as the run records it and says it in its log. */
export interface Outcome {
  readonly status: RunStatus
  readonly level: LogDraft["level"]
  readonly message: string
  readonly error: string | null
}

/** A failed outcome: `error` as the run records it, and as a sentence (plus `detail`) in its log. */
export const failed = (error: string, detail = ""): Outcome => ({
  status: "failed",
  level: "error",
  message: `${error.charAt(0).toUpperCase()}${error.slice(1)}${detail}`,
  error
})

/** How the process's end maps to the run's status. */
export const decide = (exit: AgentExit, stop: StopRequest | null, timeoutS: number): Outcome => {
  switch (exit.reason) {
    case "stopped":
      if (stop?.kind === "shutdown") return failed("the service shut down during the run", "; the agent was stopped")
      if (stop?.kind === "taken_over")
        return failed(
          "another service process took the run over",
          " (this one could not reach the store for too long); the agent was stopped"
        )
      return { status: "stopped", level: "warn", message: `Stopped${stop?.by ? ` by ${stop.by}` : ""}`, error: null }
    case "timeout":
      return failed(`timed out after ${timeoutS} s`, "; the agent's processes were ended")
    case "spawn_error":
      return failed(`could not start the agent: ${exit.error ?? "unknown error"}`)
    case "exit":
      if (exit.code === 0)
        return { status: "completed", level: "info", message: "The agent exited with code 0", error: null }
      return exit.code !== null
        ? failed(`the agent exited with code ${exit.code}`)
        : failed(`the agent was killed by ${exit.signal ?? "a signal"}`)
  }
}

/** The end of an agent that was never started (stopped first). */
export const notStarted: AgentExit = { code: null, signal: null, reason: "stopped", truncated: false, error: null }

const firstLine = (text: string, max: number): string => {
  const line = text.split("\n")[0]?.trim() ?? ""
  return line.length <= max ? line : `${line.slice(0, max - 1)}…`
}

/** The message of a run's commit: the task's title, the run, and the agent's final answer. */
export const commitMessage = (
  runId: RunId,
  agent: string,
  task: { readonly id: TaskId; readonly title: string },
  note: string,
  summary: string | null
): string =>
  [
    firstLine(task.title, 72) || `Task #${task.id}`,
    `Taskwright run ${runId} of task #${task.id} by ${agent}${note}.`,
    ...(summary !== null && summary.trim() !== "" ? [truncate(summary.trim(), 4000)] : [])
  ].join("\n\n")

/** 409 `task_busy`. */
export const taskBusy = (taskId: TaskId) =>
  new Conflict({ message: `task ${taskId} already has a running agent run`, details: { reason: "task_busy" } })

/** 409 `run_ended`. */
export const runEnded = (row: RunRow) =>
  new Conflict({
    message: `run ${row.id} has already ended (${row.status})`,
    details: { reason: "run_ended", status: row.status }
  })

/** 409 `capacity`: every slot of the service is taken. */
export const capacityFull = (maxRuns: number) =>
  new Conflict({
    message: `${maxRuns} agent runs are already running, the most this service runs at once; try again when one ends`,
    details: { reason: "capacity", max_runs: maxRuns }
  })

/** A failed clone of a review's commit as the client sees it: the repository could not be read. */
export const cloneError = (url: string, commit: string) => (error: GitError) =>
  new ServiceUnavailable({
    message: `cannot check out ${commit.slice(0, 12)} of ${url}: ${error.message}`,
    details: { reason: "clone_failed", retry_after: 30 }
  })

/** A failed `createWorktree` as the client sees it. */
export const worktreeError = (branch: string) => (error: GitError) => {
  const why = `${error.message}\n${error.stderr}`
  if (/already checked out|already used by worktree|is already locked/.test(why)) {
    return new Conflict({
      message: `branch ${branch} is checked out in another worktree (the project's own checkout or a running run)`,
      details: { reason: "branch_in_use", branch }
    })
  }
  if (/no commit at HEAD/.test(why)) {
    return new BadRequest({
      message: "the project's repository has no commit yet; commit something first",
      details: { reason: "empty_repository" }
    })
  }
  return new BadRequest({
    message: `cannot create a worktree for the run: ${error.message}`,
    details: { reason: "git_failed" }
  })
}
