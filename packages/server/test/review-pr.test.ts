/**
 * Agent reviews of GitHub pull requests, `POST /api/review/pr`, end to end on every store against
 * a fake GitHub on loopback (the documented REST shapes; `file://` clone URLs of repositories made
 * here): the review in the run's `output.review` and, with `post: true`, on the fake with the
 * service's token; the checkout read-only in the sandbox and removed at the end; an answer without
 * a json block, a malformed one; GitHub's 404, 401, rate limits and outages as clear answers with
 * nothing started; bad bodies; the run limit and stop; a review run a killed server left behind;
 * and the in-process face.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import {
  createHarness,
  type Harness,
  type Script,
  scriptEnv,
  scriptedAgentArgv,
  scriptedAgentPath,
  startTestServer,
  type TestServer,
  type TestUser,
  testStores
} from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type FakeGitHub, type FakePullRequest, makePullRequest, startFakeGitHub } from "./fake-github.js"
import {
  allLogs,
  configureAgent,
  expectError,
  getRun,
  type RunView,
  scriptedAgent,
  waitFor,
  waitForEnd
} from "./runs-helpers.js"
import {
  client,
  ensureBuilt,
  killServer,
  makeStore,
  type ServerProcess,
  serverEnv,
  startServer
} from "./runs-server.js"

const TOKEN = "ghp_FakeTokenForTheTests0123456789abcdef"
const REPO = "octo-org/hello"

/**
 * An agent that reads the checkout and reports what it saw (the prompt, a file of the head, whether
 * it may write, git's HEAD, whether the GitHub token reached it), then answers `REVIEW_JSON` in a
 * fenced json block.
 */
const READER = `
const fs = require("node:fs")
const { execFileSync } = require("node:child_process")
for (const line of fs.readFileSync(0, "utf8").split("\\n")) console.log("prompt| " + line)
console.log("file " + JSON.stringify(fs.readFileSync("src/app.ts", "utf8")))
try { fs.writeFileSync("touched.txt", "x"); console.log("write allowed") } catch (e) { console.log("write refused " + e.code) }
console.log("head " + execFileSync("git", ["rev-parse", "HEAD"], { encoding: "utf8" }).trim())
console.log("token " + (process.env.GITHUB_TOKEN === undefined ? "absent" : "present"))
console.log("autonomy " + process.env.TASKWRIGHT_AUTONOMY)
console.log("Here is my review.")
console.log("\`\`\`json")
console.log(process.env.REVIEW_JSON)
console.log("\`\`\`")
`

const REVIEW = {
  summary: "Changes `b` from 2 to 20 without saying why.",
  verdict: "request_changes",
  comments: [
    { path: "src/app.ts", line: 2, body: "Why 20? Add a test." },
    { path: "README.md", line: 1, body: "Mention `greet` in the README." }
  ]
}

interface Started {
  readonly run_id: string
  readonly task_id: number
  readonly agent: string
  readonly status: string
  readonly branch: string
  readonly autonomy: string
  readonly pull_request: Record<string, unknown>
  readonly post: boolean
}

interface ReviewOutput {
  readonly summary: string
  readonly verdict: string
  readonly comments: ReadonlyArray<{ path: string; line: number; body: string }>
  readonly pull_request: Record<string, unknown>
  readonly posted?: Record<string, unknown>
}

const reviewOf = (run: RunView) => (run.output as RunView["output"] & { review?: ReviewOutput }).review

