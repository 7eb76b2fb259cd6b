/**
 * A fake GitHub REST API on a loopback port, for the pull-request review suites: it answers
 * `GET /repos/{owner}/{repo}/pulls/{n}` (JSON, or the diff with `Accept: application/vnd.github.diff`)
 * and `POST /repos/{owner}/{repo}/pulls/{n}/reviews` in GitHub's documented shapes, checks the
 * Bearer token as GitHub does (401 `Bad credentials`), and records every request it gets.
 *
 * Pull requests are real: a git repository made by the test, with the head on a branch, served
 * as a `file://` clone URL.
 */
import { writeFileSync } from "node:fs"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { git, makeRepo } from "@taskwright/testing"

/** One request the fake received. */
export interface Received {
  readonly method: string
  readonly path: string
  readonly headers: IncomingMessage["headers"]
  readonly body: string
}

/** A pull request the fake serves, and how it answers for it. */
export interface FakePullRequest {
  readonly repo: string
  readonly number: number
  readonly title: string
  readonly body: string | null
  readonly headRef: string
  readonly headSha: string
  readonly baseRef: string
  readonly baseSha: string
  readonly cloneUrl: string
  readonly diff: string
  /** `path:line` of the lines a review comment may be on (those the diff shows); GitHub answers 422 for others. */
  readonly commentable: ReadonlyArray<string>
}

/** A canned answer for a path, instead of the pull request's (rate limits, outages). */
export interface CannedAnswer {
  readonly status: number
  readonly headers?: Record<string, string>
  readonly body: unknown
}

export interface FakeGitHub {
  readonly url: string
  readonly received: Array<Received>
  /** The token GitHub accepts; any other (or none) is 401. */
  token: string
  /** The id the next posted review gets. */
  nextReviewId: number
  readonly pulls: Map<string, FakePullRequest>
  /** Answers by `METHOD path accept` or `METHOD path`, taking precedence over everything else. */
  readonly canned: Map<string, CannedAnswer>
  /** The reviews posted, by `owner/repo#n`. */
  readonly posted: Map<string, Array<Record<string, unknown>>>
  close(): Promise<void>
}

const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  const text = typeof body === "string" ? body : JSON.stringify(body)
  res.writeHead(status, {
    "content-type": typeof body === "string" ? "text/plain; charset=utf-8" : "application/json; charset=utf-8",
    "x-ratelimit-limit": "5000",
    "x-ratelimit-remaining": "4999",
    ...headers
  })
  res.end(text)
}

const pullJson = (pr: FakePullRequest) => {
  const [owner = "", name = ""] = pr.repo.split("/")
  return {
    url: `https://api.github.test/repos/${pr.repo}/pulls/${pr.number}`,
    id: 1000 + pr.number,
    number: pr.number,
    state: "open",
    title: pr.title,
    body: pr.body,
    html_url: `https://github.test/${pr.repo}/pull/${pr.number}`,
    user: { login: "contributor", id: 7 },
    head: {
      label: `contributor:${pr.headRef}`,
      ref: pr.headRef,
      sha: pr.headSha,
      repo: { id: 2, name, full_name: pr.repo, owner: { login: owner }, clone_url: pr.cloneUrl }
    },
    base: {
      label: `${owner}:${pr.baseRef}`,
      ref: pr.baseRef,
      sha: pr.baseSha,
      repo: { id: 1, name, full_name: pr.repo, owner: { login: owner }, clone_url: pr.cloneUrl }
    },
    draft: false,
    merged: false
  }
}

