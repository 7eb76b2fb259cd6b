/**
 * GitHub's REST API, as much of it as pull-request reviews need: a pull request, its diff, and
 * posting a review. Over `@effect/platform`'s `HttpClient`, against `TASKWRIGHT_GITHUB_API_URL`
 * (default `https://api.github.com`) with `GITHUB_TOKEN` as a Bearer token when one is set.
 *
 * Every failure is a {@link GitHubError} saying what GitHub answered, sorted into the kinds a
 * caller treats differently: not found, a token refused, a token without access, a rate limit
 * (with how long to wait), a request refused as invalid, or GitHub not answering as it should.
 */
import { HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Data, Duration, Effect, Either, Option, ParseResult, Redacted, Schema } from "effect"
import { TaskwrightConfig } from "../Config.js"

/** The public API, used when `TASKWRIGHT_GITHUB_API_URL` is not set. */
export const DEFAULT_GITHUB_API_URL = "https://api.github.com"

/** How long one request may take before GitHub counts as not answering. */
const REQUEST_TIMEOUT = Duration.seconds(30)
/** The longest piece of GitHub's own message an error quotes. */
const MAX_QUOTED = 300
/** Seconds to wait when a rate-limited answer says nothing about when to try again. */
const DEFAULT_RETRY_AFTER_S = 60

/**
 * Why a request to GitHub failed:
 * - `not_found`: 404 (GitHub also answers 404 for a private repository the token cannot see);
 * - `unauthorized`: 401, the token is invalid or expired;
 * - `forbidden`: 403 that is not a rate limit (the token lacks a permission);
 * - `rate_limited`: 429, or 403 with `x-ratelimit-remaining: 0` or a `retry-after`;
 * - `rejected`: another 4xx (422: a review GitHub will not take, 406: a diff too large to answer);
 * - `unavailable`: no answer, a timeout, a 5xx, or an answer that is not what the API documents.
 */
export type GitHubFailure = "not_found" | "unauthorized" | "forbidden" | "rate_limited" | "rejected" | "unavailable"

/** A request to GitHub failed; `message` says what GitHub answered, never the token. */
export class GitHubError extends Data.TaggedError("GitHubError")<{
  readonly kind: GitHubFailure
  /** GitHub's HTTP status; null when no answer came. */
  readonly status: number | null
  readonly message: string
  /** Seconds to wait before trying again (`rate_limited`, and `unavailable` when GitHub said). */
  readonly retryAfter: number | null
}> {}

/** A repository on GitHub, `owner/name`. */
export interface RepoRef {
  readonly owner: string
  readonly name: string
}

const GitHubRepository = Schema.Struct({
  full_name: Schema.String,
  clone_url: Schema.String
})

/** The fields of a pull request a review uses (GitHub's answer has many more). */
export const GitHubPullRequest = Schema.Struct({
  number: Schema.Number,
  title: Schema.String,
  body: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null }),
  state: Schema.String,
  html_url: Schema.String,
  head: Schema.Struct({
    sha: Schema.String,
    ref: Schema.String,
    // null when the fork the pull request came from was deleted
    repo: Schema.NullOr(GitHubRepository)
  }),
  base: Schema.Struct({
    sha: Schema.String,
    ref: Schema.String
  })
})
export type GitHubPullRequest = typeof GitHubPullRequest.Type

/** `POST /repos/{owner}/{repo}/pulls/{n}/reviews`, as Taskwright sends it: always a `COMMENT` review. */
export interface ReviewSubmission {
  /** The commit the comments' lines refer to. */
  readonly commitId: string
  readonly body: string
  readonly comments: ReadonlyArray<{ readonly path: string; readonly line: number; readonly body: string }>
}

const PostedReview = Schema.Struct({
  id: Schema.Number,
  html_url: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null })
})
export type PostedReview = typeof PostedReview.Type

const oneLine = (text: string, max = MAX_QUOTED): string => {
  const line = text.replace(/\s+/g, " ").trim()
  return line.length <= max ? line : `${line.slice(0, max - 1)}…`
}

