#!/usr/bin/env node
/**
 * `npm run bench`: Taskwright (A), the floor (B, node:http + better-sqlite3) and the peer
 * (C, Fastify 5) doing the same work, measured side by side on this machine in alternating
 * rounds A B C A B C. See bench/README.md for the knobs and what every column means.
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import os from "node:os"
import { join, relative } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { checkServer, makeOracle } from "./lib/check.mjs"
import { chooseLoadgen, ENDPOINTS, runLoad } from "./lib/loadgen.mjs"
import { cpuSeconds, freePort, killAll, memory, startServer, stopServer } from "./lib/proc.mjs"
import { largeTable, startupTable, summarise, throughputTables } from "./lib/report.mjs"
import { CLI, cliEnv, ROOT, seedCached, sha256Hex, walIsEmpty } from "./seed.mjs"

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

const readConfig = () => {
  const quick = flag("BENCH_QUICK", false)
  const config = {
    quick,
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

const serverDefs = (config) => {
  const node = process.execPath
  const plainEnv = cliEnv({ NODE_ENV: "production" })
  return {
    A: {
      key: "A",
      name: NAMES.A,
      available: existsSync(CLI),
      skipReason: existsSync(CLI)
        ? null
        : `${relative(ROOT, CLI)} does not exist yet (build Taskwright with \`npm run build\`)`,
      argv: (port, dir) => [node, CLI, "serve", "--port", String(port), "--host", "127.0.0.1", "--data-dir", dir],
      // Taskwright limits each credential to 1000 requests a minute by default; the bench sends
      // that many in a tenth of a second. The limiter still runs (and costs what it costs), it
      // just never refuses. BENCH_A_ENV can override this.
      env: cliEnv({ NODE_ENV: "production", TASKWRIGHT_RATE_LIMIT: "1000000000", ...config.aEnv })
    },
    B: {
      key: "B",
      name: NAMES.B,
      available: true,
      argv: (port, dir) => [
        node,
        join(ROOT, "bench/servers/floor.mjs"),
        "--port",
        String(port),
        "--host",
        "127.0.0.1",
        "--db",
        join(dir, "taskwright.db")
      ],
      env: plainEnv
    },
    C: {
      key: "C",
      name: NAMES.C,
      available: true,
      argv: (port, dir) => [
        node,
        join(ROOT, "bench/servers/fastify.mjs"),
        "--port",
        String(port),
        "--host",
        "127.0.0.1",
        "--db",
        join(dir, "taskwright.db")
      ],
      env: plainEnv
    }
  }
}

const log = (...args) => console.error(...args)

/**
 * One server life: fresh copy of the seed, start (timed), idle RSS, checks, then for each
 * endpoint a warm-up and a measured run, then SIGTERM. Answers what was measured.
 */
const measureServer = async ({ def, seed, oracle, round, phase, endpoints, connections, durationS, warmupS, ctx }) => {
  const { config, loadgen } = ctx
  const dir = join(ctx.runDir, `${def.key}-${phase}-r${round}`)
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  if (!walIsEmpty(seed.file)) throw new Error(`${seed.file}-wal has content: the seed is not a single file`)
  copyFileSync(seed.file, join(dir, "taskwright.db"))
  const logFile = join(WORK, "logs", `${def.key}-${phase}-${seed.tasks}-r${round}.log`)
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
    rmSync(dir, { recursive: true, force: true })
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
      const cpu0 = cpuSeconds(started.pid)
      const r = await runLoad({ ...common, seconds: durationS })
      const cpu1 = cpuSeconds(started.pid)
      const mem = memory(started.pid)
      const result = {
        ...r,
        serverCpuS: cpu0 === null || cpu1 === null ? null : cpu1 - cpu0,
        rssMiB: mem?.rssMiB ?? null,
        peakRssMiB: mem?.peakRssMiB ?? null,
        warmup: warm ? { rps: warm.rps, non2xx: warm.non2xx, socketErrors: warm.socketErrors } : null
      }
      measurements.push({ phase, round, server: def.key, tasks: seed.tasks, endpoint, result })
      log(
        `  ${def.name.padEnd(13)} ${endpoint.padEnd(11)} ${String(Math.round(result.rps)).padStart(6)} req/s` +
          `  p50 ${result.p50Ms.toFixed(2)} ms  p99 ${result.p99Ms.toFixed(2)} ms  non-2xx ${result.non2xx}` +
          `${result.socketErrors ? ` sock-err ${result.socketErrors}` : ""}  cpu ${result.serverCpuS?.toFixed(2)} s` +
          `  loadgen ${result.loadgenCpuS?.toFixed(2)} s  rss ${result.rssMiB?.toFixed(0)} MiB`
      )
    }
  } catch (e) {
    record.error = `measurement failed: ${e.message}`
    log(`  ${def.name}: ${record.error}`)
  } finally {
    record.stop = await stopServer(started)
    if (!record.stop.clean) log(`  ${def.name}: did not shut down cleanly: ${JSON.stringify(record.stop)}`)
    rmSync(dir, { recursive: true, force: true })
  }
  return { record, measurements }
}

