#!/usr/bin/env node
/**
 * `npm run bench`: Taskwright (A), the floor (B, node:http + better-sqlite3) and the peer
 * (C, Fastify 5) doing the same work, measured side by side on this machine in alternating
 * rounds A B C A B C. `BENCH_STORE=pg` measures the three on PostgreSQL instead (`pg` pools),
 * `BENCH_STORE=both` SQLite then PostgreSQL. See bench/README.md for the knobs and what every
 * column means.
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import os from "node:os"
import { join, relative } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import pg from "pg"
import { checkServer, makeOracle, makePgOracle } from "./lib/check.mjs"
import { chooseLoadgen, ENDPOINTS, runLoad } from "./lib/loadgen.mjs"
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
import { cpuSeconds, freePort, killAll, memory, startServer, stopServer } from "./lib/proc.mjs"
import { largeTable, startupTable, summarise, throughputTables } from "./lib/report.mjs"
import { CLI, cliEnv, ROOT, seedCached, sha256Hex, walIsEmpty } from "./seed.mjs"
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

const readConfig = () => {
  const quick = flag("BENCH_QUICK", false)
  const storeName = (env.BENCH_STORE || "sqlite").toLowerCase()
  if (!STORES[storeName]) throw new Error(`BENCH_STORE must be sqlite, pg or both, got ${env.BENCH_STORE}`)
  const config = {
    quick,
    stores: STORES[storeName],
    rounds: num("BENCH_ROUNDS", 2, { min: 1, integer: true }),
    durationS: num("BENCH_DURATION", quick ? 2 : 10, { min: 1, integer: true }),
    warmupS: num("BENCH_WARMUP", quick ? 1 : 4, { min: 0, integer: true }),
    connections: num("BENCH_CONNECTIONS", 50, { min: 1, integer: true }),
    threads: num("BENCH_THREADS", 1, { min: 1, integer: true }),
    tasks: num("BENCH_TASKS", 100_000, { min: 1000, integer: true }),
    large: flag("BENCH_LARGE", !quick),
    largeTasks: num("BENCH_LARGE_TASKS", 1_000_000, { min: 1000, integer: true }),
    largeDurationS: num("BENCH_LARGE_DURATION", quick ? 3 : 6, { min: 1, integer: true }),
    largeWarmupS: num("BENCH_LARGE_WARMUP", quick ? 1 : 2, { min: 0, integer: true }),
    servers: list("BENCH_SERVERS", ["A", "B", "C"]).map((s) => s.toUpperCase()),
    endpoints: list("BENCH_ENDPOINTS", Object.keys(ENDPOINTS)),
    loadgen: env.BENCH_LOADGEN || undefined,
    pin: flag("BENCH_PIN", false),
    keySource: env.BENCH_KEY_SOURCE || "auto",
    schemaSql: env.BENCH_SCHEMA_SQL || undefined,
    aEnv: parseAEnv(env.BENCH_A_ENV),
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
const STORE_NAMES = { sqlite: "SQLite", pg: "PostgreSQL" }
/** On PostgreSQL, each server start gets this database, a fresh copy of the seed. */
const RUN_DB = benchDbName("run")

const serverDefs = (config, store) => {
  const node = process.execPath
  const plainEnv = cliEnv({ NODE_ENV: "production" })
  // B and C: the same server on the other store, from its own file.
  const floor = store === "pg" ? "bench/servers/floor-pg.mjs" : "bench/servers/floor.mjs"
  const fastify = store === "pg" ? "bench/servers/fastify-pg.mjs" : "bench/servers/fastify.mjs"
  const storeArgs = (dir) => (store === "pg" ? ["--database", dbUrl(RUN_DB)] : ["--db", join(dir, "taskwright.db")])
  // Taskwright limits each credential to 1000 requests a minute by default; the bench sends
  // that many in a tenth of a second. The limiter still runs (and costs what it costs), it
  // just never refuses. BENCH_A_ENV can override this.
  const aEnv = cliEnv({ NODE_ENV: "production", TASKWRIGHT_RATE_LIMIT: "1000000000", ...config.aEnv })
  // On PostgreSQL the data dir still holds agents.json and worktrees; the data is in RUN_DB.
  if (store === "pg") aEnv.DATABASE_URL = dbUrl(RUN_DB)
  return {
    A: {
      key: "A",
      name: NAMES.A,
      available: existsSync(CLI),
      skipReason: existsSync(CLI)
        ? null
        : `${relative(ROOT, CLI)} does not exist yet (build Taskwright with \`npm run build\`)`,
      argv: (port, dir) => [node, CLI, "serve", "--port", String(port), "--host", "127.0.0.1", "--data-dir", dir],
      env: aEnv
    },
    B: {
      key: "B",
      name: NAMES.B,
      available: true,
      argv: (port, dir) => [node, join(ROOT, floor), "--port", String(port), "--host", "127.0.0.1", ...storeArgs(dir)],
      env: plainEnv
    },
    C: {
      key: "C",
      name: NAMES.C,
      available: true,
      argv: (port, dir) => [
        node,
        join(ROOT, fastify),
        "--port",
        String(port),
        "--host",
        "127.0.0.1",
        ...storeArgs(dir)
      ],
      env: plainEnv
    }
  }
}

