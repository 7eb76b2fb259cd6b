/**
 * Helpers of the agent-run suites: real git repositories in temp dirs, projects and tasks over
 * HTTP, agents configured to run the scripted agent, polling, and process checks.
 */
import { execFileSync } from "node:child_process"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { mkdtemp } from "node:fs/promises"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { type Script, scriptedAgentPath, type TestServer } from "@taskwright/testing"
import { expect } from "vitest"

export interface RunView {
  readonly id: string
  readonly task_id: number
  readonly agent: string
  readonly status: string
  readonly started_at: string
  readonly completed_at: string | null
  readonly branch: string
  readonly autonomy: string
  readonly error: string | null
  readonly output: {
    readonly files_modified: ReadonlyArray<string>
    readonly lines_added: number
    readonly lines_removed: number
    readonly usage?: { input_tokens: number; output_tokens: number; cost_usd: number | null }
    readonly commit?: string
  }
}

export interface LogView {
  readonly seq: number
  readonly timestamp: string
  readonly level: string
  readonly message: string
}

export const git = (cwd: string, ...args: ReadonlyArray<string>): string =>
  execFileSync("git", ["-c", "user.name=Test", "-c", "user.email=test@example.test", ...args], {
    cwd,
    encoding: "utf8",
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", LC_ALL: "C" }
  })

/** A git repository on `main` with one commit holding `files`. */
export const makeRepo = async (
  files: Record<string, string> = {
    "README.md": "# Project\n\nline a\nline b\nline c\n",
    "src/app.ts": "export const a = 1\n"
  }
): Promise<string> => {
  const dir = await mkdtemp(join(tmpdir(), "tw-repo-"))
  git(dir, "init", "-q", "-b", "main")
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true })
    writeFileSync(join(dir, path), content)
  }
  git(dir, "add", "-A")
  git(dir, "commit", "-q", "-m", "initial")
  return dir
}

/** Configures agent `name` (admin) and checks the answer. */
export const configureAgent = async (s: TestServer, name: string, settings: Record<string, unknown>) => {
  const r = await s.request<Record<string, unknown>>("PUT", `/api/agents/${name}`, { key: s.adminKey, body: settings })
  expect(r.status, r.text).toBe(200)
  return r.body
}

/** A `command` agent named `name` running the scripted agent with `script`. */
export const scriptedAgent = (s: TestServer, name: string, script: Script, extra: Record<string, unknown> = {}) =>
  configureAgent(s, name, {
    enabled: true,
    command: [process.execPath, scriptedAgentPath],
    env: { TASKWRIGHT_SCRIPT: JSON.stringify(script) },
    ...extra
  })

/** A project over `repo` and a task in it, owned by the holder of `key`. */
export const projectTask = async (
  s: TestServer,
  key: string,
  repo: string,
  task: Record<string, unknown> = { title: "Make the change", description: "Edit the files." }
) => {
  const p = await s.request<{ id: string }>("POST", "/api/projects", { key, body: { name: "Repo", path: repo } })
  expect(p.status, p.text).toBe(201)
  const t = await s.request<{ id: number }>("POST", "/api/tasks", { key, body: { ...task, project_id: p.body.id } })
  expect(t.status, t.text).toBe(201)
  return { projectId: p.body.id, taskId: t.body.id }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls `probe` until `done` holds (or fails the test after `timeoutMs`). */
export const waitFor = async <T>(
  probe: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 20_000,
  what = "condition"
): Promise<T> => {
  const deadline = Date.now() + timeoutMs
  let value = await probe()
  while (!done(value)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`)
    await sleep(50)
    value = await probe()
  }
  return value
}

export const getRun = async (s: TestServer, key: string, runId: string) => {
  const r = await s.request<RunView>("GET", `/api/runs/${runId}`, { key })
  expect(r.status, r.text).toBe(200)
  return r.body
}

/** Waits until the run has ended and answers it. */
export const waitForEnd = (s: TestServer, key: string, runId: string, timeoutMs = 30_000) =>
  waitFor(
    () => getRun(s, key, runId),
    (run) => run.status !== "running",
    timeoutMs,
    `run ${runId} to end`
  )

export const getLogs = async (s: TestServer, key: string, runId: string, query = "") => {
  const r = await s.request<{ logs: ReadonlyArray<LogView> }>("GET", `/api/runs/${runId}/logs${query}`, { key })
  expect(r.status, r.text).toBe(200)
  return r.body.logs
}

/** Every log entry of a run, paged with `after`. */
export const allLogs = async (s: TestServer, key: string, runId: string) => {
  const out: Array<LogView> = []
  for (;;) {
    const page = await getLogs(s, key, runId, `?after=${out.at(-1)?.seq ?? 0}&limit=1000`)
    out.push(...page)
    if (page.length < 1000) return out
  }
}

export const startRun = async (s: TestServer, key: string, taskId: number, body: Record<string, unknown>) => {
  const r = await s.request<{ run_id: string; status: string; branch: string; autonomy: string }>(
    "POST",
    `/api/tasks/${taskId}/run`,
    { key, body }
  )
  expect(r.status, r.text).toBe(201)
  return r.body
}

/** True while `pid` runs. Zombies count as gone: the sandbox's init does not reap orphans. */
export const isRunning = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return false
    throw error
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z"
  } catch {
    return false
  }
}

export interface Envelope {
  readonly error: { readonly code: string; readonly message: string; readonly details: Record<string, unknown> }
}

export const expectError = (r: { status: number; body: unknown; text: string }, status: number, code: string) => {
  expect(r.status, r.text).toBe(status)
  expect((r.body as Envelope).error.code).toBe(code)
  return (r.body as Envelope).error
}