/** GitHub's `message` from an error body (JSON `{message}`), or the start of the body as it is. */
export const githubMessage = (body: string): string => {
  try {
    const parsed: unknown = JSON.parse(body)
    if (typeof parsed === "object" && parsed !== null && "message" in parsed && typeof parsed.message === "string") {
      return oneLine(parsed.message)
    }
  } catch {
    // not JSON
  }
  return oneLine(body)
}

const header = (response: HttpClientResponse.HttpClientResponse, name: string): string | undefined =>
  response.headers[name]

/** Seconds until a rate limit lifts: `retry-after`, else `x-ratelimit-reset`, else a minute. */
const retryAfterOf = (response: HttpClientResponse.HttpClientResponse, nowMs: number): number => {
  const retryAfter = Number(header(response, "retry-after"))
  if (Number.isFinite(retryAfter) && retryAfter >= 0) return Math.max(1, Math.ceil(retryAfter))
  const reset = Number(header(response, "x-ratelimit-reset"))
  if (Number.isFinite(reset) && reset > 0) return Math.max(1, Math.ceil(reset - nowMs / 1000))
  return DEFAULT_RETRY_AFTER_S
}

/** The error for a non-2xx answer. */
export const classifyAnswer = (
  response: HttpClientResponse.HttpClientResponse,
  body: string,
  nowMs: number = Date.now()
): GitHubError => {
  const status = response.status
  const said = githubMessage(body)
  const quoted = said === "" ? `HTTP ${status}` : `HTTP ${status}: ${said}`
  const limited =
    status === 429 ||
    (status === 403 &&
      (header(response, "x-ratelimit-remaining") === "0" || header(response, "retry-after") !== undefined))
  if (limited) {
    return new GitHubError({ kind: "rate_limited", status, message: quoted, retryAfter: retryAfterOf(response, nowMs) })
  }
  const kind: GitHubFailure =
    status === 404 || status === 410
      ? "not_found"
      : status === 401
        ? "unauthorized"
        : status === 403
          ? "forbidden"
          : status >= 400 && status < 500
            ? "rejected"
            : "unavailable"
  const retry = Number(header(response, "retry-after"))
  return new GitHubError({
    kind,
    status,
    message: quoted,
    retryAfter: kind === "unavailable" && Number.isFinite(retry) && retry > 0 ? Math.ceil(retry) : null
  })
}

const unavailable = (message: string, status: number | null = null) =>
  new GitHubError({ kind: "unavailable", status, message, retryAfter: null })

/** The API's base URL without a trailing slash, or why it is not one. */
export const apiBaseUrl = (configured: string | undefined): Either.Either<string, string> => {
  const url = (configured ?? DEFAULT_GITHUB_API_URL).trim().replace(/\/+$/, "")
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return Either.left(`TASKWRIGHT_GITHUB_API_URL is not a URL: ${oneLine(url, 200)}`)
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") {
    return Either.left("TASKWRIGHT_GITHUB_API_URL must be an http:// or https:// URL")
  }
  if (parsed.username !== "" || parsed.password !== "" || parsed.search !== "" || parsed.hash !== "") {
    return Either.left("TASKWRIGHT_GITHUB_API_URL may not carry credentials, a query or a fragment")
  }
  return Either.right(url)
}

const pullPath = (repo: RepoRef, number: number) =>
  `/repos/${encodeURIComponent(repo.owner)}/${encodeURIComponent(repo.name)}/pulls/${number}`

/** What is decoded from an answer, as a readable reason when it does not fit. */
const decodeAnswer =
  <A, I>(schema: Schema.Schema<A, I>, what: string) =>
  (value: unknown): Effect.Effect<A, GitHubError> =>
    Effect.mapError(Schema.decodeUnknown(schema)(value), (error) =>
      unavailable(
        `GitHub's answer for ${what} is not what its API documents: ${oneLine(ParseResult.TreeFormatter.formatErrorSync(error))}`
      )
    )

