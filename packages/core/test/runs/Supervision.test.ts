import { spawnSync } from "node:child_process"
import { describe, expect, it } from "vitest"
import { isOrphan, makeSupervisor, onThisMachine, STALE_MS } from "../../src/runs/Supervision.js"

const me = makeSupervisor()
const at = (msAgo: number) => new Date(Date.now() - msAgo).toISOString()
/** A pid no process has: one that just exited. */
const deadPid = (): number => {
  const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"])
  return Number(child.stdout.toString())
}

describe("which running runs are orphans", () => {
  it("never one of this process's own, however old its heartbeat", () => {
    expect(isOrphan(me, { supervisor: me.id, heartbeat_at: at(10 * STALE_MS) }, Date.now())).toBe(false)
  })

  it("a run of an older version (no supervisor recorded)", () => {
    expect(isOrphan(me, { supervisor: null, heartbeat_at: null }, Date.now())).toBe(true)
    expect(onThisMachine(me, null)).toBe(true)
  })

  it("another machine's run: only once its heartbeat is older than the limit", () => {
    const elsewhere = "another-machine/4242/abcdef"
    expect(onThisMachine(me, elsewhere)).toBe(false)
    expect(isOrphan(me, { supervisor: elsewhere, heartbeat_at: at(1_000) }, Date.now())).toBe(false)
    expect(isOrphan(me, { supervisor: elsewhere, heartbeat_at: at(STALE_MS - 5_000) }, Date.now())).toBe(false)
    expect(isOrphan(me, { supervisor: elsewhere, heartbeat_at: at(STALE_MS + 1_000) }, Date.now())).toBe(true)
  })

  it("this machine's run: at once when its process is gone, not while it lives", () => {
    const alive = `${me.machine}/${process.ppid}/000000`
    const dead = `${me.machine}/${deadPid()}/000000`
    expect(onThisMachine(me, dead)).toBe(true)
    expect(isOrphan(me, { supervisor: alive, heartbeat_at: at(1_000) }, Date.now())).toBe(false)
    expect(isOrphan(me, { supervisor: dead, heartbeat_at: at(1_000) }, Date.now())).toBe(true)
    // Our own pid under another name: a previous process that had it (a container's pid 1).
    expect(isOrphan(me, { supervisor: `${me.machine}/${process.pid}/000000`, heartbeat_at: at(0) }, Date.now())).toBe(
      true
    )
  })

  it("a supervisor name it did not write is left to its heartbeat", () => {
    expect(isOrphan(me, { supervisor: "garbage", heartbeat_at: at(1_000) }, Date.now())).toBe(false)
    expect(isOrphan(me, { supervisor: "garbage", heartbeat_at: at(STALE_MS + 1_000) }, Date.now())).toBe(true)
  })
})
