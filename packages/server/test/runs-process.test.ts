/**
 * Agent runs across the life of a real server process (`node packages/cli/dist/main.js serve`,
 * built with `npm run build`; rebuilt here when the sources are newer), on every store:
 *
 * - SIGKILL an unsandboxed server (`TASKWRIGHT_SANDBOX=off`) mid-run, start it again: the run is
 *   `failed` with a log entry saying why, no log line stored before the kill is lost, the orphaned
 *   agent (it outlives its server without a sandbox) is ended, its work committed (a sandboxed
 *   agent dies with its server: runs-hostile.test.ts);
 * - SIGTERM the (sandboxed) server mid-run: it stops the run cleanly (agent gone, work committed,
 *   state recorded) and exits 0;
 * - the agent sees none of the server's secrets (`TASKWRIGHT_JWT_SECRET`, `DATABASE_URL`).
 */
import { existsSync, readFileSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { git, isRunning, makeRepo, scriptedAgentPath, testStores } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type RunView, scriptedAgentPaths, waitFor } from "./runs-helpers.js"
import {
  client,
  ensureBuilt,
  groupOf,
  killServer,
  makeStore,
  type ServerProcess,
  serverEnv,
  startServer
} from "./runs-server.js"

const JWT_SECRET = `jwt-secret-${"s".repeat(40)}`

describe.each(testStores())("runs across server processes on %s", (store) => {
  let dataDir: string
  let repo: string
  let databaseUrl: string | undefined
  let dropStore: () => Promise<void> = async () => {}
  let key: string
  let server: ServerProcess | undefined
  const { ok, allLogs } = client(
    () => server,
    () => key
  )
  const start = (extra: Record<string, string> = {}) =>
    startServer({
      dataDir,
      databaseUrl,
      env: serverEnv({ TASKWRIGHT_JWT_SECRET: JWT_SECRET, ...extra })
    })

  beforeAll(async () => {
    await ensureBuilt()
    dataDir = await mkdtemp(join(tmpdir(), "tw-proc-runs-"))
    repo = await makeRepo()
    ;({ databaseUrl, drop: dropStore } = await makeStore(store))
    server = await start({ TASKWRIGHT_SANDBOX: "off" })
    key = readFileSync(join(dataDir, "admin-key.txt"), "utf8").trim()
  }, 300_000)
  afterAll(async () => {
    await killServer(server)
    await dropStore()
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

  it("a SIGKILLed unsandboxed server's run is failed on restart, its logs intact, its agent ended, its work committed", async () => {
    await ok("PUT", "/api/agents/worker", {
      enabled: true,
      command: [process.execPath, scriptedAgentPath],
      read_only_paths: scriptedAgentPaths,
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
    // Nobody supervises the agent now; unsandboxed, it is still there.
    expect(isRunning(agent)).toBe(true)

    // The next start is sandboxed (the default): its recovery ends the unsandboxed leftovers all the same.
    server = await start()
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

  it("SIGTERM stops running (sandboxed) runs cleanly, records them and exits 0", async () => {
    const { taskId, runId, logs } = await startLongRun("Shut down mid-run")
    const agent = groupOf(logs)
    server?.child.kill("SIGTERM")
    const exit = await server?.exited
    expect(exit).toEqual({ code: 0, signal: null })
    expect(isRunning(agent)).toBe(false)

    server = await start()
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