const log = (...args) => console.error(...args)

/** CPU seconds of the PostgreSQL backends serving RUN_DB, per pid (null on SQLite). */
const dbCpuSnapshot = async (ctx) => {
  if (ctx.store !== "pg") return null
  const pids = await backendPids(ctx.admin, RUN_DB)
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

/**
 * One server life: fresh copy of the seed, start (timed), idle RSS, checks, then for each
 * endpoint a warm-up and a measured run, then SIGTERM. Answers what was measured.
 */
const measureServer = async ({ def, seed, oracle, round, phase, endpoints, connections, durationS, warmupS, ctx }) => {
  const { config, loadgen } = ctx
  const pgStore = ctx.store === "pg"
  const dir = join(ctx.runDir, `${def.key}-${phase}-r${round}`)
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  if (pgStore) {
    // A fresh copy of the seeded database; its template has no connection open.
    await createDatabase(RUN_DB, { template: seed.database })
  } else {
    if (!walIsEmpty(seed.file)) throw new Error(`${seed.file}-wal has content: the seed is not a single file`)
    copyFileSync(seed.file, join(dir, "taskwright.db"))
  }
  const dropCopy = async () => {
    rmSync(dir, { recursive: true, force: true })
    if (!pgStore) return
    try {
      await dropDatabase(RUN_DB)
    } catch (e) {
      log(`  could not drop ${RUN_DB}: ${e.message} (dropped again at exit)`)
    }
  }
  const logFile = join(WORK, "logs", `${def.key}-${pgStore ? "pg-" : ""}${phase}-${seed.tasks}-r${round}.log`)
  rmSync(logFile, { force: true })
  const port = await freePort()
  let argv = def.argv(port, dir)
  if (config.pin) argv = ["taskset", "-c", "0", ...argv]
  const record = { phase, round, server: def.key, tasks: seed.tasks, port, logFile: relative(ROOT, logFile) }
  // Which build of Taskwright this was: a rebuild during the run makes its rounds incomparable.
  if (def.key === "A") record.build = existsSync(CLI) ? sha256Hex(readFileSync(CLI)).slice(0, 12) : null
  let started
  try {
    started = await startServer({ command: argv[0], args: argv.slice(1), env: def.env, cwd: ROOT, logFile, port })
  } catch (e) {
    record.error = `start failed: ${e.message}`
    log(`  ${def.name}: ${record.error}`)
    await dropCopy()
    return { record, measurements: [] }
  }
  record.startupMs = started.startupMs
  await sleep(500)
  record.idleRssMiB = memory(started.pid)?.rssMiB ?? null
  const measurements = []
  try {
    record.check = await checkServer({ port, secret: seed.secret, ids: seed.getIds, oracle })
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
    for (const endpoint of endpoints) {
      const common = {
        loadgen,
        port,
        endpoint,
        connections,
        threads: Math.min(config.threads, connections),
        secret: seed.secret,
        ids: seed.getIds,
        scriptDir: ctx.scriptDir,
        pinCpu: config.pin ? 1 : undefined
      }
      let warm = null
      if (warmupS > 0) warm = await runLoad({ ...common, seconds: warmupS })
      await sleep(250)
      const db0 = await dbCpuSnapshot(ctx)
      const cpu0 = cpuSeconds(started.pid)
      const r = await runLoad({ ...common, seconds: durationS })
      const cpu1 = cpuSeconds(started.pid)
      const db1 = await dbCpuSnapshot(ctx)
      const mem = memory(started.pid)
      const result = {
        ...r,
        serverCpuS: cpu0 === null || cpu1 === null ? null : cpu1 - cpu0,
        ...(pgStore ? { dbCpuS: dbCpuBetween(db0, db1) } : {}),
        rssMiB: mem?.rssMiB ?? null,
        peakRssMiB: mem?.peakRssMiB ?? null,
        warmup: warm ? { rps: warm.rps, non2xx: warm.non2xx, socketErrors: warm.socketErrors } : null
      }
      measurements.push({ phase, round, server: def.key, tasks: seed.tasks, endpoint, result })
      log(
        `  ${def.name.padEnd(13)} ${endpoint.padEnd(11)} ${String(Math.round(result.rps)).padStart(6)} req/s` +
          `  p50 ${result.p50Ms.toFixed(2)} ms  p99 ${result.p99Ms.toFixed(2)} ms  non-2xx ${result.non2xx}` +
          `${result.socketErrors ? ` sock-err ${result.socketErrors}` : ""}  cpu ${result.serverCpuS?.toFixed(2)} s` +
          `${pgStore ? `  db cpu ${result.dbCpuS?.toFixed(2)} s` : ""}` +
          `  loadgen ${result.loadgenCpuS?.toFixed(2)} s  rss ${result.rssMiB?.toFixed(0)} MiB`
      )
    }
  } catch (e) {
    record.error = `measurement failed: ${e.message}`
    log(`  ${def.name}: ${record.error}`)
  } finally {
    record.stop = await stopServer(started)
    if (!record.stop.clean) log(`  ${def.name}: did not shut down cleanly: ${JSON.stringify(record.stop)}`)
    await dropCopy()
  }
  return { record, measurements }
}

// ---------------------------------------------------------------------------------------------
// Main

/** The main or the large seed of one store, and the expected answers read from it. */
const seedStore = async (ctx, tasks, which) => {
  const { config } = ctx
  if (ctx.store === "pg") {
    log(`seeding ${tasks} tasks into PostgreSQL...`)
    const database = benchDbName(`seed_${tasks}`)
    const scratch = join(ctx.runDir, `cli-${database}`)
    const seed = await seedPg({ database, tasks, keySource: config.keySource, scratch, log })
    log(
      `  seeded ${seed.database} (${seed.seconds.toFixed(1)} s, rows in ${seed.loadSeconds.toFixed(1)} s, key: ${seed.keySource})`
    )
    const oracle = await makePgOracle(seed.url, seed.userId, seed.getIds)
    if (which === "main")
      log(`  ${seed.getIds.length} task ids for GET /api/tasks/:id (${oracle.withRuns} with agent runs)`)
    return { seed, oracle }
  }
  log(`seeding ${tasks} tasks...`)
  const seed = seedCached({
    dataDir: join(WORK, `seed-${tasks}`),
    tasks,
    schemaSql: config.schemaSql,
    keySource: config.keySource,
    log
  })
  const what = `${seed.cached ? "reused" : "seeded"} ${relative(ROOT, seed.file)} (${seed.seconds.toFixed(1)} s`
  log(`  ${what}${which === "main" ? `, key: ${seed.keySource})` : ")"}`)
  const oracle = makeOracle(seed.file, seed.userId, seed.getIds)
  if (which === "main")
    log(`  ${seed.getIds.length} task ids for GET /api/tasks/:id (${oracle.withRuns} with agent runs)`)
  return { seed, oracle }
}

