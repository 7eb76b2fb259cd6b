#!/usr/bin/env node
/**
 * `npm run bench`: Taskwright (A), the floor (B, `node:http`) and the peer (C, Fastify 5) doing
 * the same work on every endpoint a board uses, measured side by side on this machine in
 * alternating rounds A B C A B C; then the list at scale (100,000 and 1,000,000 tasks, uniform
 * and skewed) with one client, with the plan of Taskwright's list query. `BENCH_STORE=pg`
 * measures the three on PostgreSQL instead (`pg` pools), `BENCH_STORE=both` SQLite then
 * PostgreSQL. See bench/README.md for the knobs and what every column means.
 */
import { spawnSync } from "node:child_process"
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs"
import os from "node:os"
import { dirname, join, relative } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import Database from "better-sqlite3"
import pg from "pg"
import { checkServer, makeOracle, makePgOracle } from "./lib/check.mjs"
import { ENDPOINTS, LONG_RUNS, planFor, WRITES } from "./lib/endpoints.mjs"
import { explainPg, explainSqlite, listSql, sameStatement } from "./lib/explain.mjs"
import { chooseLoadgen, mergeLatencies, runLoad } from "./lib/loadgen.mjs"
import {
  assertLoopback,
  backendPids,
  benchDbName,
  createDatabase,
  createdNames,
  dbUrl,
  dropCreated,
  dropDatabase,
  dropOrphans,
  holdsDatabases,
  PG_BASE_URL,
  PG_POOL_MAX,
  refuseNewDatabases,
  serverVersion
} from "./lib/pg.mjs"
import { cpuSeconds, freePort, killAll, memory, placeRequestThread, startServer, stopServer } from "./lib/proc.mjs"
import {
  explainBlocks,
  largeTable,
  restartSummary,
  restartTable,
  startupTable,
  summarise,
  summaryTable,
  throughputTables
} from "./lib/report.mjs"
import {
  BUILT_CLI,
  buildHash,
  CLI,
  cliEnv,
  ROOT,
  readBuild,
  SKEW_FRACTION,
  SKEW_STATUS,
  seedCached,
  seedName,
  useCli,
  walIsEmpty
} from "./seed.mjs"
import { seedPg } from "./seed-pg.mjs"

// ---------------------------------------------------------------------------------------------
// Configuration

const env = process.env
const flag = (name, fallback) => {
  const v = env[name]
  if (v === undefined || v === "") return fallback
  return !["0", "false", "no", "off"].includes(v.toLowerCase())
}
const num = (name, fallback, { min = 0, integer = false } = {}) => {
  const v = env[name]
  if (v === undefined || v === "") return fallback
  const n = Number(v)
  if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n))) {
    throw new Error(`${name} must be ${integer ? "an integer" : "a number"} >= ${min}, got ${v}`)
  }
  return n
}
const list = (name, fallback) =>
  env[name]
    ? env[name]
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean)
    : fallback

/** Extra environment for Taskwright: BENCH_A_ENV="K=V,K2=V2" or a JSON object. */
const parseAEnv = (text) => {
  if (!text) return {}
  if (text.trim().startsWith("{")) return JSON.parse(text)
  return Object.fromEntries(
    text
      .split(",")
      .filter(Boolean)
      .map((kv) => {
        const i = kv.indexOf("=")
        if (i < 1) throw new Error(`BENCH_A_ENV: expected K=V, got ${kv}`)
        return [kv.slice(0, i).trim(), kv.slice(i + 1)]
      })
  )
}

const STORES = { sqlite: ["sqlite"], pg: ["pg"], both: ["sqlite", "pg"] }
const EVENTS = ["auto", "on", "off"]

const readConfig = () => {
  const quick = flag("BENCH_QUICK", false)
  const storeName = (env.BENCH_STORE || "sqlite").toLowerCase()
  if (!STORES[storeName]) throw new Error(`BENCH_STORE must be sqlite, pg or both, got ${env.BENCH_STORE}`)
  const durationS = num("BENCH_DURATION", quick ? 2 : 20, { min: 1, integer: true })
  // A write's or a list's p99 needs a longer run than a GET's: each wrk run adds a few hundred slow
  // requests of its own (bench README, "Long runs of writes and lists").
  const longDurationS = num("BENCH_LONG_DURATION", quick ? durationS : Math.max(durationS, 30), {
    min: 1,
    integer: true
  })
  const warmupS = num("BENCH_WARMUP", quick ? 1 : 4, { min: 0, integer: true })
  // A measured run is taken in slices of this many seconds, in turn with the other servers' (0: whole).
  const sliceS = num("BENCH_SLICE", quick ? 0 : 3, { min: 0, integer: true })
  // Each slice after a short unmeasured run of the same load: between two of its slices a server
  // can sit idle for 10 s and more, long enough for a pg pool to close its idle connections.
  const sliceWarmupS = num("BENCH_SLICE_WARMUP", sliceS > 0 ? 1 : 0, { min: 0, integer: true })
  const events = (env.BENCH_EVENTS || "auto").toLowerCase()
  if (!EVENTS.includes(events)) throw new Error(`BENCH_EVENTS must be auto, on or off, got ${env.BENCH_EVENTS}`)
  const config = {
    quick,
    stores: STORES[storeName],
    rounds: num("BENCH_ROUNDS", 2, { min: 1, integer: true }),
    durationS,
    longDurationS,
    warmupS,
    sliceS,
    sliceWarmupS,
    connections: num("BENCH_CONNECTIONS", 50, { min: 1, integer: true }),
    threads: num("BENCH_THREADS", 1, { min: 1, integer: true }),
    tasks: num("BENCH_TASKS", 100_000, { min: 1000, integer: true }),
    // One task per DELETE: room for 20,000 deletes a second through warm-up and run.
    deletePool: num("BENCH_DELETE_POOL", Math.max(50_000, (warmupS + longDurationS) * 20_000), {
      min: 1000,
      integer: true
    }),
    events,
    large: flag("BENCH_LARGE", !quick),
    largeTasks: num("BENCH_LARGE_TASKS", 1_000_000, { min: 1000, integer: true }),
    largeDurationS: num("BENCH_LARGE_DURATION", quick ? 3 : 6, { min: 1, integer: true }),
    largeWarmupS: num("BENCH_LARGE_WARMUP", quick ? 1 : 2, { min: 0, integer: true }),
    // Start-up alone: this many alternating starts of each server after the main rounds (0: none).
    starts: num("BENCH_STARTS", quick ? 0 : 5, { min: 0, integer: true }),
    servers: list("BENCH_SERVERS", ["A", "B", "C"]).map((s) => s.toUpperCase()),
    endpoints: list("BENCH_ENDPOINTS", Object.keys(ENDPOINTS)),
    loadgen: env.BENCH_LOADGEN || undefined,
    // The request thread and the load generator on CPUs of their own, swapped slice by slice.
    pin: flag("BENCH_PIN", os.availableParallelism() >= 2 && spawnSync("taskset", ["-V"]).status === 0),
    keySource: env.BENCH_KEY_SOURCE || "auto",
    schemaSql: env.BENCH_SCHEMA_SQL || undefined,
    aEnv: parseAEnv(env.BENCH_A_ENV),
    // Flags for Taskwright's node, such as `--cpu-prof --cpu-prof-dir=/tmp/prof` (NODE_OPTIONS refuses those).
    aNodeArgs: (env.BENCH_A_NODE_ARGS ?? "").split(" ").filter(Boolean),
    out: env.BENCH_OUT || join(ROOT, "bench/results/latest.json")
  }
  if (config.rounds < 2) console.error("note: BENCH_ROUNDS < 2; BENCH.md asks for at least two rounds")
  for (const e of config.endpoints) if (!ENDPOINTS[e]) throw new Error(`BENCH_ENDPOINTS: unknown endpoint ${e}`)
  for (const s of config.servers)
    if (!["A", "B", "C"].includes(s)) throw new Error(`BENCH_SERVERS: unknown server ${s}`)
  return config
}

