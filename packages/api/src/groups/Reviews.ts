import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { PullRequestReviewCreate, PullRequestReviewStarted, ReviewCreate, ReviewResult } from "@taskwright/domain"
import { ErrorExamples, fieldExample, notFoundExample, ownedExample } from "../Documentation.js"
import { ConflictError, ForbiddenError, NotFoundError, RequestErrors } from "../Errors.js"
import { Authentication, RequiredScope } from "../Security.js"
import { capacityExample } from "./Runs.js"
import { TaskPath } from "./Tasks.js"

/** Reviews: a person's of a task's work, and an agent's of a GitHub pull request. */
export class ReviewsGroup extends HttpApiGroup.make("reviews")
  .add(
    HttpApiEndpoint.post("review", "/api/tasks/:id/review")
      .setPath(TaskPath)
      .setPayload(ReviewCreate)
      .addSuccess(ReviewResult)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(RequiredScope, "tasks:write")
      .annotate(ErrorExamples, {
        400: [
          fieldExample("An unknown action", "action", 'action must be one of "approve", "reject", "request_changes"')
        ],
        403: [ownedExample("task", 42)],
        404: [notFoundExample("task", 42)],
        409: [
          {
            summary: "The task is not in review",
            message: "task 42 is todo; only a task in_review can be reviewed",
            details: { reason: "not_in_review", status: "todo" }
          }
        ]
      })
      .annotate(OpenApi.Summary, "Review a task")
      .annotate(
        OpenApi.Description,
        "Reviews a task in_review (any other status is 409): approve moves it to done, reject to backlog, request_changes to in_progress, and with a comment starts a follow-up run of the same agent on the same branch with the comment in its prompt (run_id). If that run cannot start, the review is taken back and the run's error answered. Needs tasks:write."
      )
  )
  .add(
    HttpApiEndpoint.post("pullRequest", "/api/review/pr")
      .setPayload(PullRequestReviewCreate)
      .addSuccess(PullRequestReviewStarted, { status: 202 })
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(RequiredScope, "agents:run")
      .annotate(ErrorExamples, {
        400: [fieldExample("No repository named", "repo", "repo is required")],
        403: [
          {
            summary: "GitHub refused the service's token",
            message:
              "GitHub refused the service's token (GITHUB_TOKEN is invalid or expired) reading pull request acme/app#7: Bad credentials",
            details: { reason: "github_unauthorized" }
          }
        ],
        404: [
          {
            summary: "GitHub has no such pull request",
            message: "pull request acme/app#7 not found on GitHub",
            details: { reason: "github_not_found", resource: "pull_request", id: "acme/app#7" }
          }
        ],
        409: [
          capacityExample,
          {
            summary: "The pull request's fork is gone",
            message:
              "the head repository of pull request acme/app#7 is gone from GitHub (its fork was deleted): there is nothing to check out",
            details: { reason: "head_repository_gone" }
          }
        ]
      })
      .annotate(OpenApi.Summary, "Review a GitHub pull request with an agent")
      .annotate(
        OpenApi.Description,
        "Reads the pull request and its diff from GitHub (the service's TASKWRIGHT_GITHUB_API_URL and GITHUB_TOKEN), creates a task titled Review <owner>/<repo>#<n> (the caller's, in no project) and starts a read-only run of the agent on the pull request's head commit, cloned into the run's worktree and mounted read-only in its sandbox. The agent's answer (its last fenced json block {summary, verdict, comments:[{path, line, body}]}, or without one its final message as the summary) becomes the run's output.review; an answer whose json block is malformed fails the run, with the reason in its log. With post: true the review is posted to the pull request as a COMMENT review once the run completes, and output.review.posted says how that went. Nothing is committed; the checkout is removed at the end. GitHub's answers come back as: 404 when it has no such pull request (github_not_found), 403 when it refuses the service's token or the token lacks access (github_unauthorized, github_forbidden), 429 with Retry-After when its rate limit is spent (github_rate_limited), 503 when it cannot be reached or answers with an error (github_unavailable) or the head commit cannot be cloned (clone_failed); nothing is created then. 400 for post: true on a service without GITHUB_TOKEN (github_token_missing) or an unknown or disabled agent; 409 when the service is at its limit of concurrent runs (capacity) or the pull request's fork was deleted (head_repository_gone); 503 when runs cannot be sandboxed on this host. Needs agents:run."
      )
  )
  .middleware(Authentication)
  .addError(RequestErrors)
  .addError(ForbiddenError)
  .annotate(
    OpenApi.Description,
    "Reviews: a person's verdict on an agent's work, and an agent's review of a GitHub pull request."
  ) {}
