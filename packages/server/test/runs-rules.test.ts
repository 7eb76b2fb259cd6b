/**
 * The rules around agent runs, on every store: agent configuration, validation (branch names
 * refused before git ever runs), scopes and ownership, one run per task and the concurrency cap,
 * and reviews (approve, reject, request changes with a follow-up run on the same branch).
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { git, makeRepo, startTestServer, type TestServer, type TestUser, testStores } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  allLogs,
  configureAgent,
  expectError,
  projectTask,
  type RunView,
  scriptedAgent,
  startRun,
  waitFor,
  waitForEnd
} from "./runs-helpers.js"

interface TaskView {
  readonly id: number
  readonly status: string
  readonly agent_runs: ReadonlyArray<{ readonly id: string; readonly status: string }>
}

interface ReviewAnswer {
  readonly task: TaskView
  readonly review: {
    readonly id: string
    readonly action: string
    readonly comment: string | null
    readonly reviewer: string
    readonly created_at: string
  }
  readonly run_id: string | null
}

describe.each(testStores())("agent run rules on %s", (store) => {
  let s: TestServer
  let alice: TestUser
  let bob: TestUser
  let dir: string
  let taskId: number
  const dirs: Array<string> = []

  beforeAll(async () => {
    s = await startTestServer({ store, env: { TASKWRIGHT_MAX_RUNS: "2", TASKWRIGHT_RATE_LIMIT: "1000000" } })
    alice = await s.createUser()
    bob = await s.createUser()
    dir = await makeRepo()
    dirs.push(dir)
    ;({ taskId } = await projectTask(s, alice.key, dir))
    await scriptedAgent(s, "quick", [{ write: "done.txt", content: "ok\n" }, { stdout: "quick done" }])
    await scriptedAgent(s, "long", [{ stdout: "started" }, { sleep_ms: 60_000 }])
  })
  afterAll(async () => {
    await s?.close()
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })))
  })

  const runRows = async () => Number((await s.query<{ n: number }>("SELECT COUNT(*) AS n FROM runs"))[0]?.n)

  describe("agent configuration", () => {
    it("lists the built-in agents and updates one (admin only)", async () => {
      const list = await s.request<{ agents: Record<string, Record<string, unknown>> }>("GET", "/api/agents", {
        key: alice.key
      })
      expect(list.status).toBe(200)
      for (const name of ["claude-code", "codex", "gemini", "command"]) {
        expect(list.body.agents[name]).toMatchObject({ enabled: name !== "command", autonomy: "workspace-write" })
        expect(typeof list.body.agents[name]?.model).toBe("string")
      }
      // Configured command lines and environments are not shown to non-admins.
      expect(JSON.stringify(list.body)).not.toContain("TASKWRIGHT_SCRIPT")

      const updated = await s.request<Record<string, unknown>>("PUT", "/api/agents/gemini", {
        key: s.adminKey,
        body: { model: "gemini-2.5-flash", autonomy: "read-only", enabled: false }
      })
      expect(updated.status, updated.text).toBe(200)
      expect(updated.body).toMatchObject({
        name: "gemini",
        enabled: false,
        model: "gemini-2.5-flash",
        autonomy: "read-only"
      })
      const again = await s.request<{ agents: Record<string, Record<string, unknown>> }>("GET", "/api/agents", {
        key: alice.key
      })
      expect(again.body.agents.gemini).toMatchObject({
        enabled: false,
        model: "gemini-2.5-flash",
        autonomy: "read-only"
      })

      // Stored in <data dir>/agents.json, readable only by the service's user.
      const file = join(s.dataDir, "agents.json")
      expect(JSON.parse(readFileSync(file, "utf8")).gemini).toMatchObject({ model: "gemini-2.5-flash", enabled: false })
      expect(statSync(file).mode & 0o777).toBe(0o600)

      expectError(
        await s.request("PUT", "/api/agents/gemini", { key: alice.key, body: { enabled: true } }),
        403,
        "FORBIDDEN"
      )
      const reader = await s.createUser({ scopes: ["tasks:read"] })
      expectError(await s.request("GET", "/api/agents", { key: reader.key }), 403, "FORBIDDEN")
      for (const body of [
        {},
        { enabled: "yes" },
        { autonomy: "full" },
        { model: "" },
        { timeout_s: 0 },
        { command: [] },
        { command: ["a\u0000b"] },
        { env: { "BAD-NAME": "x" } },
        { unknown: 1 }
      ]) {
        expectError(await s.request("PUT", "/api/agents/gemini", { key: s.adminKey, body }), 400, "BAD_REQUEST")
      }
      // A command agent cannot be enabled without a command line.
      const noCommand = await s.request("PUT", "/api/agents/command", { key: s.adminKey, body: { enabled: true } })
      expectError(noCommand, 400, "BAD_REQUEST")
      expectError(
        await s.request("PUT", "/api/agents/Bad%20Name", { key: s.adminKey, body: { enabled: true } }),
        400,
        "BAD_REQUEST"
      )
    })
  })

  describe("validation, before git runs", () => {
    it("refuses bad branch names with 400 and leaves no trace", async () => {
      const before = await runRows()
      const branchesBefore = git(dir, "branch", "--list")
      for (const branch of [
        "--upload-pack=x",
        "a..b",
        "@",
        "x.lock",
        "$(id)",
        "-x",
        "a b",
        "HEAD",
        "a/",
        ".hidden",
        "",
        "a@{1}"
      ]) {
        const r = await s.request("POST", `/api/tasks/${taskId}/run`, {
          key: alice.key,
          body: { agent: "quick", branch }
        })
        const error = expectError(r, 400, "BAD_REQUEST")
        expect(JSON.stringify(error.details), branch).toContain("branch")
      }
      expect(await runRows()).toBe(before)
      expect(git(dir, "branch", "--list")).toBe(branchesBefore)
      expect(existsSync(join(s.dataDir, "worktrees")) ? readdirSync(join(s.dataDir, "worktrees")) : []).toEqual([])
    })

    it("refuses unknown and disabled agents, bad autonomy and bodies with 400", async () => {
      for (const body of [
        { agent: "nope" },
        { agent: "gemini" }, // disabled above
        { agent: "command" }, // never configured
        { agent: "quick", autonomy: "root" },
        { agent: "quick", extra: 1 },
        {},
        { agent: 3 }
      ]) {
        const r = await s.request("POST", `/api/tasks/${taskId}/run`, { key: alice.key, body })
        expectError(r, 400, "BAD_REQUEST")
      }
      // Validation comes before existence: a bad body on a missing task is still 400.
      expectError(
        await s.request("POST", "/api/tasks/999999/run", { key: alice.key, body: { agent: "nope" } }),
        400,
        "BAD_REQUEST"
      )
      expectError(
        await s.request("POST", "/api/tasks/999999/run", { key: alice.key, body: { agent: "quick" } }),
        404,
        "NOT_FOUND"
      )
      expectError(
        await s.request("POST", "/api/tasks/abc/run", { key: alice.key, body: { agent: "quick" } }),
        400,
        "BAD_REQUEST"
      )
    })

    it("refuses a task without a project, and a project that is not a git repository", async () => {
      const bare = await s.request<{ id: number }>("POST", "/api/tasks", {
        key: alice.key,
        body: { title: "No project" }
      })
      const r1 = await s.request("POST", `/api/tasks/${bare.body.id}/run`, { key: alice.key, body: { agent: "quick" } })
      expect(expectError(r1, 400, "BAD_REQUEST").details).toMatchObject({ reason: "no_project" })

      const plain = await mkdtemp(join(tmpdir(), "tw-plain-"))
      dirs.push(plain)
      const { taskId: plainTask } = await projectTask(s, alice.key, plain)
      const r2 = await s.request("POST", `/api/tasks/${plainTask}/run`, { key: alice.key, body: { agent: "quick" } })
      expect(expectError(r2, 400, "BAD_REQUEST").details).toMatchObject({ reason: "not_a_git_repository" })
      const t = await s.request<{ status: string }>("GET", `/api/tasks/${plainTask}`, { key: alice.key })
      expect(t.body.status).toBe("backlog")
    })

    it("answers 409 when the branch is checked out in the project's own checkout", async () => {
      const r = await s.request("POST", `/api/tasks/${taskId}/run`, {
        key: alice.key,
        body: { agent: "quick", branch: "main" }
      })
      expect(expectError(r, 409, "CONFLICT").details).toMatchObject({ reason: "branch_in_use" })
    })
  })

  describe("scopes and ownership", () => {
    it("requires agents:run to start and stop, tasks:read to read", async () => {
      const reader = await s.createUser({ scopes: ["tasks:read", "tasks:write"] })
      const { taskId: own } = await projectTask(s, alice.key, dir)
      expectError(
        await s.request("POST", `/api/tasks/${own}/run`, { key: reader.key, body: { agent: "quick" } }),
        403,
        "FORBIDDEN"
      )
      const { run_id } = await startRun(s, alice.key, own, { agent: "quick" })
      await waitForEnd(s, alice.key, run_id)
      const runner = await s.createUser({ scopes: ["agents:run"] })
      expectError(await s.request("GET", `/api/runs/${run_id}`, { key: runner.key }), 403, "FORBIDDEN")
      expectError(await s.request("GET", `/api/runs/${run_id}/logs`, { key: runner.key }), 403, "FORBIDDEN")
      expectError(await s.request("POST", `/api/runs/${run_id}/stop`, { key: reader.key }), 403, "FORBIDDEN")
      expectError(await s.request("GET", `/api/runs/${run_id}`), 401, "UNAUTHORIZED")
    })

    it("answers 403 for another user's task and run, 404 for a missing run, 400 for a malformed id", async () => {
      const { taskId: own } = await projectTask(s, alice.key, dir)
      const { run_id } = await startRun(s, alice.key, own, { agent: "quick" })
      await waitForEnd(s, alice.key, run_id)
      expectError(
        await s.request("POST", `/api/tasks/${own}/run`, { key: bob.key, body: { agent: "quick" } }),
        403,
        "FORBIDDEN"
      )
      expectError(await s.request("GET", `/api/runs/${run_id}`, { key: bob.key }), 403, "FORBIDDEN")
      expectError(await s.request("GET", `/api/runs/${run_id}/logs`, { key: bob.key }), 403, "FORBIDDEN")
      expectError(await s.request("POST", `/api/runs/${run_id}/stop`, { key: bob.key }), 403, "FORBIDDEN")
      expectError(
        await s.request("POST", `/api/tasks/${own}/review`, { key: bob.key, body: { action: "approve" } }),
        403,
        "FORBIDDEN"
      )
      // An admin sees everyone's runs.
      expect((await s.request("GET", `/api/runs/${run_id}`, { key: s.adminKey })).status).toBe(200)
      expectError(await s.request("GET", "/api/runs/run_0000000000000000", { key: alice.key }), 404, "NOT_FOUND")
      expectError(await s.request("GET", "/api/runs/run_0000000000000000/logs", { key: alice.key }), 404, "NOT_FOUND")
      expectError(await s.request("POST", "/api/runs/run_0000000000000000/stop", { key: alice.key }), 404, "NOT_FOUND")
      for (const bad of ["abc", "run_short", "run_000000000000000!", "proj_0000000000000000"]) {
        expectError(
          await s.request("GET", `/api/runs/${encodeURIComponent(bad)}`, { key: alice.key }),
          400,
          "BAD_REQUEST"
        )
      }
    })
  })

  describe("concurrency", () => {
    it("runs one run per task (409 task_busy) and at most TASKWRIGHT_MAX_RUNS at once (409 capacity)", async () => {
      const tasks = await Promise.all([1, 2, 3].map(() => projectTask(s, alice.key, dir)))
      const [a, b, c] = tasks.map((t) => t.taskId) as [number, number, number]
      const first = await startRun(s, alice.key, a, { agent: "long" })
      const busy = await s.request("POST", `/api/tasks/${a}/run`, {
        key: alice.key,
        body: { agent: "quick", branch: "other" }
      })
      expect(expectError(busy, 409, "CONFLICT").details).toMatchObject({ reason: "task_busy" })
      // Deleting a task with a running run is refused too.
      expectError(await s.request("DELETE", `/api/tasks/${a}`, { key: alice.key }), 409, "CONFLICT")

      // Two concurrent starts race for the last slot: exactly one wins.
      const race = await Promise.all(
        [b, c].map((t) =>
          s.request<{ run_id: string }>("POST", `/api/tasks/${t}/run`, { key: alice.key, body: { agent: "long" } })
        )
      )
      expect(race.map((r) => r.status).sort()).toEqual([201, 409])
      const refused = race.find((r) => r.status === 409)
      expect(refused && expectError(refused, 409, "CONFLICT").details).toMatchObject({
        reason: "capacity",
        max_runs: 2
      })
      const second = race.find((r) => r.status === 201)?.body.run_id ?? ""

      for (const id of [first.run_id, second]) {
        const stopped = await s.request<RunView>("POST", `/api/runs/${id}/stop`, { key: alice.key })
        expect(stopped.status, stopped.text).toBe(200)
        expect(stopped.body.status).toBe("stopped")
      }
      // A slot is free again.
      const third = await startRun(s, alice.key, c, { agent: "quick", branch: "after-capacity" })
      expect((await waitForEnd(s, alice.key, third.run_id)).status).toBe("completed")
    })
  })

  describe("reviews", () => {
    const reviewable = async (agent: string) => {
      const { taskId: id } = await projectTask(s, alice.key, dir, { title: "Write notes", description: "Add notes." })
      const { run_id } = await startRun(s, alice.key, id, { agent, branch: `review/${id}` })
      expect((await waitForEnd(s, alice.key, run_id)).status).toBe("completed")
      return { id, run_id }
    }

    it("approve → done, reject → backlog; reviewing a task not in_review is 409", async () => {
      await scriptedAgent(s, "notes", [{ append: "notes.txt", content: "round\n" }, { echo_prompt: true }])
      const one = await reviewable("notes")
      const approved = await s.request<ReviewAnswer>("POST", `/api/tasks/${one.id}/review`, {
        key: alice.key,
        body: { action: "approve", comment: "Looks good" }
      })
      expect(approved.status, approved.text).toBe(200)
      expect(approved.body.task).toMatchObject({ id: one.id, status: "done" })
      expect(approved.body.review).toMatchObject({ action: "approve", comment: "Looks good", reviewer: alice.id })
      expect(approved.body.review.id).toMatch(/^rev_[0-9A-Za-z]{16}$/)
      expect(approved.body.run_id).toBeNull()
      const again = await s.request("POST", `/api/tasks/${one.id}/review`, {
        key: alice.key,
        body: { action: "reject" }
      })
      expect(expectError(again, 409, "CONFLICT").details).toMatchObject({ reason: "not_in_review", status: "done" })

      const two = await reviewable("notes")
      const rejected = await s.request<ReviewAnswer>("POST", `/api/tasks/${two.id}/review`, {
        key: alice.key,
        body: { action: "reject" }
      })
      expect(rejected.status).toBe(200)
      expect(rejected.body.task.status).toBe("backlog")
      expect(rejected.body.review.comment).toBeNull()

      const fresh = await s.request<{ id: number }>("POST", "/api/tasks", {
        key: alice.key,
        body: { title: "Never ran" }
      })
      expectError(
        await s.request("POST", `/api/tasks/${fresh.body.id}/review`, { key: alice.key, body: { action: "approve" } }),
        409,
        "CONFLICT"
      )
      for (const body of [{ action: "merge" }, {}, { action: "approve", comment: 5 }, { action: "approve", x: 1 }]) {
        expectError(
          await s.request("POST", `/api/tasks/${fresh.body.id}/review`, { key: alice.key, body }),
          400,
          "BAD_REQUEST"
        )
      }
      const rows = await s.query<{ action: string }>(
        "SELECT action FROM reviews WHERE task_id = ? ORDER BY created_at",
        [one.id]
      )
      expect(rows.map((r) => r.action)).toEqual(["approve"])
    })

    it("request_changes with a comment starts a follow-up run on the same branch whose prompt carries it", async () => {
      const { id, run_id: firstRun } = await reviewable("notes")
      const answer = await s.request<ReviewAnswer>("POST", `/api/tasks/${id}/review`, {
        key: alice.key,
        body: { action: "request_changes", comment: "Please also mention the tests." }
      })
      expect(answer.status, answer.text).toBe(200)
      expect(answer.body.task.status).toBe("in_progress")
      expect(answer.body.review).toMatchObject({ action: "request_changes", comment: "Please also mention the tests." })
      const followUp = answer.body.run_id ?? ""
      expect(followUp).toMatch(/^run_/)
      expect(followUp).not.toBe(firstRun)

      const run = await waitForEnd(s, alice.key, followUp)
      expect(run).toMatchObject({ status: "completed", agent: "notes", branch: `review/${id}` })
      const logs = await allLogs(s, alice.key, followUp)
      const stdin = JSON.parse(logs.find((l) => l.message.startsWith("stdin "))?.message.slice(6) ?? "null") as string
      expect(stdin).toContain("Write notes")
      expect(stdin).toContain("Please also mention the tests.")
      // The follow-up continued the branch: two commits, the second on top of the first.
      expect(git(dir, "show", `review/${id}:notes.txt`)).toBe("round\nround\n")
      expect(git(dir, "rev-list", "--count", `main..review/${id}`).trim()).toBe("2")
      // Its figures count the branch's work since it left main.
      expect(run.output).toMatchObject({ files_modified: ["notes.txt"], lines_added: 2, lines_removed: 0 })

      const task = await waitFor(
        () => s.request<TaskView>("GET", `/api/tasks/${id}`, { key: alice.key }).then((r) => r.body),
        (t) => t.status === "in_review",
        5_000
      )
      expect(task.agent_runs.map((r) => r.id)).toEqual([firstRun, followUp])
      const reviews = await s.query<{ run_id: string | null }>("SELECT run_id FROM reviews WHERE task_id = ?", [id])
      expect(reviews.map((r) => r.run_id)).toEqual([followUp])
    })

    it("request_changes without a comment only moves the task back; a follow-up that cannot start undoes the review", async () => {
      const { id } = await reviewable("notes")
      const plain = await s.request<ReviewAnswer>("POST", `/api/tasks/${id}/review`, {
        key: alice.key,
        body: { action: "request_changes" }
      })
      expect(plain.status).toBe(200)
      expect(plain.body.task.status).toBe("in_progress")
      expect(plain.body.run_id).toBeNull()

      const other = await reviewable("notes")
      await configureAgent(s, "notes", { enabled: false })
      try {
        const r = await s.request("POST", `/api/tasks/${other.id}/review`, {
          key: alice.key,
          body: { action: "request_changes", comment: "again" }
        })
        expectError(r, 400, "BAD_REQUEST")
        const t = await s.request<TaskView>("GET", `/api/tasks/${other.id}`, { key: alice.key })
        expect(t.body.status).toBe("in_review")
        expect(await s.query("SELECT id FROM reviews WHERE task_id = ?", [other.id])).toEqual([])
      } finally {
        await configureAgent(s, "notes", { enabled: true })
      }
    })
  })
})
