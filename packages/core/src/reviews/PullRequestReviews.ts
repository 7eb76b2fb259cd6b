/**
 * Agent reviews of GitHub pull requests (`POST /api/review/pr`): read the pull request and its
 * diff from GitHub, start a read-only review run on its head commit, read the agent's answer into
 * the run's `output.review`, and with `post: true` post it to the pull request.
 *
 * Everything that can go wrong before the run starts is answered to the caller as a 4xx naming
 * the cause (a pull request GitHub does not have, a token it refuses, its rate limit), or 503 when
 * GitHub cannot be reached or answers nonsense; nothing is created then. What goes wrong after
 * (an answer that is not a review, a review GitHub will not take) is in the run's log and output.
 */
import {
  type Actor,
  BadRequest,
  Conflict,
  decoder,
  Forbidden,
  NotFound,
  type PullRequestRef,
  PullRequestReviewCreate,
  type PullRequestReviewStarted,
  RateLimited,
  type ReviewComment,
  type ReviewPosting,
  type RunReview,
  ServiceUnavailable,
  validateBranchName
} from "@taskwright/domain"
import { Effect, Either } from "effect"
import { Agents } from "../agents/Agents.js"
import { TaskwrightConfig } from "../Config.js"
import { fn } from "../domain/Traced.js"
import {
  apiBaseUrl,
  DEFAULT_GITHUB_API_URL,
  GitHub,
  type GitHubError,
  type GitHubPullRequest,
  type RepoRef
} from "../github/GitHub.js"
import { validateGitUrl } from "../runs/GitWorkspace.js"
import { sanitizeMessage } from "../runs/RunLog.js"
import { type ReviewConcluder, Runs } from "../runs/Runs.js"
import { buildReviewPrompt, commentableLines, readReviewAnswer, reviewBody } from "./ReviewAnswer.js"

const decodeCreate = decoder(PullRequestReviewCreate, "body")

const SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/

/** Seconds a client is told to wait when GitHub did not say. */
const GITHUB_RETRY_AFTER_S = 30

/**
 * A failed request to GitHub as the caller sees it: 404 for a pull request GitHub does not have,
 * 403 for a token GitHub refuses or that lacks access, 429 for GitHub's rate limit (with
 * `retry_after`), and 503 when GitHub cannot be reached or answers what its API does not document.
 */
export const githubApiError = (what: string) => (error: GitHubError) => {
  switch (error.kind) {
    case "not_found":
      return new NotFound({
        message: `${what} not found on GitHub`,
        details: { reason: "github_not_found", resource: "pull_request", id: what.replace(/^pull request /, "") }
      })
    case "unauthorized":
      return new Forbidden({
        message: `GitHub refused the service's token (GITHUB_TOKEN is invalid or expired) reading ${what}: ${error.message}`,
        details: { reason: "github_unauthorized" }
      })
    case "forbidden":
      return new Forbidden({
        message: `GitHub denied the service's token access to ${what}: ${error.message}`,
        details: { reason: "github_forbidden" }
      })
    case "rate_limited": {
      const retryAfter = error.retryAfter ?? GITHUB_RETRY_AFTER_S
      return new RateLimited({
        message: `GitHub's rate limit for the service's token is spent (reading ${what}); retry after ${retryAfter} s: ${error.message}`,
        details: { reason: "github_rate_limited", retry_after: retryAfter }
      })
    }
    case "rejected":
    case "unavailable":
      return new ServiceUnavailable({
        message: `GitHub did not answer for ${what} as it should: ${error.message}`,
        details: { reason: "github_unavailable", retry_after: error.retryAfter ?? GITHUB_RETRY_AFTER_S }
      })
  }
}