export class GitHub extends Effect.Service<GitHub>()("@taskwright/core/GitHub", {
  effect: Effect.gen(function* () {
    const config = yield* TaskwrightConfig
    const base = apiBaseUrl(config.githubApiUrl)
    const token = Option.fromNullable(config.githubToken)
    // No trace headers go to GitHub: span ids are the service's own business.
    const client = HttpClient.withTracerPropagation(yield* HttpClient.HttpClient, false)

    const headers = (accept: string): Record<string, string> => ({
      accept,
      "user-agent": "taskwright",
      "x-github-api-version": "2022-11-28",
      ...Option.match(token, { onNone: () => ({}), onSome: (t) => ({ authorization: `Bearer ${Redacted.value(t)}` }) })
    })

    /** Sends a request and answers the body of a 2xx answer as text; anything else is a {@link GitHubError}. */
    const send = (build: (baseUrl: string) => HttpClientRequest.HttpClientRequest) =>
      Effect.gen(function* () {
        if (Either.isLeft(base)) return yield* unavailable(base.left)
        const response = yield* client.execute(build(base.right)).pipe(
          Effect.timeoutFail({
            duration: REQUEST_TIMEOUT,
            onTimeout: () => unavailable(`GitHub did not answer within ${Duration.format(REQUEST_TIMEOUT)}`)
          }),
          Effect.catchTag("RequestError", (error) =>
            Effect.fail(unavailable(`GitHub could not be reached: ${oneLine(error.message)}`))
          ),
          Effect.catchTag("ResponseError", (error) =>
            Effect.fail(unavailable(`GitHub's answer could not be read: ${oneLine(error.message)}`))
          )
        )
        const body = yield* response.text.pipe(
          Effect.timeoutFail({
            duration: REQUEST_TIMEOUT,
            onTimeout: () => unavailable("GitHub's answer did not arrive in time", response.status)
          }),
          Effect.catchTag("ResponseError", (error) =>
            Effect.fail(unavailable(`GitHub's answer could not be read: ${oneLine(error.message)}`, response.status))
          )
        )
        if (response.status < 200 || response.status >= 300) return yield* classifyAnswer(response, body)
        return body
      })

    const json = (body: string, what: string): Effect.Effect<unknown, GitHubError> =>
      Effect.try({
        try: () => JSON.parse(body) as unknown,
        catch: () => unavailable(`GitHub's answer for ${what} is not JSON`)
      })

    return {
      /** Whether a token is configured: posting a review needs one. */
      hasToken: Option.isSome(token),

      /** `GET /repos/{owner}/{repo}/pulls/{n}`. */
      pullRequest: (repo: RepoRef, number: number) =>
        send((url) =>
          HttpClientRequest.get(`${url}${pullPath(repo, number)}`, { headers: headers("application/vnd.github+json") })
        ).pipe(
          Effect.flatMap((body) => json(body, "the pull request")),
          Effect.flatMap(decodeAnswer(GitHubPullRequest, "the pull request")),
          Effect.withSpan("GitHub.pullRequest")
        ),

      /** The pull request's diff: the same URL with `Accept: application/vnd.github.diff`. */
      pullRequestDiff: (repo: RepoRef, number: number) =>
        send((url) =>
          HttpClientRequest.get(`${url}${pullPath(repo, number)}`, { headers: headers("application/vnd.github.diff") })
        ).pipe(Effect.withSpan("GitHub.pullRequestDiff")),

      /** `POST /repos/{owner}/{repo}/pulls/{n}/reviews` with `event: "COMMENT"`: answers the posted review. */
      createReview: (repo: RepoRef, number: number, review: ReviewSubmission) =>
        send((url) =>
          HttpClientRequest.post(`${url}${pullPath(repo, number)}/reviews`, {
            headers: headers("application/vnd.github+json")
          }).pipe(
            HttpClientRequest.bodyUnsafeJson({
              commit_id: review.commitId,
              body: review.body,
              event: "COMMENT",
              comments: review.comments.map((c) => ({ path: c.path, line: c.line, side: "RIGHT", body: c.body }))
            })
          )
        ).pipe(
          Effect.flatMap((body) => json(body, "the posted review")),
          Effect.flatMap(decodeAnswer(PostedReview, "the posted review")),
          Effect.withSpan("GitHub.createReview")
        )
    }
  })
}) {}
