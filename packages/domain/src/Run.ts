/**
 * The agent-run resource: a run as the API shows it, the start-run payload and answer, and the
 * run's log entries with their paging parameters.
 */
import { Schema } from "effect"
import { Count, ShapedText, Text } from "./Bounds.js"
import { RunId, TaskId } from "./Ids.js"
import { Timestamp, TimestampFromInput } from "./Timestamp.js"

export const RunStatus = Schema.Literal("running", "completed", "failed", "stopped").annotations({
  description: "running until the agent ends: completed (exit 0), failed (an error, a timeout or a restart) or stopped."
})
export type RunStatus = typeof RunStatus.Type

export const Autonomy = Schema.Literal("read-only", "workspace-write", "danger-full-access").annotations({
  description: "What the agent may do: read only, write in its worktree, or anything its sandbox allows."
})
export type Autonomy = typeof Autonomy.Type

export const RunLogLevel = Schema.Literal("debug", "info", "warn", "error")

/** The longest agent name. */
const MAX_AGENT = 64
/** The longest branch name. */
const MAX_BRANCH = 200
/** The longest log line kept: longer output is cut into lines of this many characters. */
const MAX_LOG_LINE = 4 * 1024 * 1024
const AGENT_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/

const agentAnswered = ShapedText(AGENT_NAME, MAX_AGENT, "The agent that runs (or ran).")
const branchAnswered = Text(MAX_BRANCH, "The git branch the run works on.")

/** A run as the get-task response lists it. */
export const RunSummary = Schema.Struct({
  id: RunId,
  agent: agentAnswered,
  status: RunStatus,
  started_at: Timestamp,
  completed_at: Schema.NullOr(Timestamp)
})
export type RunSummary = typeof RunSummary.Type

/** Tokens and cost the agent reported for the whole run. */
export const RunUsage = Schema.Struct({
  input_tokens: Count("Input tokens the agent reported."),
  output_tokens: Count("Output tokens the agent reported."),
  cost_usd: Schema.NullOr(
    Schema.Number.annotations({
      description: "The cost the agent reported, in US dollars.",
      jsonSchema: { minimum: 0 }
    })
  )
}).annotations({ description: "What the agent reported using, for the whole run." })

// ---------------------------------------------------------------------------------------------
// Pull-request reviews

/** The longest review summary kept: GitHub takes a review body of at most 65,536 characters. */
export const MAX_REVIEW_SUMMARY = 60_000
/** The longest body of one review comment. */
export const MAX_REVIEW_COMMENT = 20_000
/** The most comments a review keeps. */
export const MAX_REVIEW_COMMENTS = 100
/** The longest path a review comment names. */
export const MAX_REVIEW_PATH = 4096

/** A GitHub repository, `owner/name`. */
const GITHUB_REPO = /^[A-Za-z0-9][A-Za-z0-9-]{0,38}\/[A-Za-z0-9._-]{1,100}$/

export const ReviewVerdict = Schema.Literal("approve", "request_changes", "comment").annotations({
  description: "What the agent concluded: approve, request_changes or comment (no verdict either way)."
})
export type ReviewVerdict = typeof ReviewVerdict.Type

/** One remark of a review on a line of a file. */
export const ReviewComment = Schema.Struct({
  path: Text(MAX_REVIEW_PATH, "The file, relative to the repository's root."),
  line: Count("The line in the pull request's version of the file.", 1),
  body: Text(MAX_REVIEW_COMMENT, "The remark, in Markdown.")
}).annotations({ description: "A remark on one line of a file." })
export type ReviewComment = typeof ReviewComment.Type

/** The pull request a review run reads. */
export const PullRequestRef = Schema.Struct({
  repo: ShapedText(GITHUB_REPO, 140, "The repository, owner/name."),
  number: Count("The pull request's number.", 1, 2_147_483_647),
  title: Text(1024, "The pull request's title."),
  head_sha: ShapedText(/^[0-9a-f]{40}([0-9a-f]{24})?$/, 64, "The commit reviewed: the pull request's head."),
  url: Text(2048, "The pull request on GitHub.")
}).annotations({ description: "The pull request reviewed." })
export type PullRequestRef = typeof PullRequestRef.Type

/** How posting a review to the pull request went (`post: true`). */
export const ReviewPosting = Schema.Struct({
  status: Schema.Literal("posted", "failed").annotations({
    description: "posted: the review is on the pull request; failed: GitHub refused it or could not be reached."
  }),
  review_id: Schema.NullOr(Count("GitHub's id of the posted review.", 1)),
  url: Schema.NullOr(Text(2048, "The posted review on GitHub.")),
  inline_comments: Count("Comments posted on their lines; the others are listed in the review's body.", 0, 100),
  error: Schema.NullOr(Text(2000, "Why the review could not be posted."))
}).annotations({ description: "How posting the review to the pull request went." })
export type ReviewPosting = typeof ReviewPosting.Type

