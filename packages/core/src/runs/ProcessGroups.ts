/**
 * Process groups of agents, seen from outside: is anything of a group still running, wait until
 * nothing is, and find (after a crash of the service) the leftover group of a run, recognised by
 * the `TASKWRIGHT_RUN_ID` in its members' environment so a recycled pid is never killed.
 *
 * Zombies count as gone: they run nothing, and an init that does not reap orphans (containers)
 * would otherwise keep a finished group "alive" forever. The `/proc` details are Linux's; on
 * other systems a group counts as alive while `kill(-pgid, 0)` finds it.
 */
import { readdirSync, readFileSync } from "node:fs"
import { setTimeout as sleep } from "node:timers/promises"

interface ProcInfo {
  readonly pid: number
  readonly state: string
  readonly pgrp: number
}

const readStat = (pid: number): ProcInfo | null => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return { pid, state: fields[0] ?? "", pgrp: Number(fields[2]) }
  } catch {
    return null
  }
}

const hasProc = (() => {
  try {
    readdirSync("/proc/self")
    return true
  } catch {
    return false
  }
})()

/** Pids of the group's members that are not zombies (Linux); null where /proc is not available. */
const liveMembers = (pgid: number): ReadonlyArray<number> | null => {
  if (!hasProc) return null
  const out: Array<number> = []
  for (const name of readdirSync("/proc")) {
    const first = name.charCodeAt(0)
    if (first < 48 || first > 57) continue
    const info = readStat(Number(name))
    if (info !== null && info.pgrp === pgid && info.state !== "Z" && info.state !== "X") out.push(info.pid)
  }
  return out
}

/** True while a process of group `pgid` runs. */
export const groupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
  } catch (error) {
    // EPERM: it exists, but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
  const members = liveMembers(pgid)
  return members === null || members.length > 0
}

const signal = (pgid: number, sig: NodeJS.Signals): void => {
  try {
    process.kill(-pgid, sig)
  } catch {
    // gone already
  }
}

/**
 * Waits until nothing of group `pgid` runs. Past `timeoutMs` the group is sent SIGKILL, and
 * given one more second. Answers whether the group is gone.
 */
export const waitGroupGone = async (pgid: number, timeoutMs: number): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs
  let step = 10
  while (groupAlive(pgid)) {
    if (Date.now() >= deadline) {
      signal(pgid, "SIGKILL")
      const last = Date.now() + 1_000
      while (groupAlive(pgid) && Date.now() < last) await sleep(20)
      return !groupAlive(pgid)
    }
    await sleep(step)
    step = Math.min(step * 2, 100)
  }
  return true
}

/** True when a live member of group `pgid` was started for run `runId` (Linux only). */
export const isRunGroup = (pgid: number, runId: string): boolean => {
  const marker = `TASKWRIGHT_RUN_ID=${runId}`
  for (const pid of liveMembers(pgid) ?? []) {
    try {
      const environ = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0")
      if (environ.includes(marker)) return true
    } catch {
      // gone, or not ours to read
    }
  }
  return false
}

/**
 * Ends what is left of a run's process group after the service that supervised it died: SIGTERM,
 * then SIGKILL after `graceMs`. Does nothing unless the group is recognisably the run's.
 * Answers whether it found the group.
 */
export const killLeftoverGroup = async (pgid: number, runId: string, graceMs: number): Promise<boolean> => {
  if (!isRunGroup(pgid, runId)) return false
  signal(pgid, "SIGTERM")
  await waitGroupGone(pgid, graceMs)
  return true
}