// ---------------------------------------------------------------------------------------------
// Servers

const WORK = join(ROOT, "bench/.work")
const NAMES = { A: "A taskwright", B: "B floor", C: "C fastify" }
/**
 * Taskwright's compiled-code cache (src/start.ts in the CLI), emptied when the bench starts: its
 * first start reads the build's cache (beside the bundle, written by `npm run build`), or compiles
 * the bundle where there is none, and writes this cache, as a first start after a build does;
 * later starts read it. Each start records which it was: warm, build or cold.
 */
const CODE_CACHE = join(WORK, "code-cache")
const hasCache = (dir) => existsSync(dir) && readdirSync(dir).some((f) => f.startsWith("cli-") && f.endsWith(".v8"))
/** The build's cache is looked for beside the bundle the bench runs (its private copy). */
const codeCacheState = () => (hasCache(CODE_CACHE) ? "warm" : hasCache(dirname(CLI)) ? "build" : "cold")
/** How long a server is left untouched before its idle RSS is read. */
const IDLE_SETTLE_MS = 12_000
const STORE_NAMES = { sqlite: "SQLite", pg: "PostgreSQL" }
/**
 * On PostgreSQL, each server start gets a fresh copy of the seed: a database per server, since the
 * servers of a round live side by side.
 */
const runDb = (def) => benchDbName(`run_${def.key.toLowerCase()}`)

/**
 * `events`: the peers append one row to `events` in every change's transaction (`--events`);
 * `taskwrightEvents`: Taskwright's schema has the table (then Taskwright appends).
 */
const serverDefs = (config, store, { events, taskwrightEvents }) => {
  const node = process.execPath
  const plainEnv = cliEnv({ NODE_ENV: "production" })
  // B and C: one module each, the store chosen on the command line.
  const storeArgs = (dir, database) =>
    store === "pg"
      ? ["--store", "pg", "--database", dbUrl(database)]
      : ["--store", "sqlite", "--db", join(dir, "taskwright.db")]
  const peerArgv = (file) => (port, dir, database) => [
    node,
    join(ROOT, file),
    "--port",
    String(port),
    "--host",
    "127.0.0.1",
    ...storeArgs(dir, database),
    ...(events ? ["--events"] : [])
  ]
  // Taskwright limits each credential to 1000 requests a minute by default; the bench sends
  // that many in a tenth of a second. The limiter still runs (and costs what it costs), it
  // just never refuses. BENCH_A_ENV can override this.
  const aEnv = cliEnv({
    NODE_ENV: "production",
    TASKWRIGHT_RATE_LIMIT: "1000000000",
    TASKWRIGHT_CODE_CACHE: CODE_CACHE,
    ...config.aEnv
  })
  // On PostgreSQL the data dir still holds agents.json and worktrees; the data is in the run's database.
  const aEnvFor = (database) => (store === "pg" ? { ...aEnv, DATABASE_URL: dbUrl(database) } : aEnv)
  return {
    A: {
      key: "A",
      name: NAMES.A,
      available: existsSync(CLI),
      skipReason: existsSync(CLI)
        ? null
        : `${relative(ROOT, BUILT_CLI)} does not exist yet (build Taskwright with \`npm run build\`)`,
      argv: (port, dir) => [
        node,
        ...config.aNodeArgs,
        CLI,
        "serve",
        "--port",
        String(port),
        "--host",
        "127.0.0.1",
        "--data-dir",
        dir
      ],
      env: aEnvFor,
      events: taskwrightEvents
    },
    B: {
      key: "B",
      name: NAMES.B,
      available: true,
      argv: peerArgv("bench/servers/floor.mjs"),
      env: () => plainEnv,
      events
    },
    C: {
      key: "C",
      name: NAMES.C,
      available: true,
      argv: peerArgv("bench/servers/fastify.mjs"),
      env: () => plainEnv,
      events
    }
  }
}

const log = (...args) => console.error(...args)

/** Seconds of an endpoint's measured run in the main rounds. */
const secondsOf = (config, endpoint) => (LONG_RUNS.has(endpoint) ? config.longDurationS : config.durationS)

/** The measured runs' length as the report states it: a write's or a list's run may be the longer. */
const measuredSeconds = (config) => {
  const lengths = new Set(config.endpoints.map((e) => secondsOf(config, e)))
  if (lengths.size === 1) return `${[...lengths][0]} s`
  return `${config.durationS} s (${config.longDurationS} s for a write or a list)`
}

/** CPU seconds of the PostgreSQL backends serving `database`, per pid (null on SQLite). */
const dbCpuSnapshot = async (ctx, database) => {
  if (ctx.store !== "pg") return null
  const pids = await backendPids(ctx.admin, database)
  return new Map(pids.map((pid) => [pid, cpuSeconds(pid)]).filter(([, s]) => s !== null))
}

/**
 * What the backends used between two snapshots: every backend alive at the end, from its CPU at
 * the start (0 for one that connected since). A backend that quit meanwhile is missed; the pools
 * keep theirs open through a run.
 */
const dbCpuBetween = (before, after) => {
  if (before === null || after === null) return null
  let total = 0
  for (const [pid, s] of after) total += s - (before.get(pid) ?? 0)
  return total
}

/** Size of the server's write-ahead log in MiB (SQLite; 0 when there is none). */
const walMiB = (dir) => {
  try {
    return statSync(join(dir, "taskwright.db-wal")).size / 2 ** 20
  } catch {
    return 0
  }
}

/**
 * The statements the PostgreSQL backends serving `database` were seen running, polled from
 * `pg_stat_activity` until `stop()` (which answers them).
 */
const watchStatements = (ctx, database) => {
  const seen = new Set()
  let running = true
  const poll = (async () => {
    while (running) {
      try {
        const r = await ctx.admin.query(
          "SELECT DISTINCT query FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
          [database]
        )
        for (const row of r.rows) if (row.query) seen.add(row.query)
      } catch {}
      await sleep(25)
    }
  })()
  return async () => {
    running = false
    await poll
    return [...seen]
  }
}

/**
 * A fresh copy of the seed for one server start: a file on SQLite, a database from the seed's
 * template on PostgreSQL. Answers where it is and how to drop it.
 */