/** The review a pull-request review run produced, from the agent's answer. */
export const RunReview = Schema.Struct({
  summary: Text(MAX_REVIEW_SUMMARY, "The review's summary: the agent's, or its whole final message."),
  verdict: ReviewVerdict,
  comments: Schema.Array(ReviewComment).annotations({
    description: "Remarks on lines of files.",
    jsonSchema: { maxItems: MAX_REVIEW_COMMENTS }
  }),
  pull_request: PullRequestRef,
  posted: Schema.optional(ReviewPosting)
}).annotations({ description: "The agent's review of a pull request; posted when the run was asked to post it." })
export type RunReview = typeof RunReview.Type

/**
 * What the run changed against its base commit, so far while it runs and final once it ends;
 * `usage` when the agent reported it, `commit` once the work is committed on the branch, `review`
 * once a pull-request review run has completed.
 */
export const RunOutput = Schema.Struct({
  // Not capped: a run may touch any number of files, and all of them are listed.
  files_modified: Schema.Array(Text(4096)).annotations({
    description: "Paths of the files changed, in the repository."
  }),
  lines_added: Count("Lines added."),
  lines_removed: Count("Lines removed."),
  usage: Schema.optional(RunUsage),
  commit: Schema.optional(
    ShapedText(/^[0-9a-f]{40,64}$/, 64, "The commit that holds the run's work, once it is committed.")
  ),
  review: Schema.optional(RunReview)
}).annotations({ identifier: "RunOutput", description: "What the run changed, against the commit it started from." })
export type RunOutput = typeof RunOutput.Type

/** `GET /api/runs/:run_id`: the spec's fields plus the branch, the autonomy and why it failed. */
export const Run = Schema.Struct({
  id: RunId,
  task_id: TaskId,
  agent: agentAnswered,
  status: RunStatus,
  started_at: Timestamp,
  completed_at: Schema.NullOr(Timestamp),
  output: RunOutput,
  branch: branchAnswered,
  autonomy: Autonomy,
  error: Schema.NullOr(Text(10_000, "Why the run failed, when it did."))
}).annotations({
  description: "An agent run.",
  examples: [
    {
      id: RunId.make("run_8Hc3JqN5vX0pTe6Y"),
      task_id: TaskId.make(42),
      agent: "claude-code",
      status: "completed",
      started_at: "2026-11-22T09:00:00.000Z",
      completed_at: "2026-11-22T09:07:31.412Z",
      output: {
        files_modified: ["README.md"],
        lines_added: 48,
        lines_removed: 3,
        usage: { input_tokens: 18250, output_tokens: 2210, cost_usd: 0.12 },
        commit: "3f2c1a9e8b7d6c5f4a3b2c1d0e9f8a7b6c5d4e3f"
      },
      branch: "taskwright/task-42",
      autonomy: "workspace-write",
      error: null
    }
  ]
})
export type Run = typeof Run.Type

// ---------------------------------------------------------------------------------------------
// Branch names

const BRANCH_CHARS = /^[A-Za-z0-9._/-]+$/

/**
 * Checks a branch name: `^[A-Za-z0-9._/-]+$`, no leading `-`, no `@`, at most 200 characters,
 * and `git check-ref-format --branch` rules (no `..`, no `//`, no component starting with `.`
 * or ending with `.lock`, not ending with `/` or `.`, not `HEAD`). Returns why it is refused,
 * or null when it is fine.
 */
export const validateBranchName = (name: string): string | null => {
  if (name.length === 0) return "branch name is empty"
  if (name.length > 200) return "branch name is longer than 200 characters"
  if (!BRANCH_CHARS.test(name)) return "branch name may only contain letters, digits, '.', '_', '/' and '-'"
  if (name.startsWith("-")) return "branch name may not start with '-'"
  if (name.includes("..")) return "branch name may not contain '..'"
  if (name.startsWith("/") || name.endsWith("/")) return "branch name may not start or end with '/'"
  if (name.includes("//")) return "branch name may not contain '//'"
  if (name.endsWith(".")) return "branch name may not end with '.'"
  if (name === "HEAD") return "branch name may not be HEAD"
  for (const component of name.split("/")) {
    if (component.startsWith(".")) return "a branch name component may not start with '.'"
    if (component.endsWith(".lock")) return "a branch name component may not end with '.lock'"
  }
  return null
}

const BRANCH_PATTERN = "^(?!-)(?!.*\\.\\.)(?!.*//)(?!.*@)[A-Za-z0-9._/-]+$"

