/**
 * Process plumbing for the runner: spawning a server, timing its start-up, reading its CPU time
 * and memory from /proc, and stopping it cleanly.
 */
import { spawn, spawnSync } from "node:child_process"
import { closeSync, openSync, readdirSync, readFileSync } from "node:fs"
import http from "node:http"
import { createServer } from "node:net"
import os from "node:os"
import { setTimeout as sleep } from "node:timers/promises"

const CLK_TCK = 100 // getconf CLK_TCK on Linux

/** User + system CPU seconds of a live process (all its threads), or null once it is gone. */
export const cpuSeconds = (pid) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK
  } catch {
    return null
  }
}

/** Resident set size in MiB (VmRSS), and the peak (VmHWM); null once the process is gone. */
export const memory = (pid) => {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8")
    const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN)
    return { rssMiB: kb("VmRSS") / 1024, peakRssMiB: kb("VmHWM") / 1024 }
  } catch {
    return null
  }
}

/**
 * Puts a server's request thread (its main thread, whose id is the pid) on CPU `cpu` alone and lets
 * every other thread of it run on any CPU (`taskset`; a thread started later inherits the mask of
 * the thread that starts it, so each call sets them all again). Answers false when it could not.
 */
export const placeRequestThread = (pid, cpu) => {
  let tids
  try {
    tids = readdirSync(`/proc/${pid}/task`)
  } catch {
    return false
  }
  const all = `0-${os.availableParallelism() - 1}`
  let ok = true
  for (const tid of tids) {
    const r = spawnSync("taskset", ["-p", "-c", tid === String(pid) ? String(cpu) : all, tid], { stdio: "ignore" })
    // A thread may have ended meanwhile; only the request thread's placement matters.
    if (tid === String(pid) && r.status !== 0) ok = false
  }
  return ok
}

/** A free TCP port on the loopback interface. */
export const freePort = () =>
  new Promise((resolve, reject) => {
    const srv = createServer()
    srv.unref()
    srv.on("error", reject)
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })

/** One GET on a fresh connection; resolves to the status code, or null on a connection error. */
const probe = (port, path) =>
  new Promise((resolve) => {
    const req = http.get({ host: "127.0.0.1", port, path, agent: false, timeout: 1000 }, (res) => {
      res.resume()
      res.on("end", () => resolve(res.statusCode))
      res.on("error", () => resolve(null))
    })
    req.on("timeout", () => req.destroy())
    req.on("error", () => resolve(null))
  })

/** Every child the runner started and has not yet seen exit, for the emergency stop. */
export const liveChildren = new Set()
let stopping = false

/** Throws once `killAll` ran: an interrupted runner starts nothing more. */
export const assertNotStopping = () => {
  if (stopping) throw new Error("the bench is stopping")
}

/**
 * Starts a server (its own process group) with stdout/stderr to `logFile`, and waits for the
 * first 200 from GET /api/health. Answers { child, pid, startupMs } or throws after `timeoutMs`.
 */
export const startServer = async ({ command, args, env, cwd, logFile, port, timeoutMs = 30_000 }) => {
  assertNotStopping()
  const fd = openSync(logFile, "a")
  const t0 = performance.now()
  const child = spawn(command, args, { cwd, env, stdio: ["ignore", fd, fd], detached: true })
  closeSync(fd)
  liveChildren.add(child)
  const exited = new Promise((resolve) => {
    child.on("exit", (code, signal) => {
      liveChildren.delete(child)
      resolve({ code, signal })
    })
  })
  child.on("error", () => {})
  let exitInfo = null
  exited.then((e) => {
    exitInfo = e
  })
  while (performance.now() - t0 < timeoutMs) {
    if (exitInfo) {
      throw new Error(`exited during start-up (code ${exitInfo.code}, signal ${exitInfo.signal}); see ${logFile}`)
    }
    const status = await probe(port, "/api/health")
    if (status === 200) return { child, pid: child.pid, startupMs: performance.now() - t0, exited }
    await sleep(status === null ? 5 : 20)
  }
  await stopServer({ child, exited }, 2000)
  throw new Error(`no 200 from /api/health within ${timeoutMs} ms; see ${logFile}`)
}

const groupAlive = (pid) => {
  try {
    process.kill(-pid, 0)
    return true
  } catch {
    return false
  }
}

/**
 * SIGTERM, then SIGKILL to the whole group after `graceMs`. Answers how it went: the exit code or
 * signal, how long it took, and whether anything of its process group was left behind.
 */
export const stopServer = async ({ child, exited }, graceMs = 10_000) => {
  const t0 = performance.now()
  const pid = child.pid
  if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
  let killed = false
  const result = await Promise.race([exited, sleep(graceMs).then(() => null)])
  let exit = result
  if (exit === null) {
    killed = true
    try {
      process.kill(-pid, "SIGKILL")
    } catch {}
    exit = await exited
  }
  const stopMs = performance.now() - t0
  // The server exited; anything it started in its group must be gone too.
  await sleep(50)
  const leftovers = groupAlive(pid)
  if (leftovers) {
    try {
      process.kill(-pid, "SIGKILL")
    } catch {}
  }
  const clean = !killed && !leftovers && exit.code === 0
  return { code: exit.code, signal: exit.signal, stopMs, killed, leftovers, clean }
}

/** Kills every child still running (runner interrupted), and refuses to start any more. */
export const killAll = () => {
  stopping = true
  for (const child of liveChildren) {
    try {
      process.kill(-child.pid, "SIGKILL")
    } catch {}
  }
}
