/**
 * The GitHub client against a local server answering as GitHub does: what it sends (the token,
 * the media types, no trace headers, the review's JSON), what it decodes, and how each kind of
 * refusal is sorted (not found, a refused token, a token without access, primary and secondary rate
 * limits with their waits, a rejected request, an outage, nonsense, no answer at all).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { FetchHttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer, Option, Redacted } from "effect"
import { afterAll, beforeAll } from "vitest"
import { TaskwrightConfig, type TaskwrightSettings } from "../../src/Config.js"
import { GitHub, type GitHubError } from "../../src/github/GitHub.js"

interface Seen {
  readonly method: string
  readonly url: string
  readonly headers: IncomingMessage["headers"]
  readonly body: string
}

type Responder = (req: Seen, res: ServerResponse) => void

let server: Server
let base = ""
let respond: Responder = (_req, res) => res.end()
const seen: Array<Seen> = []

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const entry = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString()
      }
      seen.push(entry)
      respond(entry, res)
    })
  })
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(() => new Promise<void>((done) => server.close(() => done())))

const json =
  (status: number, body: unknown, headers: Record<string, string> = {}): Responder =>
  (_req, res) => {
    res.writeHead(status, { "content-type": "application/json", ...headers })
    res.end(JSON.stringify(body))
  }

const settings = (github: Partial<Pick<TaskwrightSettings, "githubApiUrl" | "githubToken">>): TaskwrightSettings => ({
  dataDir: "/nonexistent",
  databaseUrl: Option.none(),
  projectsRoot: Option.none(),
  maxRuns: 1,
  ...github
})

const withGitHub = <A, E>(
  use: (github: GitHub) => Effect.Effect<A, E>,
  github: Partial<Pick<TaskwrightSettings, "githubApiUrl" | "githubToken">> = {
    githubApiUrl: `${base}/api/v3/`,
    githubToken: Redacted.make("ghp_secret")
  }
) =>
  Effect.flatMap(GitHub, use).pipe(
    Effect.provide(
      GitHub.Default.pipe(
        Layer.provide(Layer.mergeAll(FetchHttpClient.layer, TaskwrightConfig.layer(settings(github))))
      )
    )
  )

const PULL = {
  number: 7,
  title: "Greet",
  body: null,
  state: "open",
  html_url: "https://github.test/o/r/pull/7",
  head: { sha: "a".repeat(40), ref: "feature", repo: { full_name: "o/r", clone_url: "https://github.test/o/r.git" } },
  base: { sha: "b".repeat(40), ref: "main", repo: { full_name: "o/r", clone_url: "https://github.test/o/r.git" } },
  extra: { ignored: true }
}

const failure = (answer: Responder) =>
  Effect.gen(function* () {
    respond = answer
    const result = yield* withGitHub((github) => Effect.either(github.pullRequest({ owner: "o", name: "r" }, 7)))
    if (Either.isRight(result)) throw new Error("expected a failure")
    return result.left
  })

const expectFailure = (error: GitHubError, kind: GitHubError["kind"], retryAfter: number | null = null) => {
  assert.strictEqual(error.kind, kind, error.message)
  assert.strictEqual(error.retryAfter, retryAfter)
  assert.notInclude(error.message, "ghp_secret")
}

describe("GitHub", () => {
  it.effect("reads a pull request under the API's base path, with the token and GitHub's media type", () =>
    Effect.gen(function* () {
      respond = json(200, PULL)
      seen.length = 0
      const pr = yield* withGitHub((github) => github.pullRequest({ owner: "o", name: "r.js" }, 7))
      assert.deepStrictEqual(pr, {
        number: 7,
        title: "Greet",
        body: null,
        state: "open",
        html_url: PULL.html_url,
        head: PULL.head,
        base: { sha: PULL.base.sha, ref: "main" }
      })
      const request = seen[0]
      assert.strictEqual(request?.method, "GET")
      assert.strictEqual(request?.url, "/api/v3/repos/o/r.js/pulls/7")
      assert.strictEqual(request?.headers.authorization, "Bearer ghp_secret")
      assert.strictEqual(request?.headers.accept, "application/vnd.github+json")
      assert.strictEqual(request?.headers["user-agent"], "taskwright")
      assert.strictEqual(request?.headers["x-github-api-version"], "2022-11-28")
      assert.isUndefined(request?.headers.traceparent)
      assert.isUndefined(request?.headers.b3)
    })
  )

  it.effect("asks for the diff with the diff media type, and sends no token when none is set", () =>
    Effect.gen(function* () {
      respond = (_req, res) => res.end("diff --git a/x b/x\n")
      seen.length = 0
      const diff = yield* withGitHub((github) => github.pullRequestDiff({ owner: "o", name: "r" }, 7), {
        githubApiUrl: base
      })
      assert.strictEqual(diff, "diff --git a/x b/x\n")
      assert.strictEqual(seen[0]?.headers.accept, "application/vnd.github.diff")
      assert.isUndefined(seen[0]?.headers.authorization)
    })
  )

  it.effect("posts a COMMENT review with its comments on the right side, and answers its id and URL", () =>
    Effect.gen(function* () {
      respond = json(200, {
        id: 99,
        html_url: "https://github.test/o/r/pull/7#pullrequestreview-99",
        state: "COMMENTED"
      })
      seen.length = 0
      const posted = yield* withGitHub((github) =>
        github.createReview({ owner: "o", name: "r" }, 7, {
          commitId: "a".repeat(40),
          body: "Summary",
          comments: [{ path: "src/a.ts", line: 3, body: "Nit" }]
        })
      )
      assert.deepStrictEqual(posted, { id: 99, html_url: "https://github.test/o/r/pull/7#pullrequestreview-99" })
      assert.strictEqual(seen[0]?.method, "POST")
      assert.strictEqual(seen[0]?.url, "/api/v3/repos/o/r/pulls/7/reviews")
      assert.deepStrictEqual(JSON.parse(seen[0]?.body ?? ""), {
        commit_id: "a".repeat(40),
        body: "Summary",
        event: "COMMENT",
        comments: [{ path: "src/a.ts", line: 3, side: "RIGHT", body: "Nit" }]
      })
    })
  )

  it.effect("sorts GitHub's refusals by what a caller does about them", () =>
    Effect.gen(function* () {
      const missing = yield* failure(json(404, { message: "Not Found" }))
      expectFailure(missing, "not_found")
      assert.strictEqual(missing.message, "HTTP 404: Not Found")
      expectFailure(yield* failure(json(401, { message: "Bad credentials" })), "unauthorized")
      expectFailure(yield* failure(json(403, { message: "Must have admin rights" })), "forbidden")
      const reset = Math.floor(Date.now() / 1000) + 90
      const primary = yield* failure(
        json(
          403,
          { message: "API rate limit exceeded" },
          { "x-ratelimit-remaining": "0", "x-ratelimit-reset": `${reset}` }
        )
      )
      assert.strictEqual(primary.kind, "rate_limited")
      assert.isTrue((primary.retryAfter ?? 0) > 80 && (primary.retryAfter ?? 0) <= 91, String(primary.retryAfter))
      expectFailure(
        yield* failure(json(403, { message: "secondary rate limit" }, { "retry-after": "42" })),
        "rate_limited",
        42
      )
      expectFailure(yield* failure(json(429, { message: "slow down" })), "rate_limited", 60)
      expectFailure(yield* failure(json(422, { message: "Validation Failed" })), "rejected")
      expectFailure(yield* failure(json(503, { message: "down" }, { "retry-after": "5" })), "unavailable", 5)
      const html = yield* failure((_req, res) => {
        res.writeHead(502, { "content-type": "text/html" })
        res.end("<html>\n  Bad   gateway\n</html>")
      })
      expectFailure(html, "unavailable")
      assert.strictEqual(html.message, "HTTP 502: <html> Bad gateway </html>")
      const notJson = yield* failure((_req, res) => res.end("not json"))
      expectFailure(notJson, "unavailable")
      assert.include(notJson.message, "is not JSON")
      const nonsense = yield* failure(json(200, { number: 7 }))
      expectFailure(nonsense, "unavailable")
      assert.include(nonsense.message, "not what its API documents")
    })
  )

  it.effect("no answer, and a base URL that is not one, are GitHub being unavailable", () =>
    Effect.gen(function* () {
      const closed = createServer()
      yield* Effect.promise(() => new Promise<void>((done) => closed.listen(0, "127.0.0.1", done)))
      const port = (closed.address() as AddressInfo).port
      yield* Effect.promise(() => new Promise<void>((done) => closed.close(() => done())))
      const unreachable = yield* withGitHub((github) => Effect.flip(github.pullRequest({ owner: "o", name: "r" }, 1)), {
        githubApiUrl: `http://127.0.0.1:${port}`
      })
      expectFailure(unreachable, "unavailable")
      assert.include(unreachable.message, "GitHub could not be reached")
      for (const url of ["ftp://example.test", "not a url", "https://user:pw@example.test"]) {
        const refused = yield* withGitHub((github) => Effect.flip(github.pullRequest({ owner: "o", name: "r" }, 1)), {
          githubApiUrl: url
        })
        expectFailure(refused, "unavailable")
        assert.include(refused.message, "TASKWRIGHT_GITHUB_API_URL")
        assert.notInclude(refused.message, "pw")
      }
    })
  )
})
