/**
 * Reviews: a person's review of a task's work (the request, the stored review and the answer),
 * and an agent's review of a GitHub pull request (the request and the answer).
 */
import { Schema } from "effect"
import { ShapedText, Text, WholeNumberIn } from "./Bounds.js"
import { ProjectId, RunId, randomBase62, TaskId } from "./Ids.js"
import { AgentName, PullRequestRef, RunStarted } from "./Run.js"
import { Task } from "./Task.js"
import { Timestamp } from "./Timestamp.js"

export const ReviewAction = Schema.Literal("approve", "reject", "request_changes").annotations({
  description: "approve moves the task to done, reject to backlog, request_changes back to in_progress."
})
export type ReviewAction = typeof ReviewAction.Type

/** `rev_` + 16 base62 characters. */
const reviewIdMessage = () => "must look like rev_ followed by 16 letters or digits"
export const ReviewId = Schema.String.pipe(
  Schema.length(20, { message: reviewIdMessage }),
  Schema.pattern(/^rev_[0-9A-Za-z]{16}$/, {
    message: reviewIdMessage,
    title: "review id",
    description: "The id of a review: rev_ followed by 16 letters or digits.",
    examples: ["rev_5Gd2kLp9Xs0Qw3Er"]
  }),
  Schema.brand("ReviewId")
)

const MAX_COMMENT = 20_000
export type ReviewId = typeof ReviewId.Type

export const newReviewId = (): ReviewId => ReviewId.make(`rev_${randomBase62(16)}`)

/** `POST /api/tasks/:id/review`. */
export const ReviewCreate = Schema.Struct({
  action: ReviewAction,
  comment: Schema.optional(
    Schema.String.pipe(
      Schema.maxLength(MAX_COMMENT, {
        message: () => "comment must be at most 20,000 characters long",
        title: "comment",
        description: "What to change: with request_changes, a follow-up run of the same agent gets it in its prompt."
      })
    )
  )
}).annotations({
  description: "The review of a task in_review.",
  examples: [{ action: "request_changes", comment: "Add an example for the Windows install." }]
})
export type ReviewCreate = typeof ReviewCreate.Type

export const Review = Schema.Struct({
  id: ReviewId,
  action: ReviewAction,
  comment: Schema.NullOr(Text(MAX_COMMENT, "The reviewer's comment.")),
  /** The reviewing user's id. */
  reviewer: ShapedText(/^usr_[0-9A-Za-z]{16}$/, 20, "The id of the reviewing user."),
  created_at: Timestamp
})
export type Review = typeof Review.Type

/** The answer: the task after the review, the review, and the follow-up run a change request started. */
export const ReviewResult = Schema.Struct({
  task: Task,
  review: Review,
  run_id: Schema.NullOr(RunId.annotations({ description: "The follow-up run a change request started, if any." }))
}).annotations({
  description: "The task after the review, the review, and the follow-up run it started.",
  examples: [
    {
      task: {
        id: TaskId.make(42),
        title: "Write the README",
        description: "Cover installation and the first API call.",
        status: "in_progress",
        priority: "high",
        labels: ["docs"],
        project_id: ProjectId.make("proj_4bT9xQ2mLk7Wz1Rv"),
        created_at: "2026-11-21T23:43:04.123Z",
        updated_at: "2026-11-22T10:02:11.907Z",
        agent_runs: [
          {
            id: RunId.make("run_8Hc3JqN5vX0pTe6Y"),
            agent: "claude-code",
            status: "completed",
            started_at: "2026-11-22T09:00:00.000Z",
            completed_at: "2026-11-22T09:07:31.412Z"
          },
          {
            id: RunId.make("run_1Tz6Bn3Mq8Wr5Xe2"),
            agent: "claude-code",
            status: "running",
            started_at: "2026-11-22T10:02:11.907Z",
            completed_at: null
          }
        ]
      },
      review: {
        id: ReviewId.make("rev_5Gd2kLp9Xs0Qw3Er"),
        action: "request_changes",
        comment: "Add an example for the Windows install.",
        reviewer: "usr_6Vn1bR9eTy3Ka5Lq",
        created_at: "2026-11-22T10:02:11.907Z"
      },
      run_id: RunId.make("run_1Tz6Bn3Mq8Wr5Xe2")
    }
  ]
})
export type ReviewResult = typeof ReviewResult.Type

// ---------------------------------------------------------------------------------------------
// Agent reviews of GitHub pull requests

const repoMessage = () => "repo must be a GitHub repository as owner/name"

/** A GitHub repository as a client names it: `owner/name`. */
export const GitHubRepoName = Schema.String.pipe(
  Schema.maxLength(140, { message: repoMessage }),
  // The name may not be "." or "..": it goes into GitHub's URL paths.
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9-]{0,38}\/(?!\.\.?$)[A-Za-z0-9._-]{1,100}$/, {
    message: repoMessage,
    title: "GitHub repository",
    description:
      "A GitHub repository: its owner (letters, digits and '-', at most 39) and its name (letters, digits, '.', '_' and '-', at most 100), separated by '/'.",
    examples: ["octo-org/hello-world"]
  })
)

/** `POST /api/review/pr`. */
export const PullRequestReviewCreate = Schema.Struct({
  repo: GitHubRepoName,
  pr_number: WholeNumberIn("pr_number", 1, 2_147_483_647, "The pull request's number."),
  agent: AgentName,
  post: Schema.optional(
    Schema.Boolean.annotations({
      description: "Post the review to the pull request (as a COMMENT review) once the run completes. Default false."
    })
  ),
  // exact: a present value is checked against the literal alone, so the refusal says why.
  autonomy: Schema.optionalWith(
    Schema.Literal("read-only").annotations({
      message: () => "a review run is read-only: autonomy may only be read-only",
      description: "A review run is always read-only; the only value accepted."
    }),
    { exact: true }
  )
}).annotations({
  description: "Which pull request to review, with which agent, and whether to post the review to it.",
  examples: [{ repo: "octo-org/hello-world", pr_number: 42, agent: "claude-code", post: true }]
})
export type PullRequestReviewCreate = typeof PullRequestReviewCreate.Type

/** The answer to `POST /api/review/pr`: the run started, its task, the pull request and whether it will be posted. */
export const PullRequestReviewStarted = Schema.Struct({
  ...RunStarted.fields,
  pull_request: PullRequestRef,
  post: Schema.Boolean.annotations({
    description: "Whether the review is posted to the pull request once the run completes."
  })
}).annotations({
  description: "The review run just started, on a new task titled Review <owner>/<repo>#<n>.",
  examples: [
    {
      run_id: RunId.make("run_3Kp8Wq1Zr6Ty0Ub4"),
      task_id: TaskId.make(57),
      agent: "claude-code",
      status: "running",
      started_at: "2026-11-22T11:30:00.000Z",
      branch: "feature/greeting",
      autonomy: "read-only",
      pull_request: {
        repo: "octo-org/hello-world",
        number: 42,
        title: "Greet the user by name",
        head_sha: "6dcb09b5b57875f334f61aebed695e2e4193db5e",
        url: "https://github.com/octo-org/hello-world/pull/42"
      },
      post: true
    }
  ]
})
export type PullRequestReviewStarted = typeof PullRequestReviewStarted.Type
