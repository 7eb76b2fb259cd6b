/**
 * Which service process supervises a run, when several share one store (PostgreSQL behind a
 * load balancer, or two processes on one SQLite file). Each process names itself (machine, pid,
 * a random part) on the runs it starts and refreshes their heartbeat; a run is an orphan, to be
 * recovered (marked failed, its leftovers ended, its work committed) by whichever process sees it
 * first, only when its supervisor is gone: its heartbeat is stale, or it ran on this machine and
 * its process is dead. A live process's runs are never touched.
 */
import { randomBytes } from "node:crypto"
import { readFileSync, readlinkSync } from "node:fs"
import { hostname } from "node:os"

/**
 * The machine part of a supervisor's name: the boot id and the PID namespace on Linux (where a
 * pid means the same process to everyone with both), else the host name.
 */
const machineIdentity = (): string => {
  try {
    const boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()
    const pidNamespace = readlinkSync("/proc/self/ns/pid").replace(/\D/g, "")
    return `${boot}.${pidNamespace}`
  } catch {
    return `host-${hostname()}`
  }
}

export interface Supervisor {
  /** `<machine>/<pid>/<random>`: stored on every run this process starts. */
  readonly id: string
  readonly machine: string
}

export const makeSupervisor = (): Supervisor => {
  const machine = machineIdentity()
  return { id: `${machine}/${process.pid}/${randomBytes(6).toString("hex")}`, machine }
}

/** How often a process refreshes its runs' heartbeat. */
export const HEARTBEAT_MS = 5_000
/** How often a process looks at its runs for stop requests made through another process. */
export const STOP_POLL_MS = 1_000
/** How often a process looks for orphans. */
export const SWEEP_MS = 5_000
/** A heartbeat older than this: the supervisor is gone (or has lost the store for that long). */
export const STALE_MS = 60_000

/** Whether the process `pid` of this machine is alive. */
const processAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: it exists, but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** A run's supervisor as stored: where it ran and its pid, when it is a name this module wrote. */
const parse = (supervisor: string): { readonly machine: string; readonly pid: number } | null => {
  const parts = supervisor.split("/")
  const pid = Number(parts[1])
  return parts.length === 3 && parts[0] !== undefined && Number.isInteger(pid) && pid > 0
    ? { machine: parts[0], pid }
    : null
}

/** Whether a run recorded by `supervisor` on `machine` was started on this machine (its pids mean something here). */
export const onThisMachine = (me: Supervisor, supervisor: string | null): boolean =>
  supervisor === null || parse(supervisor)?.machine === me.machine

/**
 * Whether a `running` run is an orphan that `me` may recover: no supervisor recorded (a run of a
 * version before this one), a heartbeat older than {@link STALE_MS}, or a supervisor of this
 * machine whose process is gone. Never one of `me`'s own.
 */
export const isOrphan = (
  me: Supervisor,
  row: { readonly supervisor: string | null; readonly heartbeat_at: string | null },
  nowMs: number
): boolean => {
  if (row.supervisor === me.id) return false
  if (row.supervisor === null || row.heartbeat_at === null) return true
  if (nowMs - Date.parse(row.heartbeat_at) > STALE_MS) return true
  const owner = parse(row.supervisor)
  if (owner === null || owner.machine !== me.machine) return false
  // Our own pid under another name: a previous process of this pid (a container's pid 1).
  return owner.pid === process.pid || !processAlive(owner.pid)
}