const freshCopy = async ({ def, seed, round, phase, ctx }) => {
  const pgStore = ctx.store === "pg"
  const dir = join(ctx.runDir, `${def.key}-${phase}-r${round}`)
  const database = runDb(def)
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  if (pgStore) {
    // A fresh copy of the seeded database; its template has no connection open.
    await createDatabase(database, { template: seed.database })
  } else {
    if (!walIsEmpty(seed.file)) throw new Error(`${seed.file}-wal has content: the seed is not a single file`)
    copyFileSync(seed.file, join(dir, "taskwright.db"))
  }
  const dropCopy = async () => {
    rmSync(dir, { recursive: true, force: true })
    if (!pgStore) return
    try {
      await dropDatabase(database)
    } catch (e) {
      log(`  could not drop ${database}: ${e.message} (dropped again at exit)`)
    }
  }
  return { dir, database, dropCopy }
}

/**
 * The start of one server life: a fresh copy of the seed, the start (timed), idle RSS, the checks.
 * Answers the life: its record, and how to reach and end the server (`started` is null when it
 * did not start).
 */
const startLife = async ({ def, seed, oracle, round, phase, checkLevel, ctx }) => {
  const pgStore = ctx.store === "pg"
  const { dir, database, dropCopy } = await freshCopy({ def, seed, round, phase, ctx })
  const logFile = join(WORK, "logs", `${def.key}-${pgStore ? "pg-" : ""}${phase}-${seed.name}-r${round}.log`)
  rmSync(logFile, { force: true })
  const port = await freePort()
  const argv = def.argv(port, dir, database)
  const record = {
    phase,
    round,
    server: def.key,
    seed: seed.name,
    tasks: seed.tasks,
    port,
    logFile: relative(ROOT, logFile)
  }
  // Which build of Taskwright this was: a rebuild during the run makes its rounds incomparable.
  if (def.key === "A") {
    record.build = ctx.build
    record.codeCache = codeCacheState()
  }
  const life = { def, record, dir, database, port, started: null, ended: false, dropCopy }
  try {
    // The copy's pages (and, before a round's first start, the seed's) written back before the
    // clock starts, as in the start-up step: run 43's first start came right after 780,000 rows
    // were seeded, with whatever the kernel still held to write.
    writeBack()
    life.started = await startServer({
      command: argv[0],
      args: argv.slice(1),
      env: def.env(database),
      cwd: ROOT,
      logFile,
      port
    })
  } catch (e) {
    record.error = `start failed: ${e.message}`
    log(`  ${def.name}: ${record.error}`)
    await endLife(life)
    return life
  }
  const started = life.started
  record.startupMs = started.startupMs
  await sleep(500)
  record.startRssMiB = memory(started.pid)?.rssMiB ?? null
  // Idle: untouched for IDLE_SETTLE_MS, so V8's memory reducer (it runs some 8 s after allocation
  // stops, shrinking the young generation start-up grew) has had its turn, for every server alike.
  // At every start of the main rounds: the first start of a new build reads the build's code cache
  // (or compiles the whole bundle, a cold start) and writes its own, which may leave more behind.
  if (phase === "main") {
    await sleep(IDLE_SETTLE_MS - 500)
    record.idleRssMiB = memory(started.pid)?.rssMiB ?? null
  }
  try {
    const checked = pgStore ? { url: dbUrl(database) } : { file: join(dir, "taskwright.db") }
    record.check = await checkServer({ port, seed, oracle, level: checkLevel, database: checked, events: def.events })
    if (!record.check.ok) {
      log(`  ${def.name}: CHECK FAILED (${record.check.failureCount} failures), first:`)
      for (const f of record.check.failures.slice(0, 3))
        log(`    ${f.what}: ${f.why}${f.body ? ` — ${f.body.slice(0, 160)}` : ""}`)
    }
    if (record.check.orderWarnings > 0 && (round === 1 || phase !== "main")) {
      const w = record.check.warnings[0]
      log(
        `  ${def.name}: right values, other key order in ${record.check.orderWarnings} responses, e.g. ${w.what}: ${w.why}`
      )
    }
  } catch (e) {
    record.error = `check failed: ${e.message}`
    log(`  ${def.name}: ${record.error}`)
    await endLife(life)
  }
  return life
}

/**
 * Waits until a server has stopped working after a load (at most `limitMs`): Taskwright's SQLite
 * checkpointer copies what the writes left in the log for a moment after them, and the servers
 * of a round live side by side, so the next measurement of another server would pay for it.
 */
const quiet = async (pid, limitMs = 5_000) => {
  const until = performance.now() + limitMs
  for (;;) {
    const before = cpuSeconds(pid)
    await sleep(200)
    const after = cpuSeconds(pid)
    if (before === null || after === null || after - before < 0.01 || performance.now() > until) return
  }
}

/** Everything the kernel holds to write, written (`sync`, so PostgreSQL's files too). */
const writeBack = () => {
  const r = spawnSync("sync", [], { stdio: "ignore" })
  if (r.status !== 0)
    log(`  sync failed (${r.error?.message ?? `exit ${r.status}`}): a measurement may pay for earlier writes`)
}

/**
 * Each server's warm-up, then its measured run cut into slices of at most `sliceS` seconds taken
 * in turn (A B C, then C B A, ...; odd rounds start with A, even ones with C), so that whatever
 * the machine does for a few seconds falls on every server alike: on these machines a server's
 * rate on the same endpoint moves by up to half between two runs a minute apart (bench README,
 * "Slices"). Answers each server's measurement: the slices summed, its percentiles read from the
 * slices' latencies taken together.
 */