describe.each(testStores())("pull-request reviews on %s", (store) => {
  let s: TestServer
  let gh: FakeGitHub
  let alice: TestUser
  let bob: TestUser
  let pr: FakePullRequest & { readonly dir: string }
  const dirs: Array<string> = []
  const tokenBefore = process.env.GITHUB_TOKEN

  /** The pull request as the answer and the review show it. */
  const pullRequest = () => ({
    repo: REPO,
    number: 7,
    title: "Greet the user by name",
    head_sha: pr.headSha,
    url: `https://github.test/${REPO}/pull/7`
  })

  const review = (body: Record<string, unknown>, key = alice.key) =>
    s.request<Started>("POST", "/api/review/pr", { key, body })

  const counts = async () => {
    const [runs] = await s.query<{ n: number | string }>("SELECT COUNT(*) AS n FROM runs")
    const [tasks] = await s.query<{ n: number | string }>("SELECT COUNT(*) AS n FROM tasks")
    const listed = (dir: string) => (existsSync(dir) ? readdirSync(dir).length : 0)
    return {
      runs: Number(runs?.n),
      tasks: Number(tasks?.n),
      worktrees: listed(join(s.dataDir, "worktrees")),
      clones: listed(join(s.dataDir, "reviews"))
    }
  }

  beforeAll(async () => {
    // In the service's own environment too: it must still never reach an agent.
    process.env.GITHUB_TOKEN = TOKEN
    gh = await startFakeGitHub(TOKEN)
    pr = await makePullRequest({ repo: REPO, number: 7 })
    dirs.push(pr.dir)
    gh.pulls.set(`${REPO}#7`, pr)
    s = await startTestServer({
      store,
      env: {
        TASKWRIGHT_RATE_LIMIT: "1000000",
        TASKWRIGHT_MAX_RUNS: "2",
        TASKWRIGHT_GITHUB_API_URL: gh.url,
        GITHUB_TOKEN: TOKEN
      }
    })
    alice = await s.createUser()
    bob = await s.createUser()
    await configureAgent(s, "reader", {
      enabled: true,
      command: [process.execPath, "-e", READER],
      env: { REVIEW_JSON: JSON.stringify(REVIEW) }
    })
  })
  afterAll(async () => {
    if (tokenBefore === undefined) delete process.env.GITHUB_TOKEN
    else process.env.GITHUB_TOKEN = tokenBefore
    await s?.close()
    await gh?.close()
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })))
  })

  it("reviews the pull request read-only in its sandbox, stores the review and posts it with the service's token", async () => {
    const before = gh.received.length
    const r = await review({ repo: REPO, pr_number: 7, agent: "reader", post: true })
    expect(r.status, r.text).toBe(202)
    expect(r.body).toMatchObject({
      agent: "reader",
      status: "running",
      autonomy: "read-only",
      branch: "feature/greeting",
      post: true,
      pull_request: pullRequest()
    })
    const runId = r.body.run_id
    // The pull request, then its diff, with the token and GitHub's media types.
    const reads = gh.received.slice(before)
    expect(reads.map((q) => `${q.method} ${q.path} ${q.headers.accept}`)).toEqual([
      `GET /repos/${REPO}/pulls/7 application/vnd.github+json`,
      `GET /repos/${REPO}/pulls/7 application/vnd.github.diff`
    ])
    for (const q of reads) {
      expect(q.headers.authorization).toBe(`Bearer ${TOKEN}`)
      expect(q.headers["user-agent"]).toBe("taskwright")
      expect(q.headers["x-github-api-version"]).toBe("2022-11-28")
      expect(q.headers.traceparent).toBeUndefined()
    }

    const run = await waitForEnd(s, alice.key, runId)
    const logs = await allLogs(s, alice.key, runId)
    const text = logs.map((l) => l.message).join("\n")
    expect(run, text).toMatchObject({
      status: "completed",
      error: null,
      autonomy: "read-only",
      branch: "feature/greeting",
      output: { files_modified: [], lines_added: 0, lines_removed: 0 }
    })
    expect(run.output.commit).toBeUndefined()
    expect(reviewOf(run)).toEqual({
      summary: REVIEW.summary,
      verdict: "request_changes",
      comments: REVIEW.comments,
      pull_request: pullRequest(),
      posted: {
        status: "posted",
        review_id: 4242,
        url: `https://github.test/${REPO}/pull/7#pullrequestreview-4242`,
        inline_comments: 1,
        error: null
      }
    })

    // What the agent saw: the prompt, the head's files read-only, git at the head, no token.
    expect(text).toContain("prompt| Review pull request octo-org/hello#7: Greet the user by name")
    expect(text).toContain("prompt| Adds `greet`, and changes `b`.")
    expect(text).toContain("prompt| +export const b = 20")
    expect(text).toContain("prompt| +++ b/src/greet.ts")
    expect(text).toContain('file "export const a = 1\\nexport const b = 20\\nexport const c = 3\\n"')
    expect(text).toContain("write refused EROFS")
    expect(text).toContain(`head ${pr.headSha}`)
    expect(text).toContain("token absent")
    expect(text).toContain("autonomy read-only")
    expect(text).toContain("Sandboxed with bubblewrap: the worktree is read-only")
    expect(text).toContain("Review: verdict request_changes, 2 comment(s)")
    expect(text).toContain(`Posted the review to ${REPO}#7: https://github.test/${REPO}/pull/7#pullrequestreview-4242`)
    expect(text).not.toContain(TOKEN)

    // On GitHub: one COMMENT review at the head, the placeable comment on its line, the other in the body.
    const posts = gh.received.filter((q) => q.method === "POST" && q.path === `/repos/${REPO}/pulls/7/reviews`)
    expect(posts).toHaveLength(1)
    expect(posts[0]?.headers.authorization).toBe(`Bearer ${TOKEN}`)
    expect(posts[0]?.headers["content-type"]).toMatch(/^application\/json/)
    const posted = JSON.parse(posts[0]?.body ?? "{}") as Record<string, unknown>
    expect(posted).toMatchObject({
      commit_id: pr.headSha,
      event: "COMMENT",
      comments: [{ path: "src/app.ts", line: 2, side: "RIGHT", body: "Why 20? Add a test." }]
    })
    const body = String(posted.body)
    expect(body).toContain(REVIEW.summary)
    expect(body).toContain("**Verdict:** request changes")
    expect(body).toContain("- `README.md` line 1: Mention `greet` in the README.")
    expect(body).toContain(`Taskwright run ${runId}`)

    // A task of Alice's in no project, in review now; not Bob's to see.
    const task = await s.request<Record<string, unknown>>("GET", `/api/tasks/${r.body.task_id}`, { key: alice.key })
    expect(task.body).toMatchObject({
      title: `Review ${REPO}#7`,
      project_id: null,
      status: "in_review",
      agent_runs: [{ id: runId, agent: "reader", status: "completed" }]
    })
    expectError(await s.request("GET", `/api/tasks/${r.body.task_id}`, { key: bob.key }), 403, "FORBIDDEN")
    expectError(await s.request("GET", `/api/runs/${runId}`, { key: bob.key }), 403, "FORBIDDEN")

    // Nothing left of the checkout; nothing written to the pull request's repository.
    await waitFor(
      async () => ["worktrees", "reviews", "sandboxes"].map((d) => existsSync(join(s.dataDir, d, runId))).some(Boolean),
      (left) => !left,
      10_000,
      "the review's checkout to be removed"
    )
    expect(existsSync(join(pr.dir, "touched.txt"))).toBe(false)
  })

  it("without GitHub's diff the agent is told so; line comments GitHub refuses are posted in the body instead", async () => {
    const diffPath = `GET /repos/${REPO}/pulls/7 application/vnd.github.diff`
    gh.canned.set(diffPath, {
      status: 406,
      body: { message: "Sorry, the diff exceeded the maximum number of lines (20000)" }
    })
    try {
      const r = await review({ repo: REPO, pr_number: 7, agent: "reader", post: true })
      expect(r.status, r.text).toBe(202)
      const run = await waitForEnd(s, alice.key, r.body.run_id)
      const logs = await allLogs(s, alice.key, r.body.run_id)
      const text = logs.map((l) => l.message).join("\n")
      expect(run.status, text).toBe("completed")
      expect(text).toContain("prompt| GitHub did not answer the pull request's diff")
      expect(text).toContain("GitHub refused the review's line comments (HTTP 422: Unprocessable Entity)")
      expect(reviewOf(run)?.posted).toMatchObject({ status: "posted", inline_comments: 0, error: null })
      const last = gh.posted.get(`${REPO}#7`)?.at(-1)
      expect(last?.comments).toEqual([])
      expect(String(last?.body)).toContain("- `src/app.ts` line 2: Why 20? Add a test.")
      expect(String(last?.body)).toContain("- `README.md` line 1: Mention `greet` in the README.")
    } finally {
      gh.canned.delete(diffPath)
    }
  })

  it("a review GitHub will not take leaves the run completed, the reason in posted.error and the log", async () => {
    const posts = `POST /repos/${REPO}/pulls/7/reviews`
    gh.canned.set(posts, { status: 403, body: { message: "Resource not accessible by integration" } })
    try {
      const r = await review({ repo: REPO, pr_number: 7, agent: "reader", post: true })
      expect(r.status, r.text).toBe(202)
      const run = await waitForEnd(s, alice.key, r.body.run_id)
      expect(run.status).toBe("completed")
      expect(reviewOf(run)).toMatchObject({ summary: REVIEW.summary, verdict: "request_changes" })
      expect(reviewOf(run)?.posted).toEqual({
        status: "failed",
        review_id: null,
        url: null,
        inline_comments: 0,
        error: `the service's token may not post reviews on ${REPO}#7: HTTP 403: Resource not accessible by integration`
      })
      const logs = await allLogs(s, alice.key, r.body.run_id)
      expect(logs.find((l) => l.message.startsWith("Could not post the review: "))).toMatchObject({ level: "error" })
    } finally {
      gh.canned.delete(posts)
    }
  })

  it("without a json block the final message is the summary; without post nothing reaches GitHub", async () => {
    await scriptedAgent(s, "plain", [{ stdout: "The change looks right." }, { stdout: "Nothing blocks it." }])
    const r = await review({ repo: REPO, pr_number: 7, agent: "plain" })
    expect(r.status, r.text).toBe(202)
    expect(r.body.post).toBe(false)
    const run = await waitForEnd(s, alice.key, r.body.run_id)
    expect(run.status, run.error ?? "").toBe("completed")
    expect(reviewOf(run)).toEqual({
      summary: "The change looks right.\nNothing blocks it.",
      verdict: "comment",
      comments: [],
      pull_request: expect.objectContaining({ repo: REPO, number: 7, head_sha: pr.headSha })
    })
    const logs = await allLogs(s, alice.key, r.body.run_id)
    expect(logs.map((l) => l.message)).toContain(
      "The answer has no fenced json block: its final message is the review's summary"
    )
    expect(gh.posted.get(`${REPO}#7`)).toHaveLength(2) // only the tests' before
  })

  it("an answer whose json block is malformed fails the run with the reason in its log, and posts nothing", async () => {
    const cases: ReadonlyArray<{ readonly block: string; readonly reason: RegExp }> = [
      { block: '{"summary": "ok",}', reason: /^the agent's json block is not valid JSON/ },
      {
        block:
          '{"summary": "ok", "verdict": "maybe", "comments": [{"path": "src/app.ts", "line": "two", "body": "x"}]}',
        reason: /^the agent's json block is not a review \{summary, verdict, comments\}: .*verdict.*comments\.0\.line/
      },
      { block: '["not", "an", "object"]', reason: /is not an object/ }
    ]
    for (const [i, c] of cases.entries()) {
      await scriptedAgent(s, `malformed${i}`, [
        { stdout: "My review:" },
        { stdout: "```json" },
        { stdout: c.block },
        { stdout: "```" }
      ])
      const r = await review({ repo: REPO, pr_number: 7, agent: `malformed${i}`, post: true })
      expect(r.status, r.text).toBe(202)
      const run = await waitForEnd(s, alice.key, r.body.run_id)
      expect(run.status).toBe("failed")
      expect(run.error).toMatch(c.reason)
      expect(reviewOf(run)).toBeUndefined()
      const logs = await allLogs(s, alice.key, r.body.run_id)
      expect(logs.find((l) => l.message.startsWith("No review: "))).toMatchObject({ level: "error" })
      expect(logs.at(-1)).toMatchObject({ level: "error", message: "Run failed" })
      const task = await s.request<{ status: string }>("GET", `/api/tasks/${run.task_id}`, { key: alice.key })
      expect(task.body.status).toBe("in_progress")
    }
    expect(gh.posted.get(`${REPO}#7`)).toHaveLength(2)
  })

  it("GitHub's refusals are clear answers naming the cause, with nothing started", async () => {
    const before = await counts()
    const missing = expectError(await review({ repo: REPO, pr_number: 999, agent: "reader" }), 404, "NOT_FOUND")
    expect(missing.message).toBe(`pull request ${REPO}#999 not found on GitHub`)
    expect(missing.details).toMatchObject({ reason: "github_not_found", resource: "pull_request" })

    gh.token = "another-token"
    try {
      const refused = expectError(await review({ repo: REPO, pr_number: 7, agent: "reader" }), 403, "FORBIDDEN")
      expect(refused.message).toContain("GitHub refused the service's token")
      expect(refused.message).toContain("Bad credentials")
      expect(refused.message).not.toContain(TOKEN)
      expect(refused.details).toMatchObject({ reason: "github_unauthorized" })
    } finally {
      gh.token = TOKEN
    }

    const path = `GET /repos/${REPO}/pulls/7`
    const reset = Math.floor(Date.now() / 1000) + 120
    gh.canned.set(path, {
      status: 403,
      headers: { "x-ratelimit-remaining": "0", "x-ratelimit-reset": String(reset) },
      body: { message: "API rate limit exceeded for user ID 1." }
    })
    try {
      const r = await review({ repo: REPO, pr_number: 7, agent: "reader" })
      const limited = expectError(r, 429, "RATE_LIMITED")
      expect(limited.message).toContain("GitHub's rate limit")
      expect(limited.message).toContain("API rate limit exceeded")
      expect(limited.details.reason).toBe("github_rate_limited")
      expect(limited.details.retry_after).toBeGreaterThan(100)
      expect(limited.details.retry_after).toBeLessThanOrEqual(121)
      expect(r.headers.get("retry-after")).toBe(String(limited.details.retry_after))

      gh.canned.set(path, { status: 429, headers: { "retry-after": "17" }, body: { message: "secondary rate limit" } })
      const secondary = await review({ repo: REPO, pr_number: 7, agent: "reader" })
      expect(expectError(secondary, 429, "RATE_LIMITED").details).toMatchObject({
        reason: "github_rate_limited",
        retry_after: 17
      })
      expect(secondary.headers.get("retry-after")).toBe("17")

      gh.canned.set(path, { status: 403, body: { message: "Resource not accessible by integration" } })
      const denied = expectError(await review({ repo: REPO, pr_number: 7, agent: "reader" }), 403, "FORBIDDEN")
      expect(denied.details.reason).toBe("github_forbidden")
      expect(denied.message).toContain("Resource not accessible by integration")

      gh.canned.set(path, { status: 502, body: "<html>Bad gateway</html>" })
      const down = expectError(await review({ repo: REPO, pr_number: 7, agent: "reader" }), 503, "SERVICE_UNAVAILABLE")
      expect(down.details.reason).toBe("github_unavailable")
      expect(down.message).toContain("HTTP 502")

      gh.canned.set(path, { status: 200, body: { number: 7, title: "no head" } })
      const nonsense = expectError(
        await review({ repo: REPO, pr_number: 7, agent: "reader" }),
        503,
        "SERVICE_UNAVAILABLE"
      )
      expect(nonsense.message).toContain("not what its API documents")
    } finally {
      gh.canned.delete(path)
    }

    // A clone that fails (the repository moved away): 503, and nothing left behind.
    const gone = await makePullRequest({ repo: "octo-org/gone", number: 3 })
    gh.pulls.set("octo-org/gone#3", { ...gone, cloneUrl: `file://${gone.dir}-missing` })
    dirs.push(gone.dir)
    const clone = expectError(
      await review({ repo: "octo-org/gone", pr_number: 3, agent: "reader" }),
      503,
      "SERVICE_UNAVAILABLE"
    )
    expect(clone.details.reason).toBe("clone_failed")

    // An https clone URL is fine, anything else from GitHub is not used.
    gh.pulls.set("octo-org/gone#3", { ...gone, cloneUrl: "ext::sh -c touch% /tmp/pwned" })
    const trick = expectError(
      await review({ repo: "octo-org/gone", pr_number: 3, agent: "reader" }),
      503,
      "SERVICE_UNAVAILABLE"
    )
    expect(trick.message).toContain("a clone URL")

    expect(await counts()).toEqual(before)
  })

  it("stores GitHub's text without what a store refuses (a NUL, half a surrogate pair)", async () => {
    await scriptedAgent(s, "brief", [{ stdout: "Fine." }])
    gh.pulls.set(`${REPO}#8`, { ...pr, number: 8, title: "Odd\u0000title \ud800", body: "Body\u0000" })
    const r = await review({ repo: REPO, pr_number: 8, agent: "brief" })
    expect(r.status, r.text).toBe(202)
    expect(r.body.pull_request.title).toBe("Odd\ufffdtitle \ufffd")
    const run = await waitForEnd(s, alice.key, r.body.run_id)
    expect(run.status, run.error ?? "").toBe("completed")
    expect(reviewOf(run)?.pull_request.title).toBe("Odd\ufffdtitle \ufffd")
    const task = await s.request<{ description: string }>("GET", `/api/tasks/${r.body.task_id}`, { key: alice.key })
    expect(task.body.description).toContain("Odd\ufffdtitle")
  })

  it("refuses bad bodies naming the field, before asking GitHub anything", async () => {
    const before = gh.received.length
    const bad: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
      [{ repo: "not a repo", pr_number: 7, agent: "reader" }, "repo"],
      [{ repo: "octo-org/..", pr_number: 7, agent: "reader" }, "repo"],
      [{ repo: "octo-org/hello/pulls", pr_number: 7, agent: "reader" }, "repo"],
      [{ repo: REPO, pr_number: 0, agent: "reader" }, "pr_number"],
      [{ repo: REPO, pr_number: 1.5, agent: "reader" }, "pr_number"],
      [{ repo: REPO, pr_number: "7", agent: "reader" }, "pr_number"],
      [{ repo: REPO, pr_number: 7 }, "agent"],
      [{ repo: REPO, pr_number: 7, agent: "nobody" }, "agent"],
      [{ repo: REPO, pr_number: 7, agent: "reader", autonomy: "workspace-write" }, "autonomy"],
      [{ repo: REPO, pr_number: 7, agent: "reader", post: "yes" }, "post"],
      [{ repo: REPO, pr_number: 7, agent: "reader", branch: "main" }, "branch"]
    ]
    for (const [body, field] of bad) {
      const error = expectError(await review(body), 400, "BAD_REQUEST")
      const fields = error.details.fields as ReadonlyArray<{ path: string; message: string }>
      expect(
        fields.map((f) => f.path),
        JSON.stringify(body)
      ).toContain(field)
    }
    const readOnly = expectError(
      await review({ repo: REPO, pr_number: 7, agent: "reader", autonomy: "danger-full-access" }),
      400,
      "BAD_REQUEST"
    )
    expect(readOnly.message).toContain("a review run is read-only")
    // A credential without agents:run.
    const reader = await s.createUser({ scopes: ["tasks:read", "tasks:write"] })
    const scope = expectError(await review({ repo: REPO, pr_number: 7, agent: "reader" }, reader.key), 403, "FORBIDDEN")
    expect(scope.details.required_scope).toBe("agents:run")
    expect(gh.received.length).toBe(before)
  })

  it("counts against the run limit (409 before GitHub is asked), and stops like any run, posting nothing", async () => {
    await scriptedAgent(s, "slow", [{ stdout: "thinking" }, { sleep_ms: 30_000 }, { stdout: "done" }])
    const first = await review({ repo: REPO, pr_number: 7, agent: "slow", post: true })
    const second = await review({ repo: REPO, pr_number: 7, agent: "slow", post: true })
    expect([first.status, second.status], first.text + second.text).toEqual([202, 202])
    const before = gh.received.length
    const full = expectError(await review({ repo: REPO, pr_number: 7, agent: "slow" }), 409, "CONFLICT")
    expect(full.details).toMatchObject({ reason: "capacity", max_runs: 2 })
    expect(gh.received.length).toBe(before)
    for (const started of [first.body, second.body]) {
      await waitFor(
        () => allLogs(s, alice.key, started.run_id),
        (logs) => logs.some((l) => l.message === "thinking"),
        20_000,
        "the agent to start"
      )
      const stopped = await s.request<RunView>("POST", `/api/runs/${started.run_id}/stop`, { key: alice.key })
      expect(stopped.status, stopped.text).toBe(200)
      expect(stopped.body.status).toBe("stopped")
      expect(reviewOf(stopped.body)).toBeUndefined()
      expect((await getRun(s, alice.key, started.run_id)).status).toBe("stopped")
      await waitFor(
        async () => existsSync(join(s.dataDir, "worktrees", started.run_id)),
        (left) => !left,
        10_000,
        "the checkout to be removed"
      )
    }
    expect(gh.posted.get(`${REPO}#7`)).toHaveLength(2)
  })
})