/** The whole bench on one store: seeds, rounds, the large phase, the report. */
const runStore = async (store, base) => {
  const t0 = performance.now()
  const { config, loadgen } = base
  const ctx = { ...base, store, admin: null }
  const pgStore = store === "pg"
  const defs = serverDefs(config, store)
  const active = config.servers
    .map((k) => defs[k])
    .filter((d) => {
      if (!d.available) log(`SKIPPING ${d.name}: ${d.skipReason}`)
      return d.available
    })
  if (active.length === 0) throw new Error("no server to measure")
  const loadStart = os.loadavg()
  log(
    `bench${pgStore ? " on PostgreSQL" : ""}: ${active.map((d) => d.name).join(", ")} | ${loadgen.tool} ${loadgen.version} | ${config.connections} connections` +
      ` | ${config.rounds} rounds × (${config.warmupS} s warm-up + ${config.durationS} s) per endpoint` +
      `${config.large ? ` | large: ${config.largeTasks} tasks, 1 connection` : ""}`
  )
  if (loadgen.tool === "autocannon") {
    log(
      "note: using autocannon; it (Node) shares the 2 cores and can flatten the ratios; wrk is lighter (apt-get install -y wrk)"
    )
  }
  if (loadStart[0] > 0.7)
    log(`note: load average is ${loadStart[0].toFixed(2)} before the run; other work will add noise`)

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
    const { seed, oracle } = await seedStore(ctx, config.tasks, "main")

    const records = []
    const measurements = []
    for (let round = 1; round <= config.rounds; round++) {
      log(`round ${round}/${config.rounds}`)
      for (const def of active) {
        const r = await measureServer({
          def,
          seed,
          oracle,
          round,
          phase: "main",
          endpoints: config.endpoints,
          connections: config.connections,
          durationS: config.durationS,
          warmupS: config.warmupS,
          ctx
        })
        records.push(r.record)
        measurements.push(...r.measurements)
      }
    }

    let largeSeed = null
    if (config.large) {
      const large = await seedStore(ctx, config.largeTasks, "large")
      largeSeed = large.seed
      const largeOracle = large.oracle
      for (let round = 1; round <= config.rounds; round++) {
        for (const [s, o] of [
          [seed, oracle],
          [largeSeed, largeOracle]
        ]) {
          log(`large round ${round}/${config.rounds}: GET /api/tasks at ${s.tasks} tasks, 1 connection`)
          for (const def of active) {
            const r = await measureServer({
              def,
              seed: s,
              oracle: o,
              round,
              phase: "large",
              endpoints: ["list_tasks"],
              connections: 1,
              durationS: config.largeDurationS,
              warmupS: config.largeWarmupS,
              ctx
            })
            records.push(r.record)
            measurements.push(...r.measurements)
          }
        }
      }
    }

    // -----------------------------------------------------------------------------------------
    // Report

    const keys = active.map((d) => d.key)
    const main = summarise(measurements, keys, { phase: "main", tasks: seed.tasks, endpoints: config.endpoints })
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
            idleRssMiB: r.idleRssMiB,
            stop: r.stop,
            error: r.error
          }))
      ])
    )
    let large = null
    if (largeSeed) {
      large = {
        small: summarise(measurements, keys, { phase: "large", tasks: seed.tasks, endpoints: ["list_tasks"] })
          .list_tasks,
        large: summarise(measurements, keys, { phase: "large", tasks: largeSeed.tasks, endpoints: ["list_tasks"] })
          .list_tasks
      }
    }

    const when = new Date().toISOString()
    const cpu = os.cpus()
    const md = []
    md.push(`## Taskwright bench${pgStore ? " on PostgreSQL" : ""} — ${when}`)
    md.push("")
    md.push(
      `${cpu.length} × ${cpu[0]?.model ?? "cpu"}, Node ${process.version}, ${loadgen.tool} ${loadgen.version}` +
        ` (${config.threads} thread${config.threads > 1 ? "s" : ""}), ${config.connections} connections,` +
        ` ${config.rounds} rounds of ${config.warmupS} s warm-up + ${config.durationS} s per endpoint,` +
        ` ${seed.tasks.toLocaleString("en-US")} tasks${config.pin ? ", server pinned to CPU 0, load generator to CPU 1" : ""}.`
    )
    if (pgStore) {
      md.push(
        `Rounds alternate ${keys.join(" ")} ${keys.join(" ")}…; each server start gets a fresh copy of the same seeded database` +
          ` (\`CREATE DATABASE … TEMPLATE\`) on PostgreSQL ${pgVersion} at 127.0.0.1, and every server a \`pg\` pool of ${PG_POOL_MAX}` +
          " connections running named prepared statements." +
          " Ratios are req/s over Fastify's (C) and the floor's (B) in the same round; the mean row's ratio is the mean of the rounds' ratios." +
          " **Server CPU** is the Node process's; **DB CPU** is the PostgreSQL backends' serving its database (it shares the same 2 cores)."
      )
      if (keys.includes("A") && config.aEnv.TASKWRIGHT_RATE_LIMIT_STORE === undefined) {
        md.push(
          "\nTaskwright runs with its PostgreSQL defaults, so its rate-limit counters live in the database" +
            " (`TASKWRIGHT_RATE_LIMIT_STORE=database`, shared by every process): writes on the request path that B and C do not have;" +
            " `BENCH_A_ENV=TASKWRIGHT_RATE_LIMIT_STORE=memory` measures it with in-process counters as on SQLite."
        )
      }
    } else {
      md.push(
        `Rounds alternate ${keys.join(" ")} ${keys.join(" ")}…; each server start gets a fresh copy of the same seeded file.` +
          " Ratios are req/s over Fastify's (C) and the floor's (B) in the same round; the mean row's ratio is the mean of the rounds' ratios."
      )
    }
    for (const d of Object.values(defs))
      if (!d.available && config.servers.includes(d.key)) md.push(`\n**${d.name} skipped:** ${d.skipReason}.`)
    if (Object.keys(checkFailed).length > 0) {
      md.push(
        `\n**⚠ Check failed for ${Object.keys(checkFailed)
          .map((k) => NAMES[k])
          .join(", ")}**: its figures are not comparable (see \`check\` in the JSON).`
      )
    }
    const orderNotes = {}
    for (const r of records) if (r.check?.orderWarnings > 0) orderNotes[r.server] ??= r.check.warnings[0]
    for (const [k, w] of Object.entries(orderNotes)) {
      md.push(`\nNote: ${NAMES[k]} answers the right values with the keys in another order (${w.what}: ${w.why}).`)
    }
    const tableOpts = { db: pgStore }
    md.push("")
    md.push(throughputTables(main, NAMES, checkFailed, tableOpts))
    md.push("")
    md.push("### Start-up (spawn → first 200 from /api/health) and idle RSS")
    md.push("")
    md.push(startupTable(starts, NAMES))
    if (large) {
      md.push("")
      md.push(
        `### GET /api/tasks?status=todo&limit=50&offset=0, single client (1 connection), ${seed.tasks.toLocaleString("en-US")} vs ${largeSeed.tasks.toLocaleString("en-US")} tasks`
      )
      md.push("")
      md.push(
        largeTable(
          large.small,
          large.large,
          NAMES,
          {
            small: seed.tasks.toLocaleString("en-US"),
            large: largeSeed.tasks.toLocaleString("en-US")
          },
          largeCheckFailed,
          tableOpts
        )
      )
      if (Object.keys(largeCheckFailed).length > 0) {
        md.push(`\n⚠ marks a server whose check failed in this phase (see \`check\` in the JSON).`)
      }
    }
    const builds = [...new Set(records.filter((r) => r.server === "A").map((r) => r.build ?? "missing"))]
    if (builds.length > 1) {
      md.push("")
      md.push(
        `**⚠ Taskwright was rebuilt during the run** (builds ${builds.join(", ")}): its rounds measured different code.` +
          " Run the bench when no build is going on."
      )
    }
    const problems = records.filter((r) => r.error || (r.stop && !r.stop.clean))
    if (problems.length > 0) {
      md.push("")
      md.push("### Problems")
      md.push("")
      for (const r of problems) {
        const what = r.error ?? `unclean shutdown ${JSON.stringify(r.stop)}`
        md.push(`- ${NAMES[r.server]}, ${r.phase} round ${r.round} (${r.tasks} tasks): ${what} (log: ${r.logFile})`)
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
      const { secret, getIds, file, dataDir, url, ...rest } = s
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
      machine: {
        cpus: cpu.length,
        cpuModel: cpu[0]?.model,
        memoryGiB: os.totalmem() / 2 ** 30,
        node: process.version,
        platform: `${os.platform()} ${os.release()}`,
        loadavgBefore: loadStart,
        loadavgAfter: os.loadavg()
      },
      ...(pgStore ? { postgres: { version: pgVersion, server: PG_BASE_URL, poolMax: PG_POOL_MAX } } : {}),
      loadgen,
      seed: { main: { ...publicSeed(seed), getIdsWithRuns: oracle.withRuns }, large: publicSeed(largeSeed) },
      servers: Object.fromEntries(
        Object.values(defs).map((d) => [
          d.key,
          { name: d.name, measured: keys.includes(d.key), skipReason: d.available ? null : d.skipReason }
        ])
      ),
      summary: { main, large, startup: starts },
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

  try {
    const outputs = []
    for (const store of config.stores) {
      if (config.stores.length > 1) log(`\n=== ${STORE_NAMES[store]} ===`)
      try {
        outputs.push({ store, ...(await runStore(store, { config, loadgen, scriptDir, runDir })) })
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
