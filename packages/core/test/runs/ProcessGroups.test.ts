/** Process groups seen from outside: alive while a member runs, gone once it has ended, recognised by run id. */
import { spawn } from "node:child_process"
import { assert, describe, it } from "@effect/vitest"
import { groupAlive, isRunGroup, killLeftoverGroup, waitGroupGone } from "../../src/runs/ProcessGroups.js"

/** A detached group: a node leader and a grandchild, both sleeping, with `env` set. */
const sleepingGroup = (env: Record<string, string>, ignoreTerm = false) => {
  const code = `${ignoreTerm ? "process.on('SIGTERM', () => {});" : ""}
    require('node:child_process').spawn(process.execPath, ['-e', "${ignoreTerm ? "process.on('SIGTERM', () => {});" : ""}setTimeout(() => {}, 60000)"], { stdio: 'ignore' });
    setTimeout(() => {}, 60000)`
  const child = spawn(process.execPath, ["-e", code], {
    detached: true,
    stdio: "ignore",
    env: { PATH: process.env.PATH ?? "", ...env }
  })
  child.unref()
  return child.pid ?? 0
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 300))

describe("process groups", () => {
  it("a group is alive while its members run, and gone after SIGTERM", async () => {
    const pgid = sleepingGroup({})
    await settle()
    assert.isTrue(groupAlive(pgid))
    process.kill(-pgid, "SIGTERM")
    assert.isTrue(await waitGroupGone(pgid, 5_000))
    assert.isFalse(groupAlive(pgid))
  })

  it("waitGroupGone escalates to SIGKILL past its timeout", async () => {
    const pgid = sleepingGroup({}, true)
    await settle()
    process.kill(-pgid, "SIGTERM")
    const started = Date.now()
    assert.isTrue(await waitGroupGone(pgid, 200))
    assert.isBelow(Date.now() - started, 2_000)
  })

  it("recognises a run's leftover group by TASKWRIGHT_RUN_ID and ends only that", async () => {
    const mine = sleepingGroup({ TASKWRIGHT_RUN_ID: "run_MINEMINEMINEMINE" })
    const other = sleepingGroup({ TASKWRIGHT_RUN_ID: "run_OTHEROTHEROTHER" })
    await settle()
    assert.isTrue(isRunGroup(mine, "run_MINEMINEMINEMINE"))
    assert.isFalse(isRunGroup(other, "run_MINEMINEMINEMINE"))
    assert.isFalse(await killLeftoverGroup(other, "run_MINEMINEMINEMINE", 1_000))
    assert.isTrue(groupAlive(other))
    assert.isTrue(await killLeftoverGroup(mine, "run_MINEMINEMINEMINE", 1_000))
    assert.isFalse(groupAlive(mine))
    process.kill(-other, "SIGKILL")
    assert.isTrue(await waitGroupGone(other, 1_000))
  })
})
