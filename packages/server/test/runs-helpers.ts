/**
 * Helpers of the agent-run suites: real git repositories in temp dirs, projects and tasks over
 * HTTP, agents configured to run the scripted agent, polling, and process checks.
 */
import { readdirSync, readFileSync } from "node:fs"
import { dirname } from "node:path"
import { isRunning, type Script, scriptedAgentPath, type TestServer, waitFor as waitUntil } from "@taskwright/testing"
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

/** Configures agent `name` (admin) and checks the answer. */
export const configureAgent = async (s: TestServer, name: string, settings: Record<string, unknown>) => {
  const r = await s.request<Record<string, unknown>>("PUT", `/api/agents/${name}`, { key: s.adminKey, body: settings })
  expect(r.status, r.text).toBe(200)
  return r.body
}

/**
 * What a sandboxed agent must be shown to run the scripted agent wherever this checkout is
 * (under /home or /tmp, which sandboxes hide, on some CI machines).
 */
export const scriptedAgentPaths = [dirname(scriptedAgentPath)]

/** A `command` agent named `name` running the scripted agent with `script`. */
export const scriptedAgent = (s: TestServer, name: string, script: Script, extra: Record<string, unknown> = {}) =>
  configureAgent(s, name, {
    enabled: true,
    command: [process.execPath, scriptedAgentPath],
    env: { TASKWRIGHT_SCRIPT: JSON.stringify(script) },
    read_only_paths: scriptedAgentPaths,
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
export const waitFor = <T>(
  probe: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 20_000,
  what = "condition"
) => waitUntil(probe, done, { timeoutMs, intervalMs: 50, what })

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

/**
 * Host pids of the live processes whose command line holds `tag`: how a test finds what an agent
 * started, whose own view of its pids is its sandbox's PID namespace.
 */
export const pidsTagged = (tag: string): ReadonlyArray<number> => {
  const out: Array<number> = []
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, "utf8")
      if (cmdline.split("\0").some((arg) => arg.includes(tag)) && isRunning(Number(name))) out.push(Number(name))
    } catch {
      // gone, or not ours to read
    }
  }
  return out
}

export interface Envelope {
  readonly error: { readonly code: string; readonly message: string; readonly details: Record<string, unknown> }
}

export const expectError = (r: { status: number; body: unknown; text: string }, status: number, code: string) => {
  expect(r.status, r.text).toBe(status)
  expect((r.body as Envelope).error.code).toBe(code)
  return (r.body as Envelope).error
}