// ---------------------------------------------------------------------------------------------
// Main

const main = async () => {
  const t0 = performance.now()
  const config = readConfig()
  const loadgen = chooseLoadgen(config.loadgen)
  const defs = serverDefs(config)
  const active = config.servers
    .map((k) => defs[k])
    .filter((d) => {
      if (!d.available) log(`SKIPPING ${d.name}: ${d.skipReason}`)
      return d.available
    })
  if (active.length === 0) throw new Error("no server to measure")
  const loadStart = os.loadavg()
  log(
    `bench: ${active.map((d) => d.name).join(", ")} | ${loadgen.tool} ${loadgen.version} | ${config.connections} connections` +
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

  mkdirSync(join(WORK, "logs"), { recursive: true })
  const scriptDir = join(WORK, `scripts-${process.pid}`)
  mkdirSync(scriptDir, { recursive: true })
  const ctx = { config, loadgen, scriptDir }
  // Per-process directories, so a second runner (or an interrupted one) cannot trip this one.
  const runDir = join(WORK, `run-${process.pid}`)
  ctx.runDir = runDir
  const cleanup = () => {
    rmSync(scriptDir, { recursive: true, force: true })
    rmSync(runDir, { recursive: true, force: true })
  }
  const interrupt = (sig) => {
    log(`\n${sig}: stopping every server and load generator`)
    killAll()
    cleanup()
    process.exit(130)
  }
  process.on("SIGINT", () => interrupt("SIGINT"))
  process.on("SIGTERM", () => interrupt("SIGTERM"))

  try {
    const seedOpts = { schemaSql: config.schemaSql, keySource: config.keySource, log }
    log(`seeding ${config.tasks} tasks...`)
    const seed = seedCached({ dataDir: join(WORK, `seed-${config.tasks}`), tasks: config.tasks, ...seedOpts })
    log(
      `  ${seed.cached ? "reused" : "seeded"} ${relative(ROOT, seed.file)} (${seed.seconds.toFixed(1)} s, key: ${seed.keySource})`
    )
    const oracle = makeOracle(seed.file, seed.userId, seed.getIds)
    log(`  ${seed.getIds.length} task ids for GET /api/tasks/:id (${oracle.withRuns} with agent runs)`)

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
      log(`seeding ${config.largeTasks} tasks...`)
      largeSeed = seedCached({
        dataDir: join(WORK, `seed-${config.largeTasks}`),
        tasks: config.largeTasks,
        ...seedOpts
      })
      log(
        `  ${largeSeed.cached ? "reused" : "seeded"} ${relative(ROOT, largeSeed.file)} (${largeSeed.seconds.toFixed(1)} s)`
      )
      const largeOracle = makeOracle(largeSeed.file, largeSeed.userId, largeSeed.getIds)
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
    md.push(`## Taskwright bench — ${when}`)
    md.push("")
    md.push(
      `${cpu.length} × ${cpu[0]?.model ?? "cpu"}, Node ${process.version}, ${loadgen.tool} ${loadgen.version}` +
        ` (${config.threads} thread${config.threads > 1 ? "s" : ""}), ${config.connections} connections,` +
        ` ${config.rounds} rounds of ${config.warmupS} s warm-up + ${config.durationS} s per endpoint,` +
        ` ${seed.tasks.toLocaleString("en-US")} tasks${config.pin ? ", server pinned to CPU 0, load generator to CPU 1" : ""}.`
    )
    md.push(
      `Rounds alternate ${keys.join(" ")} ${keys.join(" ")}…; each server start gets a fresh copy of the same seeded file.` +
        " Ratios are req/s over Fastify's (C) and the floor's (B) in the same round; the mean row's ratio is the mean of the rounds' ratios."
    )
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
    md.push("")
    md.push(throughputTables(main, NAMES, checkFailed))
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
          largeCheckFailed
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
      const { secret, getIds, file, dataDir, ...rest } = s
      return { ...rest, file: relative(ROOT, file), keyPrefix: secret.slice(0, 12), getIdCount: getIds.length }
    }
    const results = {
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
    mkdirSync(join(config.out, ".."), { recursive: true })
    writeFileSync(config.out, `${JSON.stringify(results, null, 2)}\n`)
    process.stdout.write(`${markdown}\n`)
    log(`\nresults: ${relative(ROOT, config.out)}`)
    const unclean = records.filter((r) => r.stop && !r.stop.clean)
    if (unclean.length > 0) process.exitCode = 1
  } finally {
    cleanup()
  }
}

main().catch((e) => {
  console.error(`bench failed: ${env.BENCH_DEBUG ? (e?.stack ?? e) : (e?.message ?? e)}`)
  killAll()
  process.exit(1)
})