/** Starts the fake on a loopback port. */
export const startFakeGitHub = async (token: string): Promise<FakeGitHub> => {
  const received: Array<Received> = []
  const pulls = new Map<string, FakePullRequest>()
  const canned = new Map<string, CannedAnswer>()
  const posted = new Map<string, Array<Record<string, unknown>>>()
  const state = { token, nextReviewId: 4242 }

  const handle = (req: IncomingMessage, res: ServerResponse, body: string) => {
    const path = (req.url ?? "/").split("?")[0] ?? "/"
    received.push({ method: req.method ?? "GET", path, headers: req.headers, body })
    const answer = canned.get(`${req.method} ${path} ${req.headers.accept}`) ?? canned.get(`${req.method} ${path}`)
    if (answer !== undefined) return send(res, answer.status, answer.body, answer.headers)
    if (req.headers.authorization !== `Bearer ${state.token}`) {
      return send(res, 401, { message: "Bad credentials", documentation_url: "https://docs.github.com/rest" })
    }
    const match = /^\/repos\/([^/]+)\/([^/]+)\/pulls\/(\d+)(\/reviews)?$/.exec(path)
    const pr = match === null ? undefined : pulls.get(`${match[1]}/${match[2]}#${match[3]}`)
    if (match === null || pr === undefined) {
      return send(res, 404, { message: "Not Found", documentation_url: "https://docs.github.com/rest" })
    }
    if (match[4] === undefined && req.method === "GET") {
      if (req.headers.accept === "application/vnd.github.diff") return send(res, 200, pr.diff)
      return send(res, 200, pullJson(pr))
    }
    if (match[4] !== undefined && req.method === "POST") {
      const review = JSON.parse(body) as Record<string, unknown>
      const comments = (review.comments ?? []) as ReadonlyArray<{ path: string; line: number }>
      if (comments.some((c) => !pr.commentable.includes(`${c.path}:${c.line}`))) {
        return send(res, 422, {
          message: "Unprocessable Entity",
          errors: ["Pull request review thread line must be part of the diff"],
          documentation_url: "https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request"
        })
      }
      const key = `${pr.repo}#${pr.number}`
      posted.set(key, [...(posted.get(key) ?? []), review])
      const id = state.nextReviewId++
      return send(res, 200, {
        id,
        user: { login: "taskwright-bot" },
        body: review.body,
        state: "COMMENTED",
        html_url: `https://github.test/${pr.repo}/pull/${pr.number}#pullrequestreview-${id}`,
        commit_id: review.commit_id
      })
    }
    return send(res, 404, { message: "Not Found" })
  }

  const server: Server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => handle(req, res, Buffer.concat(chunks).toString("utf8")))
  })
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    get token() {
      return state.token
    },
    set token(value: string) {
      state.token = value
    },
    get nextReviewId() {
      return state.nextReviewId
    },
    set nextReviewId(value: number) {
      state.nextReviewId = value
    },
    pulls,
    canned,
    posted,
    close: () => new Promise<void>((done) => server.close(() => done()))
  }
}

/**
 * A repository with a pull request's worth of history: `main` with the default files, and
 * `headRef` one commit ahead changing `src/app.ts` and adding `src/greet.ts`. Answers the pull
 * request as the fake serves it (its diff as `git diff main...head` prints it).
 */
export const makePullRequest = async (options: {
  readonly repo: string
  readonly number: number
  readonly title?: string
  readonly body?: string | null
  readonly headRef?: string
}): Promise<FakePullRequest & { readonly dir: string }> => {
  const dir = await makeRepo({
    "README.md": "# Hello\n\nA greeting.\n",
    "src/app.ts": "export const a = 1\nexport const b = 2\nexport const c = 3\n"
  })
  const headRef = options.headRef ?? "feature/greeting"
  const baseSha = git(dir, "rev-parse", "HEAD").trim()
  git(dir, "checkout", "-q", "-b", headRef)
  writeFileSync(`${dir}/src/app.ts`, "export const a = 1\nexport const b = 20\nexport const c = 3\n")
  writeFileSync(`${dir}/src/greet.ts`, "export const greet = (name: string) => 'Hello, ' + name\n")
  git(dir, "add", "-A")
  git(dir, "commit", "-q", "-m", "Greet by name")
  const headSha = git(dir, "rev-parse", "HEAD").trim()
  git(dir, "checkout", "-q", "main")
  return {
    dir,
    repo: options.repo,
    number: options.number,
    title: options.title ?? "Greet the user by name",
    body: options.body === undefined ? "Adds `greet`, and changes `b`." : options.body,
    headRef,
    headSha,
    baseRef: "main",
    baseSha,
    cloneUrl: `file://${dir}`,
    diff: git(dir, "diff", `main...${headRef}`),
    commentable: ["src/app.ts:1", "src/app.ts:2", "src/app.ts:3", "src/greet.ts:1"]
  }
}