const measureEndpoint = async (
  lives,
  endpoint,
  { phase, round, seed, connections, secondsOf, sliceS, warmupS, ctx }
) => {
  const { config, loadgen } = ctx
  const pgStore = ctx.store === "pg"
  const threads = Math.min(config.threads, connections)
  const seconds = secondsOf(endpoint)
  // An even count when the servers are placed: each server gets as many slices on either CPU.
  const cut = sliceS > 0 ? Math.max(1, Math.ceil(seconds / sliceS)) : 1
  const slices = config.pin && cut > 1 && cut % 2 === 1 ? cut + 1 : cut
  // Whole seconds (wrk's unit), the longer slices first.
  const sliceLengths = Array.from(
    { length: slices },
    (_, i) => Math.floor(seconds / slices) + (i < seconds % slices ? 1 : 0)
  )
  const states = lives.map((life) => ({ life, sent: 0, runs: [], cpuS: 0, dbCpuS: 0, warm: null, failed: null }))
  /**
   * One wrk run on a life's server, going on from what was sent to it before; placed, the server's
   * request thread on CPU `cpu` and wrk on the other. On these machines one CPU can run the same
   * server at half the other's rate for minutes (bench README, "Placement"), and the scheduler
   * leaves a busy thread where it is: unplaced, which server got the slow one was chance.
   */
  const run = async (state, runSeconds, cpu) => {
    if (config.pin && !placeRequestThread(state.life.started.pid, cpu))
      throw new Error(`could not place the request thread on CPU ${cpu}`)
    const r = await runLoad({
      port: state.life.port,
      loadgen,
      endpoint,
      label: ENDPOINTS[endpoint].label,
      connections,
      threads,
      scriptDir: ctx.scriptDir,
      pinCpu: config.pin ? 1 - cpu : undefined,
      plan: planFor(endpoint, seed, { after: state.sent }),
      seconds: runSeconds
    })
    // The next run goes on past what this one sent (and what was still in flight): a status
    // PATCH keeps moving tasks the same way, a DELETE deletes tasks still there.
    state.sent += r.requests + connections * threads + Math.ceil(r.requests * 0.1 * (threads - 1)) + 1
    return r
  }
  const live = () => states.filter((state) => state.failed === null && !state.life.ended)
  const guarded = async (state, body) => {
    try {
      await body()
    } catch (e) {
      state.failed = e
      state.life.record.error = `measurement failed: ${e.message}`
      log(`  ${state.life.def.name}: ${state.life.record.error}`)
      await endLife(state.life)
    }
  }
  // Whatever the machine still has to write goes to disk first: a round's copies of the seed
  // (250 MB each on SQLite) and a peer's writes would otherwise be written back some 30 s later,
  // in the middle of whichever server is measured then.
  writeBack()
  if (warmupS > 0) {
    for (const state of live()) {
      await guarded(state, async () => {
        const warm = await run(state, warmupS, round % 2)
        state.warm = { rps: warm.rps, non2xx: warm.non2xx, socketErrors: warm.socketErrors }
        await quiet(state.life.started.pid)
      })
    }
  }
  for (let slice = 0; slice < slices; slice++) {
    const order = slice % 2 === 0 ? live() : live().reverse()
    for (const state of order) {
      await guarded(state, async () => {
        const { started, database, def } = state.life
        writeBack()
        if (config.sliceWarmupS > 0) await run(state, config.sliceWarmupS, (slice + round) % 2)
        await sleep(100)
        const watch = pgStore && def.key === "A" && phase === "large" ? watchStatements(ctx, database) : null
        const db0 = await dbCpuSnapshot(ctx, database)
        const cpu0 = cpuSeconds(started.pid)
        const r = await run(state, sliceLengths[slice], (slice + round) % 2)
        const cpu1 = cpuSeconds(started.pid)
        const db1 = await dbCpuSnapshot(ctx, database)
        if (watch)
          state.life.record.statements = [...new Set([...(state.life.record.statements ?? []), ...(await watch())])]
        state.cpuS = state.cpuS === null || cpu0 === null || cpu1 === null ? null : state.cpuS + cpu1 - cpu0
        const db = dbCpuBetween(db0, db1)
        state.dbCpuS = state.dbCpuS === null || db === null ? null : state.dbCpuS + db
        state.runs.push(r)
        await quiet(started.pid)
      })
    }
  }
  const measurements = []
  for (const state of states) {
    if (state.failed !== null || state.runs.length < slices) continue
    const { def, started, dir } = state.life
    const runs = state.runs
    const requests = sum(runs.map((r) => r.requests))
    const secondsMeasured = sum(runs.map((r) => r.seconds))
    const merged = (p) =>
      runs.every((r) => r.gridMs)
        ? mergeLatencies(
            runs.map((r) => ({ requests: r.requests, grid: r.gridMs })),
            p
          )
        : sum(runs.map((r) => r.requests * r[`p${p}Ms`])) / requests
    const statuses = {}
    for (const r of runs)
      for (const [code, n] of Object.entries(r.statuses ?? {})) statuses[code] = (statuses[code] ?? 0) + n
    const mem = memory(started.pid)
    const result = {
      requests,
      seconds: secondsMeasured,
      rps: requests / secondsMeasured,
      p50Ms: merged(50),
      p90Ms: merged(90),
      p99Ms: merged(99),
      maxMs: Math.max(...runs.map((r) => r.maxMs)),
      non2xx: sum(runs.map((r) => r.non2xx)),
      statuses,
      socketErrors: sum(runs.map((r) => r.socketErrors)),
      loadgenCpuS: runs.some((r) => r.loadgenCpuS === null) ? null : sum(runs.map((r) => r.loadgenCpuS)),
      serverCpuS: state.cpuS,
      ...(pgStore ? { dbCpuS: state.dbCpuS } : { walMiB: walMiB(dir) }),
      rssMiB: mem?.rssMiB ?? null,
      peakRssMiB: mem?.peakRssMiB ?? null,
      warmup: state.warm,
      slices: runs.map((r) => ({ seconds: r.seconds, rps: r.rps, p99Ms: r.p99Ms, maxMs: r.maxMs }))
    }
    if (endpoint === "delete_task" && seed.poolFirstId + state.sent > seed.poolFirstId + seed.pool - 2) {
      result.poolExhausted = true
      log(`  ${def.name}: the delete pool ran out (${seed.pool} tasks); raise BENCH_DELETE_POOL`)
    }
    log(
      `  ${def.name.padEnd(13)} ${endpoint.padEnd(18)} ${String(Math.round(result.rps)).padStart(6)} req/s` +
        `  p50 ${result.p50Ms.toFixed(2)} ms  p99 ${result.p99Ms.toFixed(2)} ms  non-2xx ${result.non2xx}` +
        `${result.socketErrors ? ` sock-err ${result.socketErrors}` : ""}  cpu ${result.serverCpuS?.toFixed(2)} s` +
        `${pgStore ? `  db cpu ${result.dbCpuS?.toFixed(2)} s` : ""}` +
        `  loadgen ${result.loadgenCpuS?.toFixed(2)} s  rss ${result.rssMiB?.toFixed(0)} MiB` +
        `${!pgStore && WRITES.has(endpoint) ? `  wal ${result.walMiB.toFixed(0)} MiB` : ""}` +
        `${slices > 1 ? `  (${slices} slices: ${runs.map((r) => Math.round(r.rps)).join(" ")} req/s)` : ""}`
    )
    measurements.push({ phase, round, server: def.key, seed: seed.name, tasks: seed.tasks, endpoint, result })
  }
  return measurements
}

const sum = (xs) => xs.reduce((a, b) => a + b, 0)

/** SIGTERM to a life's server, and its copy of the seed dropped (once). */
const endLife = async (life) => {
  if (life.ended) return
  life.ended = true
  if (life.started !== null) {
    life.record.stop = await stopServer(life.started)
    if (!life.record.stop.clean)
      log(`  ${life.def.name}: did not shut down cleanly: ${JSON.stringify(life.record.stop)}`)
  }
  await life.dropCopy()
}

/** The servers in a round's order: A B C in odd rounds, C B A in even ones. */
const inTurn = (defs, round) => (round % 2 === 1 ? defs : [...defs].reverse())

/**
 * The servers of a round started side by side (each idle while the others start and are
 * measured), then every endpoint measured on each in turn, so that a server's figures for an
 * endpoint and its peers' are a few seconds apart, not minutes: this machine's speed drifts by
 * up to half within minutes. Odd rounds go A B C, even rounds C B A. Answers records and measurements.
 */
const runRound = async (
  defs,
  { seed, oracle, round, phase, endpoints, connections, secondsOf, sliceS, warmupS, checkLevel, ctx }
) => {
  const order = inTurn(defs, round)
  const lives = []
  const measurements = []
  try {
    for (const def of order) lives.push(await startLife({ def, seed, oracle, round, phase, checkLevel, ctx }))
    for (const endpoint of endpoints) {
      // Ended: it did not start, or failed its check or a measurement.
      const running = lives.filter((life) => !life.ended)
      if (running.length === 0) break
      measurements.push(
        ...(await measureEndpoint(running, endpoint, {
          phase,
          round,
          seed,
          connections,
          secondsOf,
          sliceS,
          warmupS,
          ctx
        }))
      )
    }
  } finally {
    for (const life of lives) await endLife(life)
  }
  return { records: lives.map((l) => l.record), measurements }
}

