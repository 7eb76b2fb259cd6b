/**
 * Agent runs across the life of a real server process (`node packages/cli/dist/main.js serve`,
 * built with `npm run build`; rebuilt here when the sources are newer), on every store:
 *
 * - SIGKILL the server mid-run, start it again: the run is `failed` with a log entry saying why,
 *   no log line stored before the kill is lost, the orphaned agent is ended, its work committed;
 * - SIGTERM the server mid-run: it stops the run cleanly (agent gone, work committed, state
 *   recorded) and exits 0;
 * - the agent sees none of the server's secrets (`TASKWRIGHT_JWT_SECRET`, `DATABASE_URL`).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { randomBase62 } from "@taskwright/core"
import { scriptedAgentPath, testPostgresUrl, testStores } from "@taskwright/testing"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { git, isRunning, type LogView, makeRepo, type RunView, waitFor } from "./runs-helpers.js"

const ROOT = resolve(__dirname, "..", "..", "..")
const MAIN = join(ROOT, "packages/cli/dist/main.js")
const JWT_SECRET = `jwt-secret-${"s".repeat(40)}`

const newestSource = (dir: string): number => {
  let newest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    newest = Math.max(newest, entry.isDirectory() ? newestSource(path) : statSync(path).mtimeMs)
  }
  return newest
}

/** `npm run build` unless packages/cli/dist/main.js is newer than every source it bundles. */
const ensureBuilt = () => {
  const sources = Math.max(
    ...["core", "api", "server", "cli"].map((p) => newestSource(join(ROOT, "packages", p, "src")))
  )
  if (existsSync(MAIN) && statSync(MAIN).mtimeMs >= sources) return
  execFileSync("npm", ["run", "build"], { cwd: ROOT, stdio: "ignore", timeout: 280_000 })
}

interface Server {
  readonly url: string
  readonly child: ChildProcess
  readonly output: () => string
  readonly exited: Promise<{ code: number | null; signal: string | null }>
}

const startServer = async (dataDir: string, databaseUrl: string | undefined): Promise<Server> => {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "/tmp",
    TASKWRIGHT_JWT_SECRET: JWT_SECRET,
    // The tests poll; rate limits are not what they are about.
    TASKWRIGHT_RATE_LIMIT: "1000000"
  }
  if (databaseUrl !== undefined) env.DATABASE_URL = databaseUrl
  const child = spawn(process.execPath, [MAIN, "serve", "--port", "0", "--data-dir", dataDir, "--json"], {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout?.on("data", (c: Buffer) => {
    output += c.toString()
  })
  child.stderr?.on("data", (c: Buffer) => {
    output += c.toString()
  })
  const exited = new Promise<{ code: number | null; signal: string | null }>((done) =>
    child.once("exit", (code, signal) => done({ code, signal }))
  )
  const url = await new Promise<string>((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`server did not start:\n${output}`)), 30_000)
    const onData = () => {
      // `--json` prints one (pretty-printed) object once the server listens.
      const block = /^\{[\s\S]*?^\}$/m.exec(output)?.[0]
      if (block === undefined) return
      clearTimeout(timer)
      child.stdout?.off("data", onData)
      done((JSON.parse(block) as { url: string }).url)
    }
    child.stdout?.on("data", onData)
    void exited.then(({ code }) => {
      clearTimeout(timer)
      fail(new Error(`server exited with ${code}:\n${output}`))
    })
  })
  return { url, child, output: () => output, exited }
}

const adminQuery = async (text: string) => {
  const client = new pg.Client({ connectionString: testPostgresUrl() })
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}