describe("pull-request reviews in process (tw.as(user).reviews.pullRequest)", () => {
  let gh: FakeGitHub
  let pr: FakePullRequest & { readonly dir: string }
  const harnesses: Array<Harness> = []
  const script: Script = [
    { stdout: "```json" },
    { stdout: JSON.stringify({ summary: "Fine by me.", verdict: "approve", comments: [] }) },
    { stdout: "```" }
  ]
  const reviewer = {
    enabled: true,
    command: [...scriptedAgentArgv()],
    env: scriptEnv(script),
    read_only_paths: [dirname(scriptedAgentPath)]
  }

  beforeAll(async () => {
    gh = await startFakeGitHub(TOKEN)
    pr = await makePullRequest({ repo: REPO, number: 9, headRef: "fix/typo" })
    gh.pulls.set(`${REPO}#9`, pr)
  })
  afterAll(async () => {
    for (const h of harnesses) await h.close()
    await gh?.close()
    if (pr !== undefined) await rm(pr.dir, { recursive: true, force: true })
  })

  it("starts the same review run and answers the same shapes", async () => {
    const h = await createHarness({ listen: false, github: { apiUrl: gh.url, token: TOKEN }, agents: { reviewer } })
    harnesses.push(h)
    const started = await h.as.reviews.pullRequest({ repo: REPO, pr_number: 9, agent: "reviewer", post: true })
    expect(started).toMatchObject({ status: "running", autonomy: "read-only", branch: "fix/typo", post: true })
    const run = await h.awaitRun(started.run_id)
    expect(run.status).toBe("completed")
    expect(run.output.review).toMatchObject({
      summary: "Fine by me.",
      verdict: "approve",
      comments: [],
      posted: { status: "posted", inline_comments: 0 }
    })
    expect(gh.posted.get(`${REPO}#9`)?.[0]).toMatchObject({ event: "COMMENT", commit_id: pr.headSha, comments: [] })
  })

  it("post: true on a service without GITHUB_TOKEN is 400, before GitHub is asked", async () => {
    const h = await createHarness({ listen: false, github: { apiUrl: gh.url }, agents: { reviewer } })
    harnesses.push(h)
    const before = gh.received.length
    const error = await h.as.reviews.pullRequest({ repo: REPO, pr_number: 9, agent: "reviewer", post: true }).then(
      () => undefined,
      (e: unknown) => e as { code: string; status: number; details: Record<string, unknown> }
    )
    expect(error).toMatchObject({ code: "BAD_REQUEST", status: 400, details: { reason: "github_token_missing" } })
    expect(gh.received.length).toBe(before)
  })
})