/**
 * Taskwright's first starts, as servers of their own in the start-up step. A0, the first start
 * after `npm run build` or an install: each with an empty code cache of its own, so it reads the
 * cache beside the bundle, which the build and the package's `postinstall` both write. Ac, a start
 * with no cache at all (`TASKWRIGHT_CODE_CACHE=off`), so it compiles the bundle, as the first start
 * after an install that skipped the package's scripts does. One first start per run is a single
 * sample (±80 ms here); these give a median.
 */
const firstStartDefs = (a) => [
  {
    ...a,
    key: "A0",
    name: START_NAMES.A0,
    env: (database) => ({ ...a.env(database), TASKWRIGHT_CODE_CACHE: join(WORK, `code-cache-first-${process.pid}`) })
  },
  { ...a, key: "Ac", name: START_NAMES.Ac, env: (database) => ({ ...a.env(database), TASKWRIGHT_CODE_CACHE: "off" }) }
]
const START_NAMES = {
  A: NAMES.A,
  A0: "A taskwright, first start",
  Ac: "A taskwright, no cache",
  B: NAMES.B,
  C: NAMES.C
}

/**
 * Start-up on its own: `count` rounds in which each server is started on a fresh copy of the seed
 * and stopped once it answers, in turn (A A0 Ac B C, then C B Ac A0 A, ...), so that each server's
 * starts are spread over the same minutes as its peers'. A single start varies by ±80 ms here; the
 * main rounds give one per round, and Taskwright's first is the build's first (it reads the build's
 * cache and writes its own), so A's starts here, all after it, are the ones a restart sees, A0's
 * (each from an empty cache of its own) the ones a first start after a build sees, and Ac's (no
 * cache at all) those after an install from a package. Answers one record per start.
 */
const measureStarts = async (defs, { seed, count, ctx }) => {
  const starts = []
  const withFirst = defs.flatMap((d) => (d.key === "A" ? [d, ...firstStartDefs(d)] : [d]))
  for (let round = 1; round <= count; round++) {
    for (const def of inTurn(withFirst, round)) {
      const { dir, database, dropCopy } = await freshCopy({ def, seed, round, phase: "starts", ctx })
      const port = await freePort()
      const argv = def.argv(port, dir, database)
      const env = def.env(database)
      const record = { server: def.key, round, ...(def.key === "A" ? { codeCache: codeCacheState() } : {}) }
      try {
        // The copy's pages written back before the clock starts, as for a service's restart.
        writeBack()
        const started = await startServer({
          command: argv[0],
          args: argv.slice(1),
          env,
          cwd: ROOT,
          logFile: join(WORK, "logs", `${def.key}-${ctx.store}-starts.log`),
          port
        })
        record.startupMs = started.startupMs
        record.stop = await stopServer(started)
      } catch (e) {
        record.error = e.message
        log(`  ${def.name}: start ${round} failed: ${e.message}`)
      } finally {
        if (def.key === "A0") rmSync(env.TASKWRIGHT_CODE_CACHE, { recursive: true, force: true })
        await dropCopy()
      }
      starts.push(record)
    }
  }
  return starts
}

// ---------------------------------------------------------------------------------------------
// Main

/** The repository's commit (the build may hold uncommitted work of the shared tree). */
const gitHead = () => {
  const r = spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" })
  return r.status === 0 ? r.stdout.trim() : "unknown"
}

/** True when Taskwright's schema has an `events` table (its WebSocket feature appends to it). */
const hasEventsTable = async (ctx, seed) => {
  if (ctx.store === "pg") {
    const client = new pg.Client({ connectionString: seed.url })
    await client.connect()
    try {
      const r = await client.query("SELECT to_regclass('events') IS NOT NULL AS found")
      return r.rows[0].found
    } finally {
      await client.end()
    }
  }
  const db = new Database(seed.file, { fileMustExist: true })
  try {
    return db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").get() !== undefined
  } finally {
    db.close()
  }
}

/** The plan of Taskwright's list query on a seed (before any copy of it is made). */
const explainSeed = async (ctx, seed) => {
  try {
    return ctx.store === "pg" ? await explainPg(seed.url) : explainSqlite(seed.file)
  } catch (e) {
    return { error: e.message }
  }
}

/**
 * One seed of one store (`shape`: tasks, skewed, pool) and the expected answers read from it;
 * with `explain`, the plan of the list query on it too.
 */
const seedStore = async (ctx, shape, { explain = false } = {}) => {
  const { config } = ctx
  const name = seedName(shape)
  const what = `${shape.tasks.toLocaleString("en-US")} tasks${shape.skewed ? " (skewed)" : ""}${shape.pool ? ` + a delete pool of ${shape.pool.toLocaleString("en-US")}` : ""}`
  let seed
  if (ctx.store === "pg") {
    log(`seeding ${what} into PostgreSQL...`)
    const database = benchDbName(`seed_${name.replace(/-/g, "_")}`)
    const scratch = join(ctx.runDir, `cli-${database}`)
    seed = await seedPg({ database, ...shape, keySource: config.keySource, scratch, log })
    log(
      `  seeded ${seed.database} (${seed.seconds.toFixed(1)} s, rows in ${seed.loadSeconds.toFixed(1)} s, key: ${seed.keySource})`
    )
  } else {
    log(`seeding ${what}...`)
    seed = seedCached({
      dataDir: join(WORK, `seed-${name}`),
      ...shape,
      schemaSql: config.schemaSql,
      keySource: config.keySource,
      log
    })
    log(
      `  ${seed.cached ? "reused" : "seeded"} ${relative(ROOT, seed.file)} (${seed.seconds.toFixed(1)} s, key: ${seed.keySource})`
    )
  }
  seed.name = name
  const oracle =
    ctx.store === "pg"
      ? await makePgOracle(seed.url, seed.userId, seed.getIds)
      : await makeOracle(seed.file, seed.userId, seed.getIds)
  const plan = explain ? await explainSeed(ctx, seed) : null
  return { seed, oracle, plan }
}

/** The datasets of the list phase: the main size and the large one, uniform and skewed. */
const largeShapes = (config) => [
  { tasks: config.tasks, skewed: false },
  { tasks: config.tasks, skewed: true },
  { tasks: config.largeTasks, skewed: false },
  { tasks: config.largeTasks, skewed: true }
]

const describeShape = (shape) =>
  `${shape.tasks.toLocaleString("en-US")} ${shape.skewed ? `skewed (newest ${Math.floor(shape.tasks * SKEW_FRACTION).toLocaleString("en-US")} all ${SKEW_STATUS})` : "uniform"}`

