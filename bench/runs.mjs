#!/usr/bin/env node
/**
 * Agent-run figures of the real server (`node packages/cli/dist/main.js serve`, so build first:
 * `npm run build && node bench/runs.mjs`), per store:
 *
 * 1. log lines stored per second from one chatty agent (the scripted agent printing
 *    BENCH_RUNS_LINES lines as fast as the pipe takes them; target >= 50,000 lines/s), measured
 *    from the POST that starts the run to the run recorded `completed` (every line stored by then);
 * 2. latency of `GET /api/runs/:id/logs?limit=1000` on that run (1,000,000 lines by default), at
 *    random `after` positions and with `since`;
 * 3. wall time from `POST /api/tasks/:id/run` being sent to the agent process running (the agent
 *    is `sh -c 'date +%s%N'`: its first act is to print the time).
 *
 * Environment: BENCH_RUNS_STORES (default `sqlite,postgres`; postgres is skipped with a note when
 * it does not answer), BENCH_RUNS_LINES (1000000), BENCH_RUNS_READS (300), BENCH_RUNS_STARTS (20),
 * TASKWRIGHT_TEST_PG_URL (postgres://postgres@127.0.0.1:5432/test). Markdown on stdout, progress
 * on stderr, everything in bench/results/runs.json. Figures on these shared 2-core machines drift
 * by ±30% from run to run (/work/shared/BENCH.md).
 */
import { execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import http from "node:http"
import os from "node:os"
import { dirname, join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { fileURLToPath } from "node:url"
import pg from "pg"

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..")
const MAIN = join(ROOT, "packages/cli/dist/main.js")
const AGENT = join(ROOT, "packages/testing/bin/scripted-agent.mjs")

const env = process.env
const int = (name, fallback) => {
  const n = Number(env[name] ?? fallback)
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer`)
  return n
}
const LINES = int("BENCH_RUNS_LINES", 1_000_000)
const READS = int("BENCH_RUNS_READS", 300)
const STARTS = int("BENCH_RUNS_STARTS", 20)
const STORES = (env.BENCH_RUNS_STORES ?? "sqlite,postgres")
  .split(",")
  .map((s) => s.trim())
  .filter(Boolean)
const PG_URL = env.TASKWRIGHT_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"

const progress = (line) => process.stderr.write(`[bench:runs] ${line}\n`)
const nowMs = () => performance.timeOrigin + performance.now()

// ---------------------------------------------------------------------------------------------
// Plumbing

const CLK_TCK = 100
const cpuSeconds = (pid) => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK
  } catch {
    return null
  }
}
const peakRssMiB = (pid) => {
  try {
    return Number(/^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) / 1024
  } catch {
    return null
  }
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 4 })

/** One request; resolves to {status, body}. */
const call = (base, key, method, path, body) =>
  new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body)
    const url = new URL(path, base)
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method,
        agent,
        headers: {
          authorization: `Bearer ${key}`,
          ...(data === undefined
            ? {}
            : { "content-type": "application/json", "content-length": Buffer.byteLength(data) })
        }
      },
      (res) => {
        const chunks = []
        res.on("data", (c) => chunks.push(c))
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8")
          resolve({ status: res.statusCode, body: text === "" ? undefined : JSON.parse(text) })
        })
        res.on("error", reject)
      }
    )
    req.on("error", reject)
    req.end(data)
  })

const ok = async (...args) => {
  const r = await call(...args)
  if (r.status >= 300) throw new Error(`${args[2]} ${args[3]} → ${r.status} ${JSON.stringify(r.body)}`)
  return r.body
}

const startServer = async (dataDir, databaseUrl) => {
  const child = spawn(process.execPath, [MAIN, "serve", "--port", "0", "--data-dir", dataDir, "--json"], {
    cwd: ROOT,
    env: {
      PATH: env.PATH ?? "",
      HOME: env.HOME ?? "/tmp",
      TASKWRIGHT_RATE_LIMIT: "1000000000",
      ...(databaseUrl === undefined ? {} : { DATABASE_URL: databaseUrl })
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout.on("data", (c) => {
    output += c
  })
  child.stderr.on("data", (c) => {
    output += c
  })
  const deadline = Date.now() + 30_000
  for (;;) {
    const block = /^\{[\s\S]*?^\}$/m.exec(output)?.[0]
    if (block !== undefined) return { child, url: JSON.parse(block).url, output: () => output }
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`server did not start:\n${output}`)
    await sleep(20)
  }
}

const stopServer = async (server) => {
  if (server.child.exitCode !== null) return
  const exited = new Promise((resolve) => server.child.once("exit", resolve))
  server.child.kill("SIGTERM")
  await Promise.race([exited, sleep(30_000)])
  if (server.child.exitCode === null) server.child.kill("SIGKILL")
}

const pgAdmin = async (text) => {
  const client = new pg.Client({ connectionString: PG_URL })
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}

const makeRepo = (dir) => {
  const git = (...args) =>
    execFileSync("git", ["-c", "user.name=Bench", "-c", "user.email=bench@example.test", ...args], { cwd: dir })
  git("init", "-q", "-b", "main")
  writeFileSync(join(dir, "README.md"), "bench\n")
  git("add", "-A")
  git("commit", "-q", "-m", "initial")
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
const stats = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  return {
    n: sorted.length,
    p50: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    p99: percentile(sorted, 99),
    max: sorted.at(-1),
    mean: sorted.reduce((a, b) => a + b, 0) / sorted.length
  }
}

const waitForEnd = async (base, key, runId, timeoutMs) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const run = await ok(base, key, "GET", `/api/runs/${runId}`)
    if (run.status !== "running") return { run, at: nowMs() }
    if (Date.now() > deadline) throw new Error(`run ${runId} still running after ${timeoutMs} ms`)
    await sleep(20)
  }
}

// ---------------------------------------------------------------------------------------------
// One store

const benchStore = async (store) => {
  const work = mkdtempSync(join(os.tmpdir(), `tw-bench-runs-${store}-`))
  const dataDir = join(work, "data")
  const repo = join(work, "repo")
  mkdirSync(repo)
  makeRepo(repo)
  let database
  let databaseUrl
  if (store === "postgres") {
    database = `tw_bench_runs_${randomBytes(6).toString("hex")}`
    await pgAdmin(`CREATE DATABASE ${database}`)
    const u = new URL(PG_URL)
    u.pathname = `/${database}`
    databaseUrl = u.toString()
  }
  const server = await startServer(dataDir, databaseUrl)
  const base = server.url
  const key = readFileSync(join(dataDir, "admin-key.txt"), "utf8").trim()
  const result = { store }
  try {
    const project = await ok(base, key, "POST", "/api/projects", { name: "bench", path: repo })
    const newTask = async (title) => (await ok(base, key, "POST", "/api/tasks", { title, project_id: project.id })).id

    // 1. A chatty agent.
    await ok(base, key, "PUT", "/api/agents/chatty", {
      enabled: true,
      command: [process.execPath, AGENT],
      env: { TASKWRIGHT_SCRIPT: JSON.stringify([{ lines: LINES, prefix: "line" }]) },
      max_log_bytes: 1024 * 1024 * 1024,
      timeout_s: 3600
    })
    progress(`${store}: one agent printing ${LINES.toLocaleString("en")} lines`)
    const chattyTask = await newTask("chatty")
    const cpuBefore = cpuSeconds(server.child.pid)
    const posted = nowMs()
    const started = await ok(base, key, "POST", `/api/tasks/${chattyTask}/run`, { agent: "chatty" })
    const { run, at: ended } = await waitForEnd(base, key, started.run_id, 30 * 60_000)
    const cpu = cpuSeconds(server.child.pid) - cpuBefore
    if (run.status !== "completed") throw new Error(`the chatty run ended ${run.status}: ${run.error}`)
    const first = (await ok(base, key, "GET", `/api/runs/${started.run_id}/logs?limit=10`)).logs
    const lastPage = (await ok(base, key, "GET", `/api/runs/${started.run_id}/logs?after=${LINES - 5}&limit=1000`)).logs
    const lastLine = lastPage.find((l) => l.message === `line ${LINES}`)
    const firstLine = first.find((l) => l.message === "line 1")
    if (lastLine === undefined || firstLine === undefined) throw new Error("lines are missing from the log")
    const totalEntries = lastPage.at(-1).seq
    const wallS = (ended - posted) / 1000
    const ingestS = (Date.parse(lastLine.timestamp) - Date.parse(firstLine.timestamp)) / 1000
    result.ingest = {
      lines: LINES,
      entries: totalEntries,
      wall_s: wallS,
      lines_per_s: LINES / wallS,
      receive_window_s: ingestS,
      server_cpu_s: cpu,
      server_peak_rss_mib: peakRssMiB(server.child.pid)
    }
    progress(`${store}: ${Math.round(LINES / wallS).toLocaleString("en")} lines/s stored (${wallS.toFixed(2)} s wall)`)

    // 2. Reading pages of that log.
    const latencies = { after: [], since: [] }
    const timestamps = []
    for (let i = 0; i < 20; i++) {
      const at = Math.floor((i / 20) * LINES) + 1
      const page = (await ok(base, key, "GET", `/api/runs/${started.run_id}/logs?after=${at}&limit=1`)).logs
      if (page[0] !== undefined) timestamps.push(page[0].timestamp)
    }
    for (let i = 0; i < 20; i++) await ok(base, key, "GET", `/api/runs/${started.run_id}/logs?limit=1000`) // warm-up
    for (let i = 0; i < READS; i++) {
      const bySince = i % 3 === 2
      const query = bySince
        ? `since=${encodeURIComponent(timestamps[i % timestamps.length])}&limit=1000`
        : `after=${Math.floor(Math.random() * (totalEntries - 1000))}&limit=1000`
      const t0 = performance.now()
      const page = await ok(base, key, "GET", `/api/runs/${started.run_id}/logs?${query}`)
      const ms = performance.now() - t0
      if (page.logs.length !== 1000) throw new Error(`a page of ${page.logs.length} entries for ${query}`)
      latencies[bySince ? "since" : "after"].push(ms)
    }
    result.read = {
      entries_in_run: totalEntries,
      after: stats(latencies.after),
      since: stats(latencies.since),
      all: stats([...latencies.after, ...latencies.since])
    }
    progress(`${store}: GET logs?limit=1000 p50 ${result.read.all.p50.toFixed(2)} ms`)

    // 3. From POST to the agent running.
    await ok(base, key, "PUT", "/api/agents/probe", { enabled: true, command: ["/bin/sh", "-c", "date +%s%N"] })
    const probeTask = await newTask("probe")
    const toAgent = []
    const toAnswer = []
    for (let i = 0; i < STARTS + 2; i++) {
      const sent = nowMs()
      const r = await ok(base, key, "POST", `/api/tasks/${probeTask}/run`, { agent: "probe" })
      const answered = nowMs()
      await waitForEnd(base, key, r.run_id, 60_000)
      const logs = (await ok(base, key, "GET", `/api/runs/${r.run_id}/logs?limit=50`)).logs
      const printed = logs.find((l) => /^\d{19}$/.test(l.message))
      if (printed === undefined) throw new Error("the probe agent printed no time")
      if (i < 2) continue // warm-up
      toAgent.push(Number(BigInt(printed.message) / 1000n) / 1000 - sent)
      toAnswer.push(answered - sent)
    }
    result.spawn = { post_to_agent_ms: stats(toAgent), post_to_201_ms: stats(toAnswer) }
    progress(`${store}: POST → agent running p50 ${result.spawn.post_to_agent_ms.p50.toFixed(1)} ms`)
  } finally {
    await stopServer(server)
    if (database !== undefined) await pgAdmin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => {})
    rmSync(work, { recursive: true, force: true })
  }
  return result
}

// ---------------------------------------------------------------------------------------------
// Main

if (!existsSync(MAIN)) {
  console.error("packages/cli/dist/main.js is missing: run `npm run build` first")
  process.exit(1)
}

const pgAnswers = async () => {
  try {
    await pgAdmin("SELECT 1")
    return true
  } catch {
    return false
  }
}

const results = []
const notes = []
for (const store of STORES) {
  if (store === "postgres" && !(await pgAnswers())) {
    notes.push(`PostgreSQL at ${PG_URL} does not answer: skipped`)
    continue
  }
  results.push(await benchStore(store))
}

const f = (n, digits = 1) => (n === null || n === undefined ? "–" : n.toFixed(digits))
const out = []
out.push(`## Agent runs (${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(2)}, ${new Date().toISOString()})`)
out.push("")
out.push(`### Log lines stored from one chatty agent (${LINES.toLocaleString("en")} lines; target ≥ 50,000 lines/s)`)
out.push("")
out.push(
  "| store | lines/s stored | wall s (POST → completed) | receive window s | server CPU s | server peak RSS MiB |"
)
out.push("| --- | ---: | ---: | ---: | ---: | ---: |")
for (const r of results) {
  const i = r.ingest
  out.push(
    `| ${r.store} | ${Math.round(i.lines_per_s).toLocaleString("en")} | ${f(i.wall_s, 2)} | ${f(i.receive_window_s, 2)} | ${f(i.server_cpu_s, 2)} | ${f(i.server_peak_rss_mib, 0)} |`
  )
}
out.push("")
out.push(`### GET /api/runs/:id/logs?limit=1000 on a run of ${LINES.toLocaleString("en")} lines (ms, one client)`)
out.push("")
out.push("| store | query | n | p50 | p95 | p99 | max |")
out.push("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
for (const r of results) {
  for (const [name, s] of [
    ["after=<random>", r.read.after],
    ["since=<timestamp>", r.read.since]
  ]) {
    out.push(`| ${r.store} | ${name} | ${s.n} | ${f(s.p50, 2)} | ${f(s.p95, 2)} | ${f(s.p99, 2)} | ${f(s.max, 2)} |`)
  }
}
out.push("")
out.push("### From POST /api/tasks/:id/run to the agent process running (ms)")
out.push("")
out.push("| store | measure | n | p50 | p95 | max |")
out.push("| --- | --- | ---: | ---: | ---: | ---: |")
for (const r of results) {
  for (const [name, s] of [
    ["POST sent → agent's first instruction", r.spawn.post_to_agent_ms],
    ["POST sent → 201 received", r.spawn.post_to_201_ms]
  ]) {
    out.push(`| ${r.store} | ${name} | ${s.n} | ${f(s.p50)} | ${f(s.p95)} | ${f(s.max)} |`)
  }
}
for (const note of notes) out.push("", `_${note}_`)
console.log(out.join("\n"))

mkdirSync(join(ROOT, "bench/results"), { recursive: true })
writeFileSync(
  join(ROOT, "bench/results/runs.json"),
  `${JSON.stringify({ at: new Date().toISOString(), lines: LINES, results, notes }, null, 2)}\n`
)
agent.destroy()
