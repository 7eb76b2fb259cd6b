/**
 * Agent runs end to end over HTTP, on every store: real git repositories in temp dirs, real
 * child processes (the scripted agent), real worktrees, commits and diffs. A run that edits and
 * creates files, its figures while it runs, its log pages, stop, timeout, the log cap, the three
 * built-in CLIs' executors, and what an agent can see of the service (environment, hooks).
 */
import { chmodSync, existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  git,
  isRunning,
  makeRepo,
  scriptedAgentPath,
  startTestServer,
  type TestServer,
  type TestUser,
  testStores
} from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  allLogs,
  configureAgent,
  expectError,
  getLogs,
  getRun,
  pidsTagged,
  projectTask,
  type RunView,
  scriptedAgent,
  scriptedAgentPaths,
  startRun,
  waitFor,
  waitForEnd
} from "./runs-helpers.js"

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

describe.each(testStores())("agent runs on %s", (store) => {
  let s: TestServer
  let alice: TestUser
  const dirs: Array<string> = []
  const repo = async (files?: Record<string, string>) => {
    const dir = await makeRepo(files)
    dirs.push(dir)
    return dir
  }

  beforeAll(async () => {
    s = await startTestServer({ store, env: { TASKWRIGHT_RATE_LIMIT: "1000000" } })
    alice = await s.createUser()
  })
  afterAll(async () => {
    await s?.close()
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })))
  })

  it("runs an agent that edits and creates files: figures while it runs, a commit on the branch, the checkout untouched", async () => {
    const dir = await repo()
    const headBefore = git(dir, "rev-parse", "HEAD").trim()
    const { taskId } = await projectTask(s, alice.key, dir)
    await scriptedAgent(s, "editor", [
      { write: "src/new.ts", content: "x\ny\nz\n" },
      { write: "README.md", content: "# Project\n\nline a\nline B\nline c\nline d\n" },
      { delete: "src/app.ts" },
      { stdout: "first part done" },
      { sleep_ms: 3000 },
      { write: "later.txt", content: "l\n" },
      { stdout: "all done" }
    ])
    const started = await startRun(s, alice.key, taskId, { agent: "editor", branch: "feature/edit-files" })
    expect(started).toMatchObject({
      task_id: taskId,
      agent: "editor",
      status: "running",
      branch: "feature/edit-files",
      autonomy: "workspace-write"
    })
    expect(started.run_id).toMatch(/^run_[0-9A-Za-z]{16}$/)
    expect((started as unknown as { started_at: string }).started_at).toMatch(ISO)

    const task = await s.request<{ status: string }>("GET", `/api/tasks/${taskId}`, { key: alice.key })
    expect(task.body.status).toBe("in_progress")

    // While it runs: completed_at null, and the figures so far.
    const midway = await waitFor(
      () => getRun(s, alice.key, started.run_id),
      (r) => r.status !== "running" || r.output.files_modified.length === 3,
      10_000,
      "the figures so far"
    )
    expect(midway.status).toBe("running")
    expect(midway.completed_at).toBeNull()
    expect(midway.output).toMatchObject({
      files_modified: ["README.md", "src/app.ts", "src/new.ts"],
      lines_added: 5,
      lines_removed: 2
    })

    const run = await waitForEnd(s, alice.key, started.run_id)
    expect(run).toMatchObject({
      id: started.run_id,
      task_id: taskId,
      agent: "editor",
      status: "completed",
      branch: "feature/edit-files",
      error: null
    })
    expect(run.completed_at).toMatch(ISO)
    expect(run.output.files_modified).toEqual(["README.md", "later.txt", "src/app.ts", "src/new.ts"])
    expect(run.output.lines_added).toBe(6)
    expect(run.output.lines_removed).toBe(2)

    // The commit is on the requested branch, made by Taskwright, and holds exactly the work.
    const tip = git(dir, "rev-parse", "refs/heads/feature/edit-files").trim()
    expect(run.output.commit).toBe(tip)
    expect(git(dir, "log", "-1", "--format=%an <%ae>|%cn", tip).trim()).toBe(
      "Taskwright <taskwright@localhost>|Taskwright"
    )
    expect(git(dir, "rev-parse", `${tip}^`).trim()).toBe(headBefore)
    expect(git(dir, "show", `${tip}:later.txt`)).toBe("l\n")
    expect(git(dir, "diff", "--numstat", headBefore, tip).trim().split("\n").sort()).toEqual([
      "0\t1\tsrc/app.ts",
      "1\t0\tlater.txt",
      "2\t1\tREADME.md",
      "3\t0\tsrc/new.ts"
    ])

    // The project's own checkout is untouched, and the run's worktree is gone (the branch keeps the work).
    expect(git(dir, "rev-parse", "HEAD").trim()).toBe(headBefore)
    expect(git(dir, "symbolic-ref", "HEAD").trim()).toBe("refs/heads/main")
    expect(git(dir, "status", "--porcelain").trim()).toBe("")
    expect(readFileSync(join(dir, "README.md"), "utf8")).toBe("# Project\n\nline a\nline b\nline c\n")
    expect(existsSync(join(dir, "src/new.ts"))).toBe(false)
    expect(existsSync(join(s.dataDir, "worktrees", started.run_id))).toBe(false)
    expect(git(dir, "worktree", "list", "--porcelain").match(/^worktree /gm)).toHaveLength(1)

    // The task is in review and lists the run; the logs tell the story.
    const after = await s.request<{ status: string; agent_runs: ReadonlyArray<Record<string, unknown>> }>(
      "GET",
      `/api/tasks/${taskId}`,
      { key: alice.key }
    )
    expect(after.body.status).toBe("in_review")
    expect(after.body.agent_runs).toEqual([
      { id: run.id, agent: "editor", status: "completed", started_at: run.started_at, completed_at: run.completed_at }
    ])
    const logs = await allLogs(s, alice.key, run.id)
    const messages = logs.map((l) => l.message)
    expect(messages).toContain("first part done")
    expect(messages).toContain("all done")
    expect(messages.some((m) => m.startsWith(`Committed ${tip.slice(0, 12)} on branch feature/edit-files`))).toBe(true)
    expect(logs.map((l) => l.seq)).toEqual(logs.map((_, i) => i + 1))
    for (const l of logs) {
      expect(l.timestamp).toMatch(ISO)
      expect(["debug", "info", "warn", "error"]).toContain(l.level)
    }
  })

  it("pages logs with since (exclusive), after and limit, oldest first", async () => {
    const dir = await repo()
    const { taskId } = await projectTask(s, alice.key, dir)
    await scriptedAgent(s, "chatty", [{ lines: 250, prefix: "row" }, { sleep_ms: 30 }, { lines: 250, prefix: "more" }])
    const { run_id } = await startRun(s, alice.key, taskId, { agent: "chatty" })
    await waitForEnd(s, alice.key, run_id)
    const all = await allLogs(s, alice.key, run_id)
    const rows = all.filter((l) => l.message.startsWith("row ") || l.message.startsWith("more "))
    expect(rows.map((l) => l.message)).toEqual([
      ...Array.from({ length: 250 }, (_, i) => `row ${i + 1}`),
      ...Array.from({ length: 250 }, (_, i) => `more ${i + 1}`)
    ])
    expect(all.map((l) => l.seq)).toEqual(all.map((_, i) => i + 1))
    const times = all.map((l) => l.timestamp)
    expect(times).toEqual([...times].sort())

    // Default limit 100, oldest first.
    const first = await getLogs(s, alice.key, run_id)
    expect(first).toEqual(all.slice(0, 100))
    // after=<seq> continues exactly where the page ended.
    const second = await getLogs(s, alice.key, run_id, `?after=${first.at(-1)?.seq}&limit=150`)
    expect(second).toEqual(all.slice(100, 250))
    expect(await getLogs(s, alice.key, run_id, `?after=${all.length}`)).toEqual([])
    expect(await getLogs(s, alice.key, run_id, "?limit=1000")).toEqual(all.slice(0, 1000))

    // since is exclusive, also when many entries share a millisecond.
    for (const pivot of [all[0], all[120], all[400], all.at(-1)]) {
      const since = pivot?.timestamp ?? ""
      const expected = all.filter((l) => l.timestamp > since)
      const page = await getLogs(s, alice.key, run_id, `?since=${encodeURIComponent(since)}&limit=1000`)
      expect(page).toEqual(expected.slice(0, 1000))
      // Combined with after and limit.
      const afterSeq = (expected[0]?.seq ?? 0) + 5
      const combined = await getLogs(
        s,
        alice.key,
        run_id,
        `?since=${encodeURIComponent(since)}&after=${afterSeq}&limit=7`
      )
      expect(combined).toEqual(all.filter((l) => l.timestamp > since && l.seq > afterSeq).slice(0, 7))
    }
    // A since before the run gives everything; other ISO forms are accepted.
    expect(await getLogs(s, alice.key, run_id, "?since=2000-01-01T00:00:00Z&limit=3")).toEqual(all.slice(0, 3))

    for (const bad of [
      "?limit=0",
      "?limit=1001",
      "?limit=abc",
      "?after=-1",
      "?after=x",
      "?since=yesterday",
      "?since=12"
    ]) {
      const r = await s.request("GET", `/api/runs/${run_id}/logs${bad}`, { key: alice.key })
      expectError(r, 400, "BAD_REQUEST")
    }
  })

  it("stops a run: 200 with status stopped, no process of its group left, the task stays in_progress", async () => {
    const dir = await repo()
    const { taskId } = await projectTask(s, alice.key, dir)
    const tag = `tw-sleeper-child-${Date.now()}-${Math.random().toString(36).slice(2)}`
    await scriptedAgent(s, "sleeper", [
      { write: "partial.txt", content: "half\n" },
      { spawn_child_sleep_ms: 60_000, ignore_sigterm: true, tag },
      { stdout: "ready" },
      { sleep_ms: 60_000 }
    ])
    const { run_id } = await startRun(s, alice.key, taskId, { agent: "sleeper" })
    const logs = await waitFor(
      () => getLogs(s, alice.key, run_id, "?limit=1000"),
      (ls) => ls.some((l) => l.message === "ready"),
      10_000,
      "the agent to be ready"
    )
    const agentPid = Number(
      /process group (\d+)/.exec(logs.find((l) => l.message.startsWith("Started "))?.message ?? "")?.[1]
    )
    // The host's pid of the grandchild (the agent sees its sandbox's own pids).
    const childPids = pidsTagged(tag)
    expect(childPids).toHaveLength(1)
    expect(isRunning(agentPid)).toBe(true)

    const stopped = await s.request<RunView>("POST", `/api/runs/${run_id}/stop`, { key: alice.key })
    expect(stopped.status, stopped.text).toBe(200)
    expect(stopped.body).toMatchObject({ id: run_id, status: "stopped", error: null })
    expect(stopped.body.completed_at).toMatch(ISO)
    // The grandchild ignored SIGTERM: it took a SIGKILL, before the answer.
    expect(isRunning(agentPid)).toBe(false)
    expect(pidsTagged(tag)).toEqual([])
    // The partial work is kept on the branch.
    expect(stopped.body.output).toMatchObject({ files_modified: ["partial.txt"], lines_added: 1, lines_removed: 0 })
    expect(git(dir, "show", `taskwright/task-${taskId}:partial.txt`)).toBe("half\n")

    const task = await s.request<{ status: string }>("GET", `/api/tasks/${taskId}`, { key: alice.key })
    expect(task.body.status).toBe("in_progress")
    const again = await s.request("POST", `/api/runs/${run_id}/stop`, { key: alice.key })
    expect(expectError(again, 409, "CONFLICT").details).toMatchObject({ reason: "run_ended", status: "stopped" })
    const messages = (await allLogs(s, alice.key, run_id)).map((l) => l.message)
    expect(messages).toContain(`Stopped by ${alice.id}`)
    expect(messages.at(-1)).toBe("Run stopped")
  })

  it("fails a run past its timeout and kills it", async () => {
    const dir = await repo()
    const { taskId } = await projectTask(s, alice.key, dir)
    await scriptedAgent(s, "slow", [{ stdout: "working" }, { sleep_ms: 60_000 }], { timeout_s: 1 })
    const { run_id } = await startRun(s, alice.key, taskId, { agent: "slow" })
    const run = await waitForEnd(s, alice.key, run_id, 15_000)
    expect(run).toMatchObject({ status: "failed", error: "timed out after 1 s" })
    const logs = await allLogs(s, alice.key, run_id)
    const pid = Number(
      /process group (\d+)/.exec(logs.find((l) => l.message.startsWith("Started "))?.message ?? "")?.[1]
    )
    expect(isRunning(pid)).toBe(false)
    expect(logs.some((l) => l.level === "error" && l.message.startsWith("Timed out after 1 s"))).toBe(true)
    const task = await s.request<{ status: string }>("GET", `/api/tasks/${taskId}`, { key: alice.key })
    expect(task.body.status).toBe("in_progress")
  })

  it("fails a run whose agent exits non-zero, and one whose program cannot start", async () => {
    const dir = await repo()
    const { taskId } = await projectTask(s, alice.key, dir)
    await scriptedAgent(s, "crasher", [{ stderr: "boom" }, { exit: 3 }])
    const a = await startRun(s, alice.key, taskId, { agent: "crasher" })
    expect(await waitForEnd(s, alice.key, a.run_id)).toMatchObject({
      status: "failed",
      error: "the agent exited with code 3"
    })
    const logs = await allLogs(s, alice.key, a.run_id)
    expect(logs.find((l) => l.message === "boom")?.level).toBe("warn")

    await configureAgent(s, "missing", { enabled: true, command: ["/nonexistent/taskwright-agent"] })
    const b = await startRun(s, alice.key, taskId, { agent: "missing" })
    const run = await waitForEnd(s, alice.key, b.run_id)
    expect(run.status).toBe("failed")
    expect(run.error).toMatch(/^could not start the agent/)
  })

  it("caps stored log volume with a single truncation notice", async () => {
    const dir = await repo()
    const { taskId } = await projectTask(s, alice.key, dir)
    await scriptedAgent(s, "flood", [{ lines: 5000, prefix: "flood" }], { max_log_bytes: 4096 })
    const { run_id } = await startRun(s, alice.key, taskId, { agent: "flood" })
    expect((await waitForEnd(s, alice.key, run_id)).status).toBe("completed")
    const logs = await allLogs(s, alice.key, run_id)
    const flood = logs.filter((l) => l.message.startsWith("flood "))
    const bytes = flood.reduce((n, l) => n + Buffer.byteLength(l.message) + 1, 0)
    expect(bytes).toBeLessThanOrEqual(4096)
    expect(bytes).toBeGreaterThan(4096 - 20)
    expect(flood.at(-1)?.message).toBe(`flood ${flood.length}`)
    const notices = logs.filter((l) => l.message.includes("output exceeded"))
    expect(notices).toHaveLength(1)
    expect(notices[0]?.level).toBe("warn")
  })

  it("launches the built-in CLIs with their flags and turns their event streams into entries and usage", async () => {
    const dir = await repo()
    const { taskId } = await projectTask(s, alice.key, dir, {
      title: "Fix the bug",
      description: "The app crashes on start."
    })
    const script = (kind: string) => [
      { print_argv: true },
      { echo_prompt: true },
      { write: `${kind}.txt`, content: "done\n" },
      { [`${kind}_stream`]: true, result: `${kind} finished` }
    ]
    const prompt = "Fix the bug\n\nThe app crashes on start."
    const cases = [
      {
        agent: "claude-code",
        kind: "claude",
        settings: { model: "sonnet" },
        autonomy: "read-only",
        argv: ["-p", "--output-format", "stream-json", "--verbose", "--model", "sonnet", "--permission-mode", "plan"],
        stdin: prompt,
        usage: { input_tokens: 1500, output_tokens: 150, cost_usd: 0.0125 },
        entries: [
          ["info", "I will edit the file."],
          ["debug", "Thinking: Planning the change."],
          ["info", "Edit src/app.ts"],
          ["error", "$ npm test failed: 1 failing"],
          ["info", "Finished: success (3 turns, 4.2 s, $0.0125)"]
        ]
      },
      {
        agent: "codex",
        kind: "codex",
        settings: {},
        autonomy: "workspace-write",
        argv: ["exec", "--json", "--sandbox", "workspace-write", "-"],
        stdin: prompt,
        usage: { input_tokens: 2400, output_tokens: 320, cost_usd: null },
        entries: [
          ["info", "Codex thread thread-scripted started"],
          ["info", "$ bash -lc 'npm test' (exit 0)"],
          ["info", "Add src/new.ts"],
          ["info", "codex finished"]
        ]
      },
      {
        agent: "gemini",
        kind: "gemini",
        settings: { model: "gemini-2.5-pro" },
        autonomy: "danger-full-access",
        argv: ["-p", prompt, "--output-format", "stream-json", "--approval-mode", "yolo", "--model", "gemini-2.5-pro"],
        stdin: "",
        usage: { input_tokens: 700, output_tokens: 200, cost_usd: null },
        entries: [
          ["info", "Write src/app.ts"],
          ["info", "gemini finished"],
          ["info", "Finished: success (900 tokens, 1 tool calls, 1.5 s)"]
        ]
      }
    ] as const
    for (const c of cases) {
      await configureAgent(s, c.agent, {
        enabled: true,
        command: [process.execPath, scriptedAgentPath],
        env: { TASKWRIGHT_SCRIPT: JSON.stringify(script(c.kind)) },
        read_only_paths: scriptedAgentPaths,
        ...c.settings
      })
      const { run_id } = await startRun(s, alice.key, taskId, {
        agent: c.agent,
        autonomy: c.autonomy,
        branch: `cli/${c.agent}`
      })
      const run = await waitForEnd(s, alice.key, run_id)
      expect(run.status, c.agent).toBe("completed")
      expect(run.autonomy).toBe(c.autonomy)
      expect(run.output.usage).toEqual(c.usage)
      expect(run.output.files_modified).toEqual([`${c.kind}.txt`])
      const logs = await allLogs(s, alice.key, run_id)
      const argvLine = logs.find((l) => l.message.startsWith("argv "))?.message ?? ""
      expect(JSON.parse(argvLine.slice(5)), c.agent).toEqual(c.argv)
      expect(logs.find((l) => l.message.startsWith("stdin "))?.message).toBe(`stdin ${JSON.stringify(c.stdin)}`)
      expect(logs.find((l) => l.message.startsWith("TASKWRIGHT_PROMPT "))?.message).toBe(
        `TASKWRIGHT_PROMPT ${JSON.stringify(prompt)}`
      )
      for (const [level, message] of c.entries) {
        expect(
          logs.some((l) => l.level === level && l.message === message),
          `${c.agent}: ${level} ${message}`
        ).toBe(true)
      }
      // Only our own summary lines are debug/info/warn/error; no raw JSON leaked into the log.
      expect(logs.some((l) => l.message.startsWith('{"type"'))).toBe(false)
      // The agent's final answer is the commit message's body.
      expect(git(dir, "log", "-1", "--format=%B", `cli/${c.agent}`)).toContain(`${c.kind} finished`)
    }
  })

  it("gives an agent none of the service's secrets, only its allow-list and the run's variables", async () => {
    const saved = { jwt: process.env.TASKWRIGHT_JWT_SECRET, db: process.env.DATABASE_URL }
    process.env.TASKWRIGHT_JWT_SECRET = "jwt-secret-that-must-not-leak-0123456789abcdef"
    process.env.DATABASE_URL = "postgres://leaky:db-password-must-not-leak@127.0.0.1:5432/x"
    try {
      const dir = await repo()
      const { taskId } = await projectTask(s, alice.key, dir)
      await scriptedAgent(s, "env-printer", [{ print_env: true }], {
        env: { TASKWRIGHT_SCRIPT: JSON.stringify([{ print_env: true }]), MY_SETTING: "configured" }
      })
      const { run_id } = await startRun(s, alice.key, taskId, { agent: "env-printer" })
      expect((await waitForEnd(s, alice.key, run_id)).status).toBe("completed")
      const env = new Map(
        (await allLogs(s, alice.key, run_id))
          .filter((l) => l.message.startsWith("env "))
          .map((l) => {
            const kv = l.message.slice(4)
            return [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)] as const
          })
      )
      const text = [...env.entries()].join("\n")
      expect(text).not.toContain("jwt-secret-that-must-not-leak")
      expect(text).not.toContain("db-password-must-not-leak")
      expect(env.has("DATABASE_URL")).toBe(false)
      expect(env.has("TASKWRIGHT_JWT_SECRET")).toBe(false)
      expect(env.get("TASKWRIGHT_RUN_ID")).toBe(run_id)
      expect(env.get("TASKWRIGHT_TASK_ID")).toBe(String(taskId))
      expect(env.get("MY_SETTING")).toBe("configured")
      expect(env.get("PATH")).toBe(process.env.PATH)
      // The allow-list (locale, proxies, CA bundles, the agent CLIs' own keys and config), the
      // agent's configured variables and the run's (and PWD, which bwrap sets in a sandbox).
      const allowed =
        /^(PATH|HOME|USER|LOGNAME|LANG|TERM|TMPDIR|SHELL|TZ|PWD|LC_.*|(HTTPS?|NO)_PROXY|(https?|no)_proxy|NODE_EXTRA_CA_CERTS|SSL_CERT_FILE|(ANTHROPIC|OPENAI|GEMINI|GOOGLE)_API_KEY|CODEX_HOME|CLAUDE_CONFIG_DIR|MY_SETTING|TASKWRIGHT_(SCRIPT|PROMPT|TASK_ID|RUN_ID|BRANCH|MODEL|AUTONOMY))$/
      for (const key of env.keys()) expect(key, `unexpected variable ${key}`).toMatch(allowed)
    } finally {
      if (saved.jwt === undefined) delete process.env.TASKWRIGHT_JWT_SECRET
      else process.env.TASKWRIGHT_JWT_SECRET = saved.jwt
      if (saved.db === undefined) delete process.env.DATABASE_URL
      else process.env.DATABASE_URL = saved.db
    }
    // DATABASE_URL cannot be configured into an agent either.
    const r = await s.request("PUT", "/api/agents/env-printer", {
      key: s.adminKey,
      body: { env: { DATABASE_URL: "postgres://x" } }
    })
    expectError(r, 400, "BAD_REQUEST")
  })

  it("never runs the repository's hooks, fsmonitor or filters", async () => {
    const dir = await repo({ "README.md": "hello\n", ".gitattributes": "*.txt filter=evil\n" })
    const markers = await mkdtemp(join(tmpdir(), "tw-markers-"))
    dirs.push(markers)
    const trap = (name: string) => {
      const file = join(dir, ".git", "hooks", name)
      writeFileSync(file, `#!/bin/sh\ntouch "${markers}/${name}"\ncat >/dev/null 2>&1 || true\n`)
      chmodSync(file, 0o755)
      return file
    }
    for (const hook of [
      "post-checkout",
      "pre-commit",
      "prepare-commit-msg",
      "commit-msg",
      "post-commit",
      "reference-transaction",
      "post-index-change"
    ]) {
      trap(hook)
    }
    const fsmonitor = trap("fsmonitor-trap")
    git(dir, "config", "core.fsmonitor", fsmonitor)
    git(dir, "config", "filter.evil.clean", `sh -c 'touch "${markers}/filter-clean"; cat'`)
    git(dir, "config", "filter.evil.smudge", `sh -c 'touch "${markers}/filter-smudge"; cat'`)

    const { taskId } = await projectTask(s, alice.key, dir)
    await scriptedAgent(s, "hooked", [
      { write: "notes.txt", content: "n\n" },
      { append: "README.md", content: "more\n" }
    ])
    const { run_id } = await startRun(s, alice.key, taskId, { agent: "hooked" })
    const run = await waitForEnd(s, alice.key, run_id)
    expect(run.status).toBe("completed")
    expect(run.output).toMatchObject({ files_modified: ["README.md", "notes.txt"], lines_added: 2 })
    const stillThere = git(
      dir,
      "-c",
      "core.fsmonitor=false",
      "-c",
      "core.hooksPath=/dev/null",
      "ls-tree",
      "-r",
      "--name-only",
      run.output.commit ?? ""
    )
    expect(stillThere).toContain("notes.txt")
    expect(readdirSync(markers)).toEqual([])
    // The traps are armed: a plain git in the repository springs them.
    git(dir, "status")
    expect(readdirSync(markers)).toContain("fsmonitor-trap")
  })
})