/** The whole bench on one store: seeds, rounds, the list at scale, the report. */
const runStore = async (store, base) => {
  const t0 = performance.now()
  const { config, loadgen } = base
  const ctx = { ...base, store, admin: null }
  const pgStore = store === "pg"
  const loadStart = os.loadavg()
  if (loadStart[0] > 0.7)
    log(`note: load average is ${loadStart[0].toFixed(2)} before the run; other work will add noise`)
  if (loadgen.tool === "autocannon") {
    log(
      "note: using autocannon; it (Node) shares the 2 cores and can flatten the ratios; wrk is lighter (apt-get install -y wrk)"
    )
  }

  let pgVersion = null
  try {
    if (pgStore) {
      assertLoopback()
      pgVersion = await serverVersion()
      await dropOrphans(log)
      // For pg_stat_activity: on the maintenance database, never on a template or a run copy.
      ctx.admin = new pg.Client({ connectionString: dbUrl("postgres") })
      await ctx.admin.connect()
    }
    const pool = config.endpoints.includes("delete_task") ? config.deletePool : 0
    const { seed, oracle } = await seedStore(ctx, { tasks: config.tasks, pool })
    log(`  ${seed.getIds.length} task ids for GET and PATCH /api/tasks/:id (${oracle.withRuns} with agent runs)`)
    const taskwrightEvents = await hasEventsTable(ctx, seed)
    const events = config.events === "on" || (config.events === "auto" && taskwrightEvents)
    if (events !== taskwrightEvents) {
      log(
        `note: the peers ${events ? "append" : "do not append"} events; Taskwright's schema has ${taskwrightEvents ? "an" : "no"} events table`
      )
    }
    const defs = serverDefs(config, store, { events, taskwrightEvents })
    const active = config.servers
      .map((k) => defs[k])
      .filter((d) => {
        if (!d.available) log(`SKIPPING ${d.name}: ${d.skipReason}`)
        return d.available
      })
    if (active.length === 0) throw new Error("no server to measure")
    log(
      `bench${pgStore ? " on PostgreSQL" : ""}: ${active.map((d) => d.name).join(", ")} | ${loadgen.tool} ${loadgen.version} | ${config.connections} connections` +
        ` | ${config.rounds} rounds × ${config.endpoints.length} endpoints × (${config.warmupS} s warm-up + ${measuredSeconds(config)})` +
        `${config.large ? ` | list at scale: ${config.tasks} and ${config.largeTasks} tasks, uniform and skewed, 1 connection` : ""}`
    )

    const records = []
    const measurements = []
    /** One round on the active servers; what it answers joins the run's records and measurements. */
    const measureRound = async (options) => {
      const r = await runRound(active, { ...options, ctx })
      records.push(...r.records)
      measurements.push(...r.measurements)
    }
    for (let round = 1; round <= config.rounds; round++) {
      log(`round ${round}/${config.rounds}`)
      await measureRound({
        seed,
        oracle,
        round,
        phase: "main",
        endpoints: config.endpoints,
        connections: config.connections,
        secondsOf: (endpoint) => secondsOf(config, endpoint),
        sliceS: config.sliceS,
        warmupS: config.warmupS,
        checkLevel: "full"
      })
    }

    const restarts = []
    if (config.starts > 0) {
      log(`start-up: ${config.starts} alternating starts of each server`)
      restarts.push(...(await measureStarts(active, { seed, count: config.starts, ctx })))
      for (const [key, name] of Object.entries(START_NAMES)) {
        const times = restarts.filter((r) => r.server === key && r.startupMs !== undefined)
        if (times.length > 0) log(`  ${name.padEnd(12)} ${times.map((r) => Math.round(r.startupMs)).join(" ")} ms`)
      }
    }

    const datasets = []
    if (config.large) {
      for (const shape of largeShapes(config)) {
        datasets.push({ shape, label: describeShape(shape), ...(await seedStore(ctx, shape, { explain: true })) })
      }
      for (let round = 1; round <= config.rounds; round++) {
        for (const d of datasets) {
          log(`list round ${round}/${config.rounds}: ${d.label}, 1 connection`)
          await measureRound({
            seed: d.seed,
            oracle: d.oracle,
            round,
            phase: "large",
            endpoints: ["list_tasks"],
            connections: 1,
            secondsOf: () => config.largeDurationS,
            sliceS: 0,
            warmupS: config.largeWarmupS,
            checkLevel: "list"
          })
        }
      }
    }

    // -----------------------------------------------------------------------------------------
    // Report

    const keys = active.map((d) => d.key)
    const main = summarise(measurements, keys, { phase: "main", seed: seed.name, endpoints: config.endpoints })
    const checkFailed = {}
    const largeCheckFailed = {}
    for (const r of records) {
      if (r.check && !r.check.ok) (r.phase === "main" ? checkFailed : largeCheckFailed)[r.server] = true
    }
    const starts = Object.fromEntries(
      keys.map((k) => [
        k,
        records
          .filter((r) => r.server === k && r.phase === "main")
          .map((r) => ({
            round: r.round,
            startupMs: r.startupMs,
            ...(r.codeCache === undefined ? {} : { codeCache: r.codeCache }),
            startRssMiB: r.startRssMiB,
            idleRssMiB: r.idleRssMiB,
            stop: r.stop,
            error: r.error
          }))
      ])
    )
    const large = datasets.map((d) => ({
      label: d.label,
      seed: d.seed.name,
      tasks: d.shape.tasks,
      skewed: d.shape.skewed,
      plan: d.plan,
      list: summarise(measurements, keys, { phase: "large", seed: d.seed.name, endpoints: ["list_tasks"] }).list_tasks
    }))
    // Did Taskwright run the statement the plans are of? (PostgreSQL: seen in pg_stat_activity.)
    const seenStatements = [...new Set(records.filter((r) => r.statements).flatMap((r) => r.statements))]
    const seenList = seenStatements.filter((t) => /from\s+tasks/i.test(t) && /order\s+by/i.test(t) && /limit/i.test(t))

    const when = new Date().toISOString()
    const cpu = os.cpus()
    const md = []
    md.push(`## Taskwright bench on ${STORE_NAMES[store]} — ${when}`)
    md.push("")
    md.push(
      `${cpu.length} × ${cpu[0]?.model ?? "cpu"}, Node ${process.version}, ${loadgen.tool} ${loadgen.version}` +
        ` (${config.threads} thread${config.threads > 1 ? "s" : ""}), ${config.connections} connections,` +
        ` ${config.rounds} rounds of ${config.warmupS} s warm-up + ${measuredSeconds(config)} per endpoint` +
        `${config.sliceS > 0 ? ` (in slices of at most ${config.sliceS} s taken in turn by the servers, each wrk run's connections open before its first request)` : " (each wrk run's connections open before its first request)"};` +
        ` ${seed.tasks.toLocaleString("en-US")} tasks${seed.pool ? ` (+ ${seed.pool.toLocaleString("en-US")} of another user at the lowest ids, deleted one per DELETE)` : ""}` +
        `${config.pin ? "; each run with the server's request thread on one CPU and wrk on the other, swapped slice by slice" : ""}.`
    )
    if (keys.includes("A")) {
      md.push("")
      md.push(
        `Taskwright: build \`${ctx.build}\` of \`packages/cli/dist/main.js\`, working tree at commit \`${gitHead()}\`.`
      )
    }
    md.push("")
    md.push(
      `In each round the servers run side by side (each idle while another is measured) and every endpoint is measured on each in turn, ${keys.join(" ")} in odd rounds and ${[...keys].reverse().join(" ")} in even ones${config.sliceS > 0 ? `, slice by slice (${keys.join(" ")}, then ${[...keys].reverse().join(" ")}, ...; p50 and p99 of a server are of its slices' latencies together)` : ""}; each server start gets a fresh copy of the same seed` +
        (pgStore
          ? ` (\`CREATE DATABASE … TEMPLATE\`) on PostgreSQL ${pgVersion} at 127.0.0.1, and every server a \`pg\` pool of ${PG_POOL_MAX} connections running named prepared statements.`
          : ".") +
        " Ratios are Taskwright's req/s over Fastify's (C) and the floor's (B) in the same round; the mean is the mean of the rounds' ratios, with their range in brackets." +
        (pgStore
          ? " **CPU µs/req** is the Node process's; **DB** is the PostgreSQL backends' serving its database (on the same 2 cores)."
          : " **WAL MiB** is the write-ahead log's size after the run (a statement left unfinished keeps SQLite from checkpointing).")
    )
    md.push("")
    md.push(
      `The peers ${events ? "append one row to `events` in the transaction of every change" : "append no events"}` +
        `; Taskwright's schema has ${taskwrightEvents ? "an" : "no"} \`events\` table${events === taskwrightEvents ? "" : " (**not the same work**)"}.`
    )
    if (pgStore && keys.includes("A") && config.aEnv.TASKWRIGHT_RATE_LIMIT_STORE === undefined) {
      md.push(
        "\nTaskwright runs with its PostgreSQL defaults, so its rate-limit counters live in the database" +
          " (`TASKWRIGHT_RATE_LIMIT_STORE=database`, shared by every process): writes on the request path that B and C do not have;" +
          " `BENCH_A_ENV=TASKWRIGHT_RATE_LIMIT_STORE=memory` measures it with in-process counters as on SQLite."
      )
    }
    for (const d of Object.values(defs))
      if (!d.available && config.servers.includes(d.key)) md.push(`\n**${d.name} skipped:** ${d.skipReason}.`)
    if (Object.keys(checkFailed).length > 0) {
      md.push(
        `\n**⚠ Check failed for ${Object.keys(checkFailed)
          .map((k) => NAMES[k])
          .join(", ")}**: its figures are not comparable (see \`check\` in the JSON and the first failures below).`
      )
      for (const r of records.filter((r) => r.phase === "main" && r.check && !r.check.ok && r.round === 1)) {
        for (const f of r.check.failures.slice(0, 5)) md.push(`- ${NAMES[r.server]}: ${f.what}: ${f.why}`)
      }
    }
    const orderNotes = {}
    for (const r of records) if (r.check?.orderWarnings > 0) orderNotes[r.server] ??= r.check.warnings[0]
    for (const [k, w] of Object.entries(orderNotes)) {
      md.push(`\nNote: ${NAMES[k]} answers the right values with the keys in another order (${w.what}: ${w.why}).`)
    }
    const exhausted = measurements.filter((m) => m.result.poolExhausted)
    if (exhausted.length > 0) {
      md.push(`\n**⚠ The delete pool ran out** in ${exhausted.length} run(s): raise \`BENCH_DELETE_POOL\`.`)
    }
    const tableOpts = { db: pgStore, wal: !pgStore }
    md.push("")
    md.push("### Summary")
    md.push("")
    md.push(summaryTable(main, NAMES, checkFailed, tableOpts))
    md.push("")
    md.push("### Every round")
    md.push("")
    md.push(throughputTables(main, NAMES, checkFailed, tableOpts))
    md.push("")
    md.push("### Start-up (spawn → first 200 from /api/health) and idle RSS")
    md.push("")
    md.push(startupTable(starts, NAMES))
    if (restarts.length > 0) {
      md.push("")
      md.push(
        `Then ${config.starts} starts of each server in turn (A A0 Ac B C, then C B Ac A0 A, ...), each on a fresh copy of the seed with its pages written back, stopped once it answered; Taskwright's (A) from the code cache its first start wrote, as a first start after \`npm run build\` or an install (A0: each from an empty code cache of its own, so from the one the build or the package's \`postinstall\` wrote beside the bundle), and with no cache at all (Ac: \`TASKWRIGHT_CODE_CACHE=off\`, compiling the bundle as the first start after an install that skipped the package's scripts does):`
      )
      md.push("")
      md.push(restartTable(restarts, START_NAMES))
    }
    if (large.length > 0) {
      md.push("")
      md.push(`### The list at scale: \`GET ${ENDPOINTS.list_tasks.label.slice(4)}\`, one client`)
      md.push("")
      md.push(
        `Skewed: the newest ${Math.round(SKEW_FRACTION * 100)}% of the tasks all have the status \`${SKEW_STATUS}\`, and the list asks for \`todo\`,` +
          " so a plan that walks the newest tasks first and filters must pass them all. With one connection p99 is mostly" +
          " scheduling noise on a busy machine; p50 and CPU µs/req show the query's growth best."
      )
      md.push("")
      md.push(largeTable(large, NAMES, largeCheckFailed, tableOpts))
      if (Object.keys(largeCheckFailed).length > 0) {
        md.push(`\n⚠ marks a server whose check failed in this phase (see \`check\` in the JSON).`)
      }
      md.push("")
      md.push(explainBlocks(large, { pg: pgStore, listSql: listSql(pgStore) }))
      if (pgStore && keys.includes("A")) {
        const matches = seenList.some((t) => sameStatement(t, listSql(pgStore)))
        md.push("")
        md.push(
          seenList.length === 0
            ? "Taskwright's list statement was not seen in `pg_stat_activity` during the list phase: the plans above are of the bench's copy."
            : matches
              ? "Taskwright was seen running this very statement during the list phase (`pg_stat_activity`)."
              : `**Taskwright's list statement differs from the bench's copy** (update \`LIST_SQL\` in \`bench/lib/explain.mjs\` and the peers): it ran\n\n\`\`\`sql\n${seenList.join("\n")}\n\`\`\``
        )
      }
    }
    const problems = records.filter((r) => r.error || (r.stop && !r.stop.clean))
    if (problems.length > 0) {
      md.push("")
      md.push("### Problems")
      md.push("")
      for (const r of problems) {
        const what = r.error ?? `unclean shutdown ${JSON.stringify(r.stop)}`
        md.push(`- ${NAMES[r.server]}, ${r.phase} round ${r.round} (${r.seed}): ${what} (log: ${r.logFile})`)
      }
    }
    const elapsedS = (performance.now() - t0) / 1000
    md.push("")
    md.push(
      `Total time ${Math.round(elapsedS)} s. Load average before/after: ${loadStart[0].toFixed(2)} / ${os.loadavg()[0].toFixed(2)}.`
    )
    const markdown = md.join("\n")

    const publicSeed = (s) => {
      if (!s) return null
      const { secret, poolSecret, sessionToken, getIds, file, dataDir, url, ...rest } = s
      return {
        ...rest,
        ...(file ? { file: relative(ROOT, file) } : {}),
        keyPrefix: secret.slice(0, 12),
        getIdCount: getIds.length
      }
    }
    const results = {
      store,
      generatedAt: when,
      elapsedS,
      config: { ...config, aEnv: Object.keys(config.aEnv) },
      events: { peers: events, taskwrightTable: taskwrightEvents },
      machine: {
        cpus: cpu.length,
        cpuModel: cpu[0]?.model,
        memoryGiB: os.totalmem() / 2 ** 30,
        node: process.version,
        platform: `${os.platform()} ${os.release()}`,
        loadavgBefore: loadStart,
        loadavgAfter: os.loadavg()
      },
      taskwright: { build: ctx.build, commit: gitHead() },
      ...(pgStore ? { postgres: { version: pgVersion, server: PG_BASE_URL, poolMax: PG_POOL_MAX } } : {}),
      loadgen,
      seed: {
        main: { ...publicSeed(seed), getIdsWithRuns: oracle.withRuns },
        large: datasets.map((d) => publicSeed(d.seed))
      },
      servers: Object.fromEntries(
        Object.values(defs).map((d) => [
          d.key,
          { name: d.name, measured: keys.includes(d.key), skipReason: d.available ? null : d.skipReason }
        ])
      ),
      listSql: listSql(pgStore),
      taskwrightStatementsSeen: seenStatements,
      summary: { main, large, startup: starts, restarts: restartSummary(restarts, START_NAMES) },
      runs: records,
      measurements,
      markdown
    }
    return { results, markdown }
  } finally {
    if (ctx.admin) await ctx.admin.end().catch(() => {})
    if (pgStore) for (const f of await dropCreated()) log(`could not drop ${f}`)
  }
}

/** The build's files once they have stayed the same for a second (a rebuild may be writing them), or null at `deadline`. */
const settledBuild = async (deadline) => {
  let last = null
  while (performance.now() < deadline) {
    const now = readBuild(BUILT_CLI)
    if (now !== null && last !== null && now.entry.equals(last.entry) && now.bundle.equals(last.bundle)) return now
    last = now
    await sleep(1000)
  }
  return null
}

/**
 * Copies Taskwright's built CLI (its entry and bundle; its dependencies resolve from the repository's
 * node_modules as before) to bench/.work/build-<hash>/ and runs that copy from now on. When the
 * build is missing (someone is rebuilding), waits up to BENCH_BUILD_WAIT seconds (120) for it.
 * Answers the build's hash, or null when there is no build.
 */
const snapshotBuild = async () => {
  const waitS = num("BENCH_BUILD_WAIT", 120)
  if (!existsSync(BUILT_CLI)) {
    if (waitS === 0) return null
    log(`${relative(ROOT, BUILT_CLI)} is missing (a rebuild?): waiting up to ${waitS} s for it`)
  }
  const build = await settledBuild(performance.now() + Math.max(waitS, 2) * 1000)
  if (build === null) return null
  const hash = buildHash(build).slice(0, 12)
  const dir = join(WORK, `build-${hash}`)
  mkdirSync(dir, { recursive: true })
  // The bytes read above, not the files now (a rebuild may have begun); the viewer is not needed to serve.
  writeFileSync(join(dir, "main.js"), build.entry)
  writeFileSync(join(dir, "cli.cjs"), build.bundle)
  // The build's code cache as the build left it: read only when others cannot write it.
  for (const { name, bytes } of build.caches) writeFileSync(join(dir, name), bytes, { mode: 0o644 })
  useCli(join(dir, "main.js"))
  return hash
}

/** Set once SIGINT/SIGTERM arrived: the stop in progress (it ends the process). */
let interrupted = null

const main = async () => {
  const t0 = performance.now()
  const config = readConfig()
  const loadgen = chooseLoadgen(config.loadgen)

  mkdirSync(join(WORK, "logs"), { recursive: true })
  const scriptDir = join(WORK, `scripts-${process.pid}`)
  mkdirSync(scriptDir, { recursive: true })
  // Per-process directories, so a second runner (or an interrupted one) cannot trip this one.
  const runDir = join(WORK, `run-${process.pid}`)
  const cleanup = () => {
    rmSync(scriptDir, { recursive: true, force: true })
    rmSync(runDir, { recursive: true, force: true })
  }
  const interrupt = (sig) => {
    if (interrupted) {
      log(`${sig} again: exiting now${createdNames().length ? `; left behind: ${createdNames().join(", ")}` : ""}`)
      process.exit(130)
    }
    log(`\n${sig}: stopping every server and load generator`)
    killAll()
    refuseNewDatabases()
    cleanup()
    if (!holdsDatabases()) process.exit(130)
    interrupted = (async () => {
      log(`dropping the bench's databases (${createdNames().join(", ")})`)
      const failures = await Promise.race([dropCreated(), sleep(30_000).then(() => ["timed out"])])
      for (const f of failures) log(`could not drop ${f}`)
      cleanup() // again: the rounds ran on while the databases were dropped
      process.exit(130)
    })()
  }
  process.on("SIGINT", () => interrupt("SIGINT"))
  process.on("SIGTERM", () => interrupt("SIGTERM"))

  // Taskwright as built now, copied: a rebuild by someone else during the run changes nothing here.
  const build = await snapshotBuild()
  rmSync(CODE_CACHE, { recursive: true, force: true })
  if (build) log(`Taskwright: ${relative(ROOT, BUILT_CLI)} (build ${build}), run from a private copy`)
  try {
    const outputs = []
    for (const store of config.stores) {
      if (config.stores.length > 1) log(`\n=== ${STORE_NAMES[store]} ===`)
      try {
        outputs.push({ store, ...(await runStore(store, { config, loadgen, scriptDir, runDir, build })) })
      } catch (e) {
        if (config.stores.length === 1 || interrupted) throw e
        log(`bench on ${STORE_NAMES[store]} failed: ${e?.message ?? e}`)
        const markdown = `## Taskwright bench on ${STORE_NAMES[store]}\n\n**Failed:** ${e?.message ?? e}`
        outputs.push({ store, error: String(e?.message ?? e), markdown })
      }
    }
    const markdown = outputs.map((o) => o.markdown).join("\n\n")
    const results =
      outputs.length === 1
        ? outputs[0].results
        : {
            generatedAt: new Date().toISOString(),
            elapsedS: (performance.now() - t0) / 1000,
            stores: Object.fromEntries(outputs.map((o) => [o.store, o.results ?? { error: o.error }])),
            markdown
          }
    mkdirSync(join(config.out, ".."), { recursive: true })
    writeFileSync(config.out, `${JSON.stringify(results, null, 2)}\n`)
    process.stdout.write(`${markdown}\n`)
    log(`\nresults: ${relative(ROOT, config.out)}`)
    const unclean = outputs.flatMap((o) => o.results?.runs ?? []).filter((r) => r.stop && !r.stop.clean)
    if (unclean.length > 0 || outputs.some((o) => o.error)) process.exitCode = 1
  } finally {
    cleanup()
  }
}

main().catch(async (e) => {
  if (interrupted) return interrupted // the interrupt drops what was created, then exits
  console.error(`bench failed: ${env.BENCH_DEBUG ? (e?.stack ?? e) : (e?.message ?? e)}`)
  killAll()
  for (const f of await dropCreated()) console.error(`could not drop ${f}`)
  process.exit(1)
})
