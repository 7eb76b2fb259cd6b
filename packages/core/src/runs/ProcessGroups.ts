/**
 * Process groups of agents, seen from outside: is anything of a group still running, wait until
 * nothing is, and find (after a crash of the service) the leftover group of a run, recognised by
 * the `TASKWRIGHT_RUN_ID` in its members' environment so a recycled pid is never killed. And the
 * PID namespace of a sandboxed agent: its members, whatever groups or sessions they moved to,
 * and its end.
 *
 * Zombies count as gone: they run nothing, and an init that does not reap orphans (containers)
 * would otherwise keep a finished group "alive" forever. The `/proc` details are Linux's; on
 * other systems a group counts as alive while `kill(-pgid, 0)` finds it.
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs"
import { setTimeout as sleep } from "node:timers/promises"

interface ProcInfo {
  readonly pid: number
  readonly state: string
  readonly pgrp: number
  /** Clock ticks from boot to the process's start: with the pid, it names one process for good. */
  readonly start: string
}

const readStat = (pid: number): ProcInfo | null => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    // "pid (comm) state ppid pgrp ... starttime(22nd)": comm may hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return { pid, state: fields[0] ?? "", pgrp: Number(fields[2]), start: fields[19] ?? "" }
  } catch {
    return null
  }
}

const isNumeric = (name: string): boolean => {
  const first = name.charCodeAt(0)
  return first >= 48 && first <= 57
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
    if (!isNumeric(name)) continue
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

// ---------------------------------------------------------------------------------------------
// PID namespaces (Linux): a sandboxed agent and everything it starts

/** A sandbox's PID namespace, seen from the host. */
export interface PidNamespace {
  /** Host pid of the namespace's init (bubblewrap's pid 1): when it dies, the kernel kills every member. */
  readonly initPid: number
  /** The namespace's inode number: `/proc/<pid>/ns/pid` of a member reads `pid:[<id>]`. */
  readonly id: number
  readonly initStart: string
}

/** The namespace whose init is `initPid`, or null when that process is gone already. */
export const pidNamespace = (initPid: number, id: number): PidNamespace | null => {
  const info = readStat(initPid)
  return info === null ? null : { initPid, id, initStart: info.start }
}

/** True while the namespace's init runs (the same process: a recycled pid does not count). */
export const namespaceAlive = (ns: PidNamespace): boolean => {
  const info = readStat(ns.initPid)
  return info !== null && info.start === ns.initStart && info.state !== "Z" && info.state !== "X"
}

/**
 * Host pids of the namespace's processes other than its init: a member that called `setsid`,
 * cleared its environment or changed its process group is still one. Only meaningful while the
 * namespace is alive (a dead namespace's inode number may be reused).
 */
export const namespaceMembers = (ns: PidNamespace): ReadonlyArray<number> => {
  if (!hasProc) return []
  const marker = `pid:[${ns.id}]`
  const out: Array<number> = []
  for (const name of readdirSync("/proc")) {
    if (!isNumeric(name) || Number(name) === ns.initPid) continue
    try {
      if (readlinkSync(`/proc/${name}/ns/pid`) === marker) out.push(Number(name))
    } catch {
      // gone, or not ours to look at
    }
  }
  return out
}

/** Sends `sig` to every member of a live namespace but its init. */
export const signalNamespace = (ns: PidNamespace, sig: NodeJS.Signals): void => {
  if (!namespaceAlive(ns)) return
  for (const pid of namespaceMembers(ns)) {
    try {
      process.kill(pid, sig)
    } catch {
      // gone already
    }
  }
}

/** SIGKILL to the namespace's init: the kernel then kills every process left in it. */
export const killNamespace = (ns: PidNamespace): void => {
  if (!namespaceAlive(ns)) return
  try {
    process.kill(ns.initPid, "SIGKILL")
  } catch {
    // gone already
  }
}

/** Waits until the namespace is gone; past `timeoutMs` its init is killed and given one more second. */
export const waitNamespaceGone = async (ns: PidNamespace, timeoutMs: number): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs
  while (namespaceAlive(ns)) {
    if (Date.now() >= deadline) {
      killNamespace(ns)
      const last = Date.now() + 1_000
      while (namespaceAlive(ns) && Date.now() < last) await sleep(20)
      return !namespaceAlive(ns)
    }
    await sleep(20)
  }
  return true
}