const Branch = Schema.String.pipe(
  Schema.minLength(1, { message: () => "branch name is empty" }),
  Schema.maxLength(MAX_BRANCH, { message: () => `branch name is longer than ${MAX_BRANCH} characters` }),
  Schema.filter((name) => validateBranchName(name) ?? true, {
    identifier: "BranchName",
    title: "branch name",
    description:
      "A git branch name: letters, digits, '.', '_', '/' and '-', at most 200 characters, as git check-ref-format --branch allows.",
    jsonSchema: { pattern: BRANCH_PATTERN },
    examples: ["taskwright/task-42"]
  })
)

/** Names of agents: lower-case letters, digits, `.`, `_`, `-`. */
export const AgentName = Schema.String.pipe(
  Schema.pattern(AGENT_NAME, {
    message: () => "an agent name is 1 to 64 lower-case letters, digits, '.', '_' or '-'",
    description: "An agent: claude-code, codex, gemini, command, or a command agent an admin configured.",
    jsonSchema: { pattern: AGENT_NAME.source, minLength: 1, maxLength: MAX_AGENT },
    examples: ["claude-code"]
  })
)

/** `POST /api/tasks/:id/run`. */
export const RunStart = Schema.Struct({
  agent: AgentName,
  autonomy: Schema.optional(Autonomy),
  branch: Schema.optional(Branch)
}).annotations({
  description: "Which agent to start, and optionally its autonomy and branch (default taskwright/task-<id>).",
  examples: [{ agent: "claude-code", autonomy: "workspace-write", branch: "taskwright/task-42" }]
})
export type RunStart = typeof RunStart.Type

/** The answer to `POST /api/tasks/:id/run`. */
export const RunStarted = Schema.Struct({
  run_id: RunId,
  task_id: TaskId,
  agent: agentAnswered,
  status: Schema.Literal("running"),
  started_at: Timestamp,
  branch: branchAnswered,
  autonomy: Autonomy
}).annotations({
  description: "The run just started.",
  examples: [
    {
      run_id: RunId.make("run_8Hc3JqN5vX0pTe6Y"),
      task_id: TaskId.make(42),
      agent: "claude-code",
      status: "running",
      started_at: "2026-11-22T09:00:00.000Z",
      branch: "taskwright/task-42",
      autonomy: "workspace-write"
    }
  ]
})
export type RunStarted = typeof RunStarted.Type

export const RunLogEntry = Schema.Struct({
  seq: Count("The entry's number in the run's log: 1, 2, 3, ... without gaps.", 1),
  timestamp: Timestamp,
  level: RunLogLevel.annotations({ description: "How much the entry matters: every stderr line is warn." }),
  message: Text(MAX_LOG_LINE, "One line of the agent's output, or the run's own note.")
})
export type RunLogEntry = typeof RunLogEntry.Type

export const RunLogs = Schema.Struct({
  logs: Schema.Array(RunLogEntry).annotations({ description: "Oldest first.", jsonSchema: { maxItems: 1000 } })
}).annotations({
  description: "A page of a run's log.",
  examples: [
    {
      logs: [
        { seq: 1, timestamp: "2026-11-22T09:00:00.000Z", level: "info", message: "run started: claude-code" },
        { seq: 2, timestamp: "2026-11-22T09:00:02.120Z", level: "info", message: "Reading README.md" }
      ]
    }
  ]
})
export type RunLogs = typeof RunLogs.Type

const digits = (what: string) =>
  Schema.String.pipe(Schema.pattern(/^[0-9]{1,15}$/, { message: () => `${what} must be a whole number` }))

/** A query value read as a whole number: documented as the number it is read as. */
const queryInteger = (minimum: number, maximum: number, description: string, fallback?: number) => ({
  type: "integer",
  format: "int64",
  minimum,
  maximum,
  description,
  ...(fallback === undefined ? {} : { default: fallback })
})

/** `GET /api/runs/:run_id/logs`: `since` (exclusive) and `after` (a seq) narrow, `limit` 1-1000 (default 100). */
export const RunLogsParams = Schema.Struct({
  since: Schema.optional(
    TimestampFromInput.annotations({ description: "Only entries logged after this time (exclusive)." })
  ),
  after: Schema.optional(
    digits("after").pipe(
      Schema.compose(Schema.NumberFromString),
      Schema.annotations({
        jsonSchema: queryInteger(0, 999_999_999_999_999, "Only entries whose seq is greater than this.")
      })
    )
  ),
  limit: Schema.optionalWith(
    digits("limit").pipe(
      Schema.compose(Schema.NumberFromString),
      Schema.compose(
        Schema.Number.pipe(
          Schema.int({ message: () => "limit must be a whole number from 1 to 1000" }),
          Schema.between(1, 1000, { message: () => "limit must be a whole number from 1 to 1000" })
        )
      ),
      Schema.annotations({ jsonSchema: queryInteger(1, 1000, "How many entries to answer, 1 to 1000.", 100) })
    ),
    { default: () => 100 }
  )
})
export type RunLogsParams = typeof RunLogsParams.Type