/** Why a review could not be posted, in words, for the run's log and `output.review.posted`. */
const postFailure = (error: GitHubError, pullRequest: string): string => {
  switch (error.kind) {
    case "not_found":
      return `GitHub has no pull request ${pullRequest}, or the service's token cannot see it: ${error.message}`
    case "unauthorized":
      return `GitHub refused the service's token (GITHUB_TOKEN is invalid or expired): ${error.message}`
    case "forbidden":
      return `the service's token may not post reviews on ${pullRequest}: ${error.message}`
    case "rate_limited":
      return `GitHub's rate limit for the service's token is spent (it lifts in ${error.retryAfter ?? GITHUB_RETRY_AFTER_S} s): ${error.message}`
    case "rejected":
      return `GitHub refused the review: ${error.message}`
    case "unavailable":
      return `GitHub did not answer as it should: ${error.message}`
  }
}

const unexpected = (message: string) =>
  new ServiceUnavailable({ message, details: { reason: "github_unavailable", retry_after: GITHUB_RETRY_AFTER_S } })

const cut = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max - 1)}…`)

/**
 * The clone URL of a pull request's head, if Taskwright uses it: https always; `file://` only when
 * the operator pointed `TASKWRIGHT_GITHUB_API_URL` at an API of their own (the public API never
 * answers one, so from it a file URL can only be a trick to read the host's repositories).
 */
const checkCloneUrl = (url: string, operatorApi: boolean): string | null => {
  const invalid = validateGitUrl(url)
  if (invalid !== null) return invalid
  if (url.startsWith("https://")) return null
  if (url.startsWith("file://") && operatorApi) return null
  return operatorApi
    ? "the clone URL must be https:// or file://"
    : "the clone URL must be https:// (file:// only from an API set in TASKWRIGHT_GITHUB_API_URL)"
}

/** The part of the flow that needs the engine's services, resolved once. */
export const makePullRequestReviews = Effect.gen(function* () {
  const github = yield* GitHub
  const agents = yield* Agents
  const runs = yield* Runs
  const config = yield* TaskwrightConfig
  const base = apiBaseUrl(config.githubApiUrl)
  const operatorApi = Either.isRight(base) && base.right !== DEFAULT_GITHUB_API_URL

  /** Posts a review; comments outside the diff (or all, if GitHub refuses them) go in its body. Never fails. */
  const post = (
    ref: RepoRef,
    pr: PullRequestRef,
    diff: string | null,
    review: RunReview,
    footer: string,
    note: (level: "info" | "warn" | "error", message: string) => void
  ) =>
    Effect.gen(function* () {
      const lines = diff === null ? null : commentableLines(diff)
      const placeable = (c: ReviewComment) => lines === null || (lines.get(c.path)?.has(c.line) ?? false)
      const attempt = (inline: ReadonlyArray<ReviewComment>, outside: ReadonlyArray<ReviewComment>) =>
        Effect.either(
          github.createReview(ref, pr.number, {
            commitId: pr.head_sha,
            body: reviewBody({ summary: review.summary, verdict: review.verdict, outside, footer }),
            comments: inline
          })
        )
      let inline = review.comments.filter(placeable)
      const outside = review.comments.filter((c) => !placeable(c))
      if (outside.length > 0) {
        note("info", `${outside.length} comment(s) are on lines outside the diff: they go in the review's body`)
      }
      let result = yield* attempt(inline, outside)
      if (Either.isLeft(result) && result.left.kind === "rejected" && inline.length > 0) {
        note(
          "warn",
          `GitHub refused the review's line comments (${result.left.message}); posting them in its body instead`
        )
        inline = []
        result = yield* attempt([], review.comments)
      }
      if (Either.isRight(result)) {
        const url = result.right.html_url
        note("info", `Posted the review to ${pr.repo}#${pr.number}${url === null ? "" : `: ${url}`}`)
        return {
          status: "posted",
          review_id: result.right.id,
          url,
          inline_comments: inline.length,
          error: null
        } satisfies ReviewPosting
      }
      const why = postFailure(result.left, `${pr.repo}#${pr.number}`)
      note("error", `Could not post the review: ${why}`)
      return {
        status: "failed",
        review_id: null,
        url: null,
        inline_comments: 0,
        error: cut(why, 2000)
      } satisfies ReviewPosting
    })

  return fn("Reviews.pullRequest")(function* (actor: Actor, body: unknown) {
    const input = yield* decodeCreate(body)
    const postIt = input.post === true
    if (postIt && !github.hasToken) {
      return yield* new BadRequest({
        message: "post: true needs a GitHub token, and the service has none: its operator sets GITHUB_TOKEN",
        details: { reason: "github_token_missing" }
      })
    }
    const agent = yield* agents.resolve(input.agent)
    // Before asking GitHub anything: a run could start now.
    yield* runs.admission
    const [owner = "", name = ""] = input.repo.split("/")
    const ref: RepoRef = { owner, name }
    const what = `pull request ${input.repo}#${input.pr_number}`
    const pr: GitHubPullRequest = yield* github
      .pullRequest(ref, input.pr_number)
      .pipe(Effect.mapError(githubApiError(what)))
    // GitHub answers 406 for a diff too large to show: the agent then compares the commits itself.
    const diff = yield* github.pullRequestDiff(ref, input.pr_number).pipe(
      Effect.map((text): string | null => text),
      Effect.catchIf(
        (error) => error.kind === "rejected",
        () => Effect.succeed(null)
      ),
      Effect.mapError(githubApiError(what))
    )
    const head = pr.head.repo
    if (head === null) {
      return yield* new Conflict({
        message: `the head repository of ${what} is gone from GitHub (its fork was deleted): there is nothing to check out`,
        details: { reason: "head_repository_gone" }
      })
    }
    if (!SHA.test(pr.head.sha)) return yield* unexpected(`GitHub answered a head commit for ${what} that is not a sha`)
    const refused = checkCloneUrl(head.clone_url, operatorApi)
    if (refused !== null) {
      return yield* unexpected(`GitHub answered a clone URL for ${what} that Taskwright does not use: ${refused}`)
    }
    const pullRequest: PullRequestRef = {
      repo: input.repo,
      number: input.pr_number,
      // GitHub's text goes to the store: neither a NUL nor half a surrogate pair, which PostgreSQL refuses.
      title: sanitizeMessage(cut(pr.title, 1024)),
      head_sha: pr.head.sha,
      url: sanitizeMessage(cut(pr.html_url, 2048))
    }
    const branch = validateBranchName(pr.head.ref) === null ? pr.head.ref : `pull/${input.pr_number}`
    const conclude: ReviewConcluder = (answer, run) =>
      Effect.gen(function* () {
        const read = readReviewAnswer(answer)
        if (Either.isLeft(read)) return yield* Effect.fail({ reason: read.left })
        for (const remark of read.right.notes) run.note("warn", remark)
        const { summary, verdict, comments } = read.right
        run.note("info", `Review: verdict ${verdict}, ${comments.length} comment(s)`)
        const review: RunReview = { summary, verdict, comments, pull_request: pullRequest }
        if (!postIt) return review
        const footer = `Reviewed by the ${agent.name} agent in Taskwright run ${run.id}.`
        const posted = yield* post(ref, pullRequest, diff, review, footer, run.note)
        return { ...review, posted }
      })
    const started = yield* runs.startReview(actor, {
      title: `Review ${input.repo}#${input.pr_number}`,
      description: cut(
        `Agent review of pull request ${pullRequest.url}: ${pullRequest.title} (head ${pr.head.sha}).` +
          `${postIt ? " The review is posted to the pull request when the run completes." : ""}`,
        10_000
      ),
      agent,
      // An argument or a variable cannot hold a NUL: the prompt travels in both.
      prompt: sanitizeMessage(
        buildReviewPrompt({
          repo: input.repo,
          number: input.pr_number,
          title: pr.title,
          body: pr.body,
          headRef: pr.head.ref,
          headSha: pr.head.sha,
          baseRef: pr.base.ref,
          baseSha: pr.base.sha,
          diff
        })
      ),
      branch,
      cloneUrl: head.clone_url,
      commit: pr.head.sha,
      conclude
    })
    return { ...started, pull_request: pullRequest, post: postIt } satisfies PullRequestReviewStarted
  })
})