describe.each(testStores())("a review run across server processes on %s", (store) => {
  let gh: FakeGitHub
  let pr: FakePullRequest & { readonly dir: string }
  let dataDir: string
  let databaseUrl: string | undefined
  let dropStore: () => Promise<void> = async () => {}
  let key = ""
  let server: ServerProcess | undefined
  const { ok, allLogs: logsOf } = client(
    () => server,
    () => key
  )
  const start = () =>
    startServer({
      dataDir,
      databaseUrl,
      env: serverEnv({ TASKWRIGHT_GITHUB_API_URL: gh.url, GITHUB_TOKEN: TOKEN })
    })

  beforeAll(async () => {
    await ensureBuilt()
    gh = await startFakeGitHub(TOKEN)
    pr = await makePullRequest({ repo: REPO, number: 11 })
    gh.pulls.set(`${REPO}#11`, pr)
    dataDir = await mkdtemp(join(tmpdir(), "tw-review-proc-"))
    ;({ databaseUrl, drop: dropStore } = await makeStore(store))
    server = await start()
    key = readFileSync(join(dataDir, "admin-key.txt"), "utf8").trim()
  }, 300_000)
  afterAll(async () => {
    await killServer(server)
    await dropStore()
    await gh?.close()
    await rm(dataDir, { recursive: true, force: true })
    if (pr !== undefined) await rm(pr.dir, { recursive: true, force: true })
  })

  it("a SIGKILLed server's review run is failed on restart, its checkout removed, nothing committed or posted", async () => {
    await ok("PUT", "/api/agents/slow", {
      enabled: true,
      command: [...scriptedAgentArgv()],
      read_only_paths: [dirname(scriptedAgentPath)],
      env: scriptEnv([{ stdout: "waiting" }, { sleep_ms: 120_000 }])
    })
    const started = await ok<Started>("POST", "/api/review/pr", {
      repo: REPO,
      pr_number: 11,
      agent: "slow",
      post: true
    })
    await waitFor(
      () => logsOf(started.run_id),
      (logs) => logs.some((l) => l.message === "waiting"),
      20_000,
      "the agent to be waiting"
    )
    expect(existsSync(join(dataDir, "worktrees", started.run_id, "src", "greet.ts"))).toBe(true)
    expect(existsSync(join(dataDir, "reviews", started.run_id))).toBe(true)
    server?.child.kill("SIGKILL")
    await server?.exited

    server = await start()
    const run = await ok<RunView>("GET", `/api/runs/${started.run_id}`)
    expect(run).toMatchObject({ status: "failed", error: "the service stopped while the run was in progress" })
    expect(run.output).toEqual({ files_modified: [], lines_added: 0, lines_removed: 0 })
    const logs = await logsOf(started.run_id)
    expect(logs.map((l) => l.message)).toContain("Removed the review's checkout")
    expect(existsSync(join(dataDir, "worktrees", started.run_id))).toBe(false)
    expect(existsSync(join(dataDir, "reviews", started.run_id))).toBe(false)
    expect(gh.posted.size).toBe(0)
  })
})
