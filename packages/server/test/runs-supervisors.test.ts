/**
 * Two real server processes sharing one store (a SQLite file, or a PostgreSQL database), as
 * behind a load balancer:
 *
 * - the second one starting (its start-up recovery) and sweeping leaves the first one's running
 *   run alone: its supervisor is alive;
 * - a stop asked through the second one is carried out by the first (the run's supervisor) and
 *   answered once the run is recorded `stopped`;
 * - the first one SIGKILLed mid-run: the second one finds the run orphaned (same machine, its
 *   process gone), ends the agent's leftovers, commits its work and records it `failed`, within a
 *   sweep, without being restarted; a stop asked meanwhile answers 409 with that outcome.
 */
import { existsSync, readFileSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { git, isRunning, makeRepo, scriptedAgentPath, testStores } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type RunView, scriptedAgentPaths, sleep, waitFor } from "./runs-helpers.js"
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

describe.each(testStores())("runs shared by two server processes on %s", (store) => {
  let dataDir: string
  let repo: string
  let databaseUrl: string | undefined
  let dropStore: () => Promise<void> = async () => {}
  let key: string
  let first: ServerProcess | undefined
  let second: ServerProcess | undefined
  const viaFirst = client(
    () => first,
    () => key
  )
  const viaSecond = client(
    () => second,
    () => key
  )
  const start = (extra: Record<string, string> = {}) =>
    startServer({
      dataDir,
      databaseUrl,
      env: serverEnv({ TASKWRIGHT_JWT_SECRET: `jwt-secret-${"s".repeat(40)}`, ...extra })
    })

  beforeAll(async () => {
    await ensureBuilt()
    dataDir = await mkdtemp(join(tmpdir(), "tw-two-procs-"))
    repo = await makeRepo()
    ;({ databaseUrl, drop: dropStore } = await makeStore(store))
    // Unsandboxed, the first one's agent outlives it when it is killed: the leftovers to end.
    first = await start({ TASKWRIGHT_SANDBOX: "off" })
    key = readFileSync(join(dataDir, "admin-key.txt"), "utf8").trim()
    await viaFirst.ok("PUT", "/api/agents/worker", {
      enabled: true,
      command: [process.execPath, scriptedAgentPath],
      read_only_paths: scriptedAgentPaths,
      env: {
        TASKWRIGHT_SCRIPT: JSON.stringify([
          { write: "work.txt", content: "done before the end\n" },
          { stdout: "waiting" },
          { sleep_ms: 120_000 }
        ])
      }
    })
  }, 300_000)
  afterAll(async () => {
    await killServer(first)
    await killServer(second)
    await dropStore()
    await rm(dataDir, { recursive: true, force: true })
    await rm(repo, { recursive: true, force: true })
  })

  /** A run on the first process whose agent is waiting. */
  const startOnFirst = async (title: string) => {
    const project = await viaFirst.ok<{ id: string }>("POST", "/api/projects", { name: title, path: repo })
    const task = await viaFirst.ok<{ id: number }>("POST", "/api/tasks", { title, project_id: project.id })
    const run = await viaFirst.ok<{ run_id: string }>("POST", `/api/tasks/${task.id}/run`, {
      agent: "worker",
      branch: `two/${task.id}`
    })
    const logs = await waitFor(
      () => viaFirst.allLogs(run.run_id),
      (ls) => ls.some((l) => l.message === "waiting"),
      20_000,
      "the agent to be waiting"
    )
    return { taskId: task.id, runId: run.run_id, agent: groupOf(logs) }
  }

  it("leaves a live process's run alone, and stops it through the other process", async () => {
    const { runId, agent } = await startOnFirst("Stopped through the other one")
    second = await start()
    expect(second.output()).not.toContain("marked")
    // Past a sweep of the second process: still running, still the first one's.
    await sleep(7_000)
    expect((await viaSecond.ok<RunView>("GET", `/api/runs/${runId}`)).status).toBe("running")
    expect(isRunning(agent)).toBe(true)
    expect(second.output()).not.toContain("marked")

    const stopped = await viaSecond.call<RunView>("POST", `/api/runs/${runId}/stop`)
    expect(stopped.status, stopped.text).toBe(200)
    expect(stopped.body).toMatchObject({ id: runId, status: "stopped" })
    expect(isRunning(agent)).toBe(false)
    // The first process carried it out: its supervisor's log says who asked.
    const messages = (await viaSecond.allLogs(runId)).map((l) => l.message)
    expect(messages.some((m) => /^Stopped by usr_/.test(m))).toBe(true)
    expect(messages.at(-1)).toBe("Run stopped")
    // A second stop: the run has ended.
    const again = await viaSecond.call<{ error: { details: { reason: string } } }>("POST", `/api/runs/${runId}/stop`)
    expect(again.status).toBe(409)
    expect(again.body.error.details.reason).toBe("run_ended")
  }, 120_000)

  it("recovers a killed process's run from the other process, without a restart", async () => {
    const { taskId, runId, agent } = await startOnFirst("Killed, recovered by the other one")
    first?.child.kill("SIGKILL")
    await first?.exited
    expect(isRunning(agent)).toBe(true)

    // A stop asked now finds no supervisor: the run is recovered there and then, and the answer says how it ended.
    const stop = await viaSecond.call<{ error: { details: { reason: string; status: string } } }>(
      "POST",
      `/api/runs/${runId}/stop`
    )
    expect(stop.status, stop.text).toBe(409)
    expect(stop.body.error.details).toMatchObject({ reason: "run_ended", status: "failed" })
    const run = await viaSecond.ok<RunView>("GET", `/api/runs/${runId}`)
    expect(run).toMatchObject({ status: "failed", error: "the service stopped while the run was in progress" })
    expect(isRunning(agent)).toBe(false)
    expect(run.output.files_modified).toEqual(["work.txt"])
    expect(git(repo, "show", `two/${taskId}:work.txt`)).toBe("done before the end\n")
    expect(existsSync(join(dataDir, "worktrees", runId))).toBe(false)
    const messages = (await viaSecond.allLogs(runId)).map((l) => l.message)
    expect(messages).toContain(`Ended the agent's leftover processes (process group ${agent})`)
  }, 120_000)

  it("recovers a killed process's run in its sweep, with nobody asking", async () => {
    first = await start({ TASKWRIGHT_SANDBOX: "off" })
    const { runId, agent } = await startOnFirst("Killed, swept by the other one")
    first?.child.kill("SIGKILL")
    await first?.exited
    const run = await waitFor(
      () => viaSecond.ok<RunView>("GET", `/api/runs/${runId}`),
      (r) => r.status !== "running",
      20_000,
      "the other process's sweep"
    )
    expect(run).toMatchObject({ status: "failed", error: "the service stopped while the run was in progress" })
    expect(isRunning(agent)).toBe(false)
    expect(second?.output()).toContain("marked 1 run(s) failed whose service process is gone")
  }, 120_000)
})
