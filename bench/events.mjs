#!/usr/bin/env node
/**
 * Event fan-out of the real server (`node packages/cli/dist/main.js serve`; build first), per store:
 *
 * 1. delivery rate: BENCH_EVENTS_SUBSCRIBERS (100) WebSocket subscribers, writers creating tasks as
 *    fast as they can for BENCH_EVENTS_SECONDS (10): events delivered per second, counted over every
 *    subscriber (target >= 10,000/s);
 * 2. delay: writes at a steady BENCH_EVENTS_RATE (100/s) for the same time: from a REST write being
 *    sent to its event arriving at every subscriber, p50 and p99 over every (write, subscriber)
 *    pair (target p99 <= 50 ms).
 *
 * The subscribers run in this process, beside the load: their CPU is reported with the server's.
 * Environment: BENCH_EVENTS_STORES (`sqlite,postgres`), TASKWRIGHT_TEST_PG_URL. Markdown on stdout,
 * progress on stderr, everything in bench/results/events.json. Figures on these shared 2-core
 * machines drift by ±30% from run to run (/work/shared/BENCH.md); read them side by side.
 */
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import http from "node:http"
import os from "node:os"
import { dirname, join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { fileURLToPath } from "node:url"
import pg from "pg"
import WebSocket from "ws"

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..")
const MAIN = join(ROOT, "packages/cli/dist/main.js")
const env = process.env
const int = (name, fallback) => {
  const n = Number(env[name] ?? fallback)
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer`)
  return n
}
const SUBSCRIBERS = int("BENCH_EVENTS_SUBSCRIBERS", 100)
const SECONDS = int("BENCH_EVENTS_SECONDS", 10)
const RATE = int("BENCH_EVENTS_RATE", 100)
const WRITERS = int("BENCH_EVENTS_WRITERS", 8)
const STORES = (env.BENCH_EVENTS_STORES ?? "sqlite,postgres").split(",").filter(Boolean)
const PG_URL = env.TASKWRIGHT_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const progress = (line) => process.stderr.write(`[bench:events] ${line}\n`)

const cpuSeconds = (pid) => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return null
  }
}
const selfCpu = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1e6
}
const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? null

const agent = new http.Agent({ keepAlive: true, maxSockets: WRITERS })
const post = (base, key, path, body) =>
  new Promise((resolve, reject) => {
    const data = JSON.stringify(body)
    const req = http.request(
      new URL(path, base),
      {
        method: "POST",
        agent,
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
          "content-length": Buffer.byteLength(data)
        }
      },
      (res) => {
        res.resume()
        res.on("end", () => resolve(res.statusCode))
      }
    )
    req.on("error", reject)
    req.end(data)
  })

const startServer = async (store) => {
  const dataDir = mkdtempSync(join(os.tmpdir(), "tw-bench-events-"))
  let database
  const childEnv = { PATH: env.PATH ?? "", TASKWRIGHT_RATE_LIMIT: "1000000000", TASKWRIGHT_SANDBOX: "off" }
  const args = [MAIN, "serve", "--port", "0", "--data-dir", dataDir, "--json"]
  if (store === "postgres") {
    database = `tw_bench_events_${randomBytes(6).toString("hex")}`
    const admin = new pg.Client({ connectionString: PG_URL })
    await admin.connect()
    await admin.query(`CREATE DATABASE ${database}`)
    await admin.end()
    const url = new URL(PG_URL)
    url.pathname = `/${database}`
    args.push("--database", url.toString())
  }
  const child = spawn(process.execPath, args, { env: childEnv, stdio: ["ignore", "pipe", "pipe"] })
  let out = ""
  child.stdout.on("data", (d) => {
    out += d.toString()
  })
  child.stderr.on("data", () => {})
  const started = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 30_000)
    child.stdout.on("data", () => {
      try {
        const parsed = JSON.parse(out)
        clearTimeout(timer)
        resolve(parsed)
      } catch {}
    })
    child.on("exit", (code) => reject(new Error(`server exited ${code}: ${out}`)))
  })
  const key = readFileSync(join(dataDir, "admin-key.txt"), "utf8").trim()
  return {
    url: started.url,
    key,
    pid: child.pid,
    stop: async () => {
      child.kill("SIGTERM")
      await new Promise((r) => child.once("exit", r))
      rmSync(dataDir, { recursive: true, force: true })
      if (database !== undefined) {
        const admin = new pg.Client({ connectionString: PG_URL })
        await admin.connect()
        await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
        await admin.end()
      }
    }
  }
}

/** Subscribers counting what they receive, and when each title first and last arrived. */
const subscribe = async (server, onEvent) => {
  const sockets = await Promise.all(
    Array.from(
      { length: SUBSCRIBERS },
      () =>
        new Promise((resolve, reject) => {
          const ws = new WebSocket(`${server.url.replace(/^http/, "ws")}/api/events`, {
            headers: { authorization: `Bearer ${server.key}` }
          })
          ws.on("message", (data) => onEvent(data))
          ws.on("open", () => resolve(ws))
          ws.on("error", reject)
        })
    )
  )
  return () => {
    for (const ws of sockets) ws.close()
  }
}

const measure = async (store) => {
  progress(`${store}: starting the server and ${SUBSCRIBERS} subscribers`)
  const server = await startServer(store)
  try {
    // 1. Delivery rate: writers as fast as they go.
    let delivered = 0
    const close1 = await subscribe(server, () => {
      delivered++
    })
    const cpu0 = cpuSeconds(server.pid)
    const self0 = selfCpu()
    const t0 = performance.now()
    let writes = 0
    const until = t0 + SECONDS * 1000
    await Promise.all(
      Array.from({ length: WRITERS }, async () => {
        while (performance.now() < until) {
          writes++
          await post(server.url, server.key, "/api/tasks", { title: `rate ${writes}` })
        }
      })
    )
    // What was written is delivered once it arrives: wait for the tail.
    const expected = writes * SUBSCRIBERS
    const tailUntil = performance.now() + 30_000
    while (delivered < expected && performance.now() < tailUntil) await sleep(20)
    const seconds = (performance.now() - t0) / 1000
    const rate = {
      writes,
      writes_per_s: writes / seconds,
      delivered,
      expected,
      delivered_per_s: delivered / seconds,
      seconds,
      server_cpu_s: cpuSeconds(server.pid) - cpu0,
      subscribers_cpu_s: selfCpu() - self0
    }
    close1()
    progress(`${store}: ${Math.round(rate.delivered_per_s).toLocaleString("en")} events/s delivered (${writes} writes)`)
    await sleep(500)

    // 2. Delay at a steady rate: each write's event, at every subscriber.
    const sentAt = new Map()
    const delays = []
    const close2 = await subscribe(server, (data) => {
      const title = JSON.parse(data.toString()).data?.title
      const at = sentAt.get(title)
      if (at !== undefined) delays.push(performance.now() - at)
    })
    const steadyUntil = performance.now() + SECONDS * 1000
    let n = 0
    const inFlight = []
    while (performance.now() < steadyUntil) {
      const title = `steady ${n++}`
      sentAt.set(title, performance.now())
      inFlight.push(post(server.url, server.key, "/api/tasks", { title }))
      await sleep(1000 / RATE)
    }
    await Promise.all(inFlight)
    const waitUntil = performance.now() + 10_000
    while (delays.length < n * SUBSCRIBERS && performance.now() < waitUntil) await sleep(20)
    close2()
    delays.sort((a, b) => a - b)
    const delay = {
      writes: n,
      deliveries: delays.length,
      expected: n * SUBSCRIBERS,
      p50_ms: quantile(delays, 0.5),
      p99_ms: quantile(delays, 0.99),
      max_ms: delays.at(-1) ?? null
    }
    progress(`${store}: p99 ${delay.p99_ms?.toFixed(1)} ms from write to every subscriber`)
    return { store, rate, delay }
  } finally {
    await server.stop()
  }
}

const results = []
for (const store of STORES) results.push(await measure(store))
mkdirSync(join(ROOT, "bench/results"), { recursive: true })
writeFileSync(
  join(ROOT, "bench/results/events.json"),
  `${JSON.stringify({ at: new Date().toISOString(), subscribers: SUBSCRIBERS, seconds: SECONDS, rate: RATE, results }, null, 2)}\n`
)
const fmt = (x, d = 0) =>
  x === null || x === undefined
    ? "—"
    : Number(x).toLocaleString("en", { maximumFractionDigits: d, minimumFractionDigits: d })
const out = [
  `### Events fanned out to ${SUBSCRIBERS} WebSocket subscribers (targets: ≥ 10,000 events/s delivered, p99 ≤ 50 ms)`,
  "",
  "| store | writes/s | events/s delivered | all delivered | server CPU s | subscribers' CPU s | steady writes/s | p50 ms | p99 ms | max ms |",
  "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"
]
for (const r of results) {
  out.push(
    `| ${r.store} | ${fmt(r.rate.writes_per_s)} | ${fmt(r.rate.delivered_per_s)} | ${r.rate.delivered === r.rate.expected ? "yes" : `${r.rate.delivered}/${r.rate.expected}`} | ${fmt(r.rate.server_cpu_s, 1)} | ${fmt(r.rate.subscribers_cpu_s, 1)} | ${RATE} | ${fmt(r.delay.p50_ms, 1)} | ${fmt(r.delay.p99_ms, 1)} | ${fmt(r.delay.max_ms, 1)} |`
  )
}
process.stdout.write(`${out.join("\n")}\n`)
agent.destroy()