describe.each(testStores())("runs across server processes on %s", (store) => {
  let dataDir: string
  let repo: string
  let databaseUrl: string | undefined
  let database: string | undefined
  let key: string
  let server: Server | undefined

  const call = async <T>(method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server?.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { "content-type": "application/json" })
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const text = await res.text()
    return { status: res.status, body: (text === "" ? undefined : JSON.parse(text)) as T, text }
  }
  const ok = async <T>(method: string, path: string, body?: unknown) => {
    const r = await call<T>(method, path, body)
    expect(r.status, `${method} ${path}: ${r.text}`).toBeLessThan(300)
    return r.body
  }
  const allLogs = async (runId: string) => {
    const out: Array<LogView> = []
    for (;;) {
      const page = await ok<{ logs: Array<LogView> }>(
        "GET",
        `/api/runs/${runId}/logs?after=${out.at(-1)?.seq ?? 0}&limit=1000`
      )
      out.push(...page.logs)
      if (page.logs.length < 1000) return out
    }
  }
  const groupOf = (logs: ReadonlyArray<LogView>) =>
    Number(/process group (\d+)/.exec(logs.find((l) => l.message.startsWith("Started "))?.message ?? "")?.[1])

  beforeAll(async () => {
    ensureBuilt()
    dataDir = await mkdtemp(join(tmpdir(), "tw-proc-runs-"))
    repo = await makeRepo()
    if (store === "postgres") {
      database = `tw_runs_${randomBase62(12).toLowerCase()}`
      await adminQuery(`CREATE DATABASE ${database}`)
      const u = new URL(testPostgresUrl())
      u.pathname = `/${database}`
      databaseUrl = u.toString()
    }
    server = await startServer(dataDir, databaseUrl)
    key = readFileSync(join(dataDir, "admin-key.txt"), "utf8").trim()
  }, 300_000)
  afterAll(async () => {
    if (server !== undefined && server.child.exitCode === null && server.child.signalCode === null) {
      server.child.kill("SIGKILL")
      await server.exited
    }
    if (database !== undefined) await adminQuery(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
    await rm(dataDir, { recursive: true, force: true })
    await rm(repo, { recursive: true, force: true })
  })

  const startLongRun = async (title: string) => {
    const project = await ok<{ id: string }>("POST", "/api/projects", { name: title, path: repo })
    const task = await ok<{ id: number }>("POST", "/api/tasks", { title, project_id: project.id })
    const run = await ok<{ run_id: string }>("POST", `/api/tasks/${task.id}/run`, {
      agent: "worker",
      branch: `proc/${task.id}`
    })
    const logs = await waitFor(
      () => allLogs(run.run_id),
      (ls) => ls.some((l) => l.message === "waiting"),
      20_000,
      "the agent to be waiting"
    )
    return { taskId: task.id, runId: run.run_id, logs }
  }

  it("a SIGKILLed server's run is failed on restart, its logs intact, its agent ended, its work committed", async () => {
    await ok("PUT", "/api/agents/worker", {
      enabled: true,
      command: [process.execPath, scriptedAgentPath],
      env: {
        TASKWRIGHT_SCRIPT: JSON.stringify([
          { print_env: true },
          { write: "work.txt", content: "one\ntwo\n" },
          { lines: 3000, prefix: "before-kill" },
          { stdout: "waiting" },
          { sleep_ms: 120_000 }
        ])
      }
    })
    const { taskId, runId, logs: before } = await startLongRun("Killed mid-run")

    // The agent saw none of the server's secrets.
    const envText = before
      .filter((l) => l.message.startsWith("env "))
      .map((l) => l.message)
      .join("\n")
    expect(envText).toContain(`env TASKWRIGHT_RUN_ID=${runId}`)
    expect(envText).not.toContain(JWT_SECRET)
    expect(envText).not.toContain("TASKWRIGHT_JWT_SECRET")
    expect(envText).not.toContain("DATABASE_URL")
    if (databaseUrl !== undefined) expect(envText).not.toContain(databaseUrl)

    const agent = groupOf(before)
    expect(isRunning(agent)).toBe(true)
    server?.child.kill("SIGKILL")
    await server?.exited
    // Nobody supervises the agent now; it is still there.
    expect(isRunning(agent)).toBe(true)

    server = await startServer(dataDir, databaseUrl)
    const run = await ok<RunView>("GET", `/api/runs/${runId}`)
    expect(run.status).toBe("failed")
    expect(run.error).toBe("the service stopped while the run was in progress")
    expect(run.completed_at).not.toBeNull()
    expect(isRunning(agent)).toBe(false)
    expect(run.output).toMatchObject({ files_modified: ["work.txt"], lines_added: 2, lines_removed: 0 })
    expect(git(repo, "show", `proc/${taskId}:work.txt`)).toBe("one\ntwo\n")
    expect(existsSync(join(dataDir, "worktrees", runId))).toBe(false)

    const after = await allLogs(runId)
    // Every line stored before the kill is still there, in order, and the story goes on from it.
    expect(after.slice(0, before.length)).toEqual(before)
    expect(after.filter((l) => l.message.startsWith("before-kill ")).length).toBe(3000)
    const added = after.slice(before.length)
    expect(added[0]).toMatchObject({ level: "error", seq: before.length + 1 })
    expect(added[0]?.message).toMatch(/service stopped without finishing this run/)
    expect(added.map((l) => l.seq)).toEqual(added.map((_, i) => before.length + 1 + i))
    expect(added.some((l) => l.message === `Ended the agent's leftover processes (process group ${agent})`)).toBe(true)
    const task = await ok<{ status: string }>("GET", `/api/tasks/${taskId}`)
    expect(task.status).toBe("in_progress")
    expect(server.output()).toContain("marked 1 run(s) failed")
  })

  it("SIGTERM stops running runs cleanly, records them and exits 0", async () => {
    const { taskId, runId, logs } = await startLongRun("Shut down mid-run")
    const agent = groupOf(logs)
    server?.child.kill("SIGTERM")
    const exit = await server?.exited
    expect(exit).toEqual({ code: 0, signal: null })
    expect(isRunning(agent)).toBe(false)

    server = await startServer(dataDir, databaseUrl)
    // Recorded by the shutdown itself, not by the recovery of the next start.
    expect(server.output()).not.toContain("marked")
    const run = await ok<RunView>("GET", `/api/runs/${runId}`)
    expect(run).toMatchObject({ status: "failed", error: "the service shut down during the run" })
    expect(run.output.files_modified).toEqual(["work.txt"])
    expect(git(repo, "show", `proc/${taskId}:work.txt`)).toBe("one\ntwo\n")
    const messages = (await allLogs(runId)).map((l) => l.message)
    expect(messages).toContain("The service shut down during the run; the agent was stopped")
    expect(messages.at(-1)).toBe("Run failed")
  })
})
