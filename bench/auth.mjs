#!/usr/bin/env node
/**
 * `node bench/auth.mjs` (part of `npm run bench`): what authentication and rate limiting cost
 * per request, and how many requests a second `/api/auth/verify` sustains.
 *
 * The same endpoint (GET /api/tasks/:id, one indexed row) is measured
 *   - on the built server (`node packages/cli/dist/main.js serve`) with an API key, a session
 *     cookie and an access token (JWT): authentication + rate limiting + usage counting;
 *   - on the same server code with its request Gate replaced by a pre-authenticated fast path
 *     (a fixed admission: no credential check, no rate limiting): the baseline;
 *   - on the same server code with a Gate that authenticates the API key but does not rate-limit:
 *     the difference to the full Gate is the cost of rate limiting.
 * The two stand-in servers are this script's own (bundled from the workspace sources like the
 * CLI); the product has no switch that skips authentication.
 *
 * And what a refusal costs, the price of a flood: a forged access token and an unknown session
 * cookie on the real server (401: the credential fails, the anonymous budget is not spent), and
 * on a second real server whose budgets are one request a minute (429), an API key past its
 * budget, no credential, a forged token and an unknown session cookie past the address's budget.
 *
 * Reported per variant and round: requests/s, p50/p99 latency, answers whose status is not the
 * variant's, and the server's CPU time per request (from /proc), with ratios against the
 * baseline. Rounds alternate the variants. Also: the in-memory limiter's cost per call, measured in process.
 *
 * Knobs: BENCH_AUTH_ROUNDS (2), BENCH_AUTH_DURATION (s, 5), BENCH_AUTH_WARMUP (s, 1),
 * BENCH_AUTH_CONNECTIONS (50), BENCH_SKIP_BUILD=1, BENCH_AUTH_OUT (JSON results file),
 * BENCH_AUTH_DATABASE_URL (an empty PostgreSQL database: every server runs on it, and the rate
 * limits then live in the database, shared as they would be between processes).
 */
import { execFileSync, spawn, spawnSync } from "node:child_process"
import { createHmac, randomBytes } from "node:crypto"
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { dirname, join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { fileURLToPath, pathToFileURL } from "node:url"

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..")
const env = process.env
const num = (name, fallback) => (env[name] ? Number(env[name]) : fallback)
const config = {
  rounds: num("BENCH_AUTH_ROUNDS", 2),
  duration: num("BENCH_AUTH_DURATION", 5),
  warmup: num("BENCH_AUTH_WARMUP", 1),
  connections: num("BENCH_AUTH_CONNECTIONS", 50),
  out: env.BENCH_AUTH_OUT || join(ROOT, "bench/results/auth.json")
}
const WORK = join(ROOT, "bench/.work", `auth-${process.pid}`)
const DATA = join(WORK, "data")
const CLI = join(ROOT, "packages/cli/dist/main.js")
const JWT_SECRET = "bench-auth-secret-bench-auth-secret-0123456789"
const DATABASE = env.BENCH_AUTH_DATABASE_URL ? { DATABASE_URL: env.BENCH_AUTH_DATABASE_URL } : {}
const children = new Set()

const log = (line) => process.stderr.write(`${line}\n`)

const freePort = () =>
  new Promise((resolve, reject) => {
    const srv = createServer()
    srv.on("error", reject)
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })

const cpuSeconds = (pid) => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return (Number(fields[11]) + Number(fields[12])) / 100
}

/** Starts a server process and waits until /api/health answers 200. */
const startServer = async (name, args, extraEnv, port) => {
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: {
      PATH: env.PATH,
      TASKWRIGHT_JWT_SECRET: JWT_SECRET,
      TASKWRIGHT_RATE_LIMIT: "1000000000",
      TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "1000000000",
      ...DATABASE,
      ...extraEnv
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.add(child)
  let output = ""
  child.stdout.on("data", (c) => {
    output += c
  })
  child.stderr.on("data", (c) => {
    output += c
  })
  child.on("exit", () => children.delete(child))
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) throw new Error(`${name} exited:\n${output}`)
    try {
      const r = await fetch(`${url}/api/health`)
      if (r.status === 200) return { name, url, pid: child.pid, child, output: () => output }
    } catch {}
    await sleep(100)
  }
  throw new Error(`${name} did not start:\n${output}`)
}

const stopAll = () => {
  for (const child of children) child.kill("SIGTERM")
}
process.on("exit", stopAll)
process.on("SIGINT", () => process.exit(130))

/** The stand-in server: the workspace's server code with the Gate swapped (PREAUTH_MODE). */
const STANDIN = `
import { createServer } from "node:http"
import { Auth, Gate, makeEngineRuntime, settingsFromEnv } from "@taskwright/core"
import { makeRequestListener, VERSION } from "@taskwright/server"
import { Context, Effect, Runtime } from "effect"

const [dataDir, port, userId, keyId, scopes] = process.argv.slice(2)
const managed = makeEngineRuntime(settingsFromEnv(process.env, { dataDir }), { log: "silent" })
const base = await managed.runtime()
const auth = Context.get(base.context, Auth)
const rate = { allowed: true, limit: 1000, remaining: 999, reset: Math.ceil(Date.now() / 1000) + 60, retryAfter: 60 }
const actor = {
  userId,
  scopes: new Set(scopes.split(",")),
  credential: { kind: "api_key", id: keyId, expiresAt: null, keyId }
}
const fixed = Effect.succeed({ actor, rate, refusal: undefined })
const gate =
  process.env.PREAUTH_MODE === "fixed"
    ? { admitNow: () => undefined, admit: () => fixed }
    : {
        admitNow: () => undefined,
        admit: (request) =>
          Effect.match(
            auth.authenticateRequest({ authorization: request.header("authorization"), cookie: request.header("cookie") }),
            {
              onFailure: (error) => ({ actor: undefined, rate, refusal: error }),
              onSuccess: (actor) => ({ actor, rate, refusal: undefined })
            }
          )
      }
const runtime = Runtime.make({
  context: Context.add(base.context, Gate, gate),
  fiberRefs: base.fiberRefs,
  runtimeFlags: base.runtimeFlags
})
const listener = makeRequestListener(runtime, { version: VERSION, documents: [] })
createServer({ keepAliveTimeout: 5000 }, listener).listen(Number(port), "127.0.0.1")
process.on("SIGTERM", () => managed.dispose().then(() => process.exit(0)))
`

/** Bundles the stand-in like tsup bundles the CLI: workspace packages inlined, npm packages external. */
const bundleStandIn = async () => {
  const esbuild = await import("esbuild")
  const entry = join(WORK, "standin-entry.mjs")
  const outfile = join(ROOT, "node_modules/.cache/taskwright-bench", `standin-${process.pid}.mjs`)
  mkdirSync(dirname(outfile), { recursive: true })
  writeFileSync(entry, STANDIN)
  await esbuild.build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    conditions: ["@taskwright/source"],
    logLevel: "error",
    absWorkingDir: ROOT,
    nodePaths: [join(ROOT, "node_modules")],
    plugins: [
      {
        name: "external-npm",
        setup(build) {
          build.onResolve({ filter: /^[^./]/ }, (args) =>
            args.path.startsWith("@taskwright/") ? undefined : { path: args.path, external: true }
          )
        }
      }
    ]
  })
  process.on("exit", () => rmSync(outfile, { force: true }))
  return outfile
}

// ---------------------------------------------------------------------------------------------
// Load

const WRK = spawnSync("bash", ["-c", "command -v wrk"], { encoding: "utf8" }).stdout.trim() || null

const parseMs = (text) => {
  const m = /([\d.]+)(us|ms|s)/.exec(text)
  if (!m) return Number.NaN
  const v = Number(m[1])
  return m[2] === "us" ? v / 1000 : m[2] === "s" ? v * 1000 : v
}

/** Runs wrk (or autocannon) against `url` with `headers`; answers rps, latencies and non-2xx. */
const load = async (url, headers, seconds) => {
  if (WRK !== null) {
    const args = ["-t1", `-c${config.connections}`, `-d${seconds}s`, "--latency"]
    for (const [k, v] of Object.entries(headers)) args.push("-H", `${k}: ${v}`)
    args.push(url)
    const out = await new Promise((resolve, reject) => {
      const child = spawn(WRK, args, { stdio: ["ignore", "pipe", "pipe"] })
      let text = ""
      child.stdout.on("data", (c) => {
        text += c
      })
      child.on("error", reject)
      child.on("exit", () => resolve(text))
    })
    const requests = Number(/(\d+) requests in/.exec(out)?.[1] ?? 0)
    return {
      rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? 0),
      requests,
      p50: parseMs(/\s50%\s+(\S+)/.exec(out)?.[1] ?? ""),
      p99: parseMs(/\s99%\s+(\S+)/.exec(out)?.[1] ?? ""),
      non2xx: Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0)
    }
  }
  const autocannon = (await import("autocannon")).default
  const r = await autocannon({ url, headers, connections: config.connections, duration: seconds })
  return {
    rps: r.requests.average,
    requests: r.requests.total,
    p50: r.latency.p50,
    p99: r.latency.p99,
    non2xx: r.non2xx
  }
}

// ---------------------------------------------------------------------------------------------
// The in-memory limiter on its own

const microbench = async () => {
  const core = await import(pathToFileURL(join(ROOT, "packages/core/dist/index.js")).href)
  // The in-memory store is not public API: it is in the package's internal entry.
  const { MemoryRateLimitStore } = await import(pathToFileURL(join(ROOT, "packages/core/dist/internal.js")).href)
  const { Effect, Layer, ManagedRuntime } = await import("effect")
  const store = MemoryRateLimitStore.make()
  const N = 1_000_000
  const windowStart = Date.now() - (Date.now() % 60_000)
  let t0 = process.hrtime.bigint()
  for (let i = 0; i < N; i++) store.hitSync(`k:${i & 1023}`, windowStart, 60_000)
  const hitNs = Number(process.hrtime.bigint() - t0) / N
  const runtime = ManagedRuntime.make(
    core.RateLimiter.Default.pipe(
      Layer.provide(MemoryRateLimitStore.layer),
      Layer.provide(core.TaskwrightConfig.layer(core.settingsFromEnv({}, { databaseUrl: ":memory:" })))
    )
  )
  const limiter = await runtime.runPromise(core.RateLimiter)
  const policy = limiter.policies.authenticated
  t0 = process.hrtime.bigint()
  for (let i = 0; i < N; i++) Effect.runSync(limiter.consume(policy, `k:${i & 1023}`))
  const consumeNs = Number(process.hrtime.bigint() - t0) / N
  await runtime.dispose()
  return { store_hit_ns: Math.round(hitNs), limiter_consume_run_sync_ns: Math.round(consumeNs) }
}

// ---------------------------------------------------------------------------------------------

const main = async () => {
  if (env.BENCH_SKIP_BUILD !== "1") {
    log("building (npm run build)…")
    execFileSync("npm", ["run", "build"], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] })
  }
  rmSync(WORK, { recursive: true, force: true })
  mkdirSync(DATA, { recursive: true })
  process.on("exit", () => rmSync(WORK, { recursive: true, force: true }))

  // The real server, and the credentials it hands out.
  const cliPort = await freePort()
  const real = await startServer(
    "taskwright",
    [CLI, "serve", "--port", String(cliPort), "--data-dir", DATA],
    {},
    cliPort
  )
  const api = async (method, path, headers = {}, body) => {
    const r = await fetch(`${real.url}${path}`, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const text = await r.text()
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${text}`)
    return { json: text === "" ? undefined : JSON.parse(text), headers: r.headers }
  }
  const bearer = (t) => ({ authorization: `Bearer ${t}` })
  // One user, one task: every variant reads the same row as the same user, with its own credential.
  const password = "bench-password-123"
  execFileSync(
    process.execPath,
    [
      CLI,
      "users",
      "create",
      "--data-dir",
      DATA,
      "--email",
      "bench@example.test",
      "--name",
      "Bench",
      "--password",
      password
    ],
    { cwd: ROOT, stdio: "ignore", env: { PATH: env.PATH, ...DATABASE } }
  )
  const session = (await api("POST", "/api/auth/login", {}, { email: "bench@example.test", password })).json.session
    .token
  const cookie = { cookie: `service_session=${session}` }
  const browser = { ...cookie, origin: real.url }
  const key = (await api("POST", "/api/keys", browser, { name: "bench", scopes: ["tasks:read", "tasks:write"] })).json
  const taskId = (await api("POST", "/api/tasks", bearer(key.secret), { title: "bench" })).json.id
  const jwt = (await api("POST", "/api/auth/token", {}, { api_key: key.secret })).json.access_token
  const me = (await api("GET", "/api/auth/me", bearer(key.secret))).json
  // The stand-ins on the same data.
  const standIn = await bundleStandIn()
  const fixedPort = await freePort()
  const fixed = await startServer(
    "pre-authenticated",
    [standIn, DATA, String(fixedPort), me.user.id, me.credential.id, me.scopes.join(",")],
    { PREAUTH_MODE: "fixed" },
    fixedPort
  )
  const authOnlyPort = await freePort()
  const authOnly = await startServer(
    "key, no rate limiting",
    [standIn, DATA, String(authOnlyPort), me.user.id, me.credential.id, me.scopes.join(",")],
    { PREAUTH_MODE: "auth-only" },
    authOnlyPort
  )

  // The same data behind budgets of one request a minute: every request past the first is refused.
  const limitedPort = await freePort()
  const limited = await startServer(
    "taskwright, budgets of 1",
    [CLI, "serve", "--port", String(limitedPort), "--data-dir", DATA],
    { TASKWRIGHT_RATE_LIMIT: "1", TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "1" },
    limitedPort
  )
  // Signed with another secret; and a session token no one was given.
  const [head, body] = jwt.split(".")
  const forged = `${head}.${body}.${createHmac("sha256", `${JWT_SECRET}!`).update(`${head}.${body}`).digest("base64url")}`
  const strangerCookie = { cookie: `service_session=${randomBytes(32).toString("base64url")}` }

  const task = `/api/tasks/${taskId}`
  const variants = [
    { name: "pre-authenticated (baseline)", server: fixed, path: task, headers: {} },
    { name: "API key, no rate limiting", server: authOnly, path: task, headers: bearer(key.secret) },
    { name: "API key", server: real, path: task, headers: bearer(key.secret) },
    { name: "session cookie", server: real, path: task, headers: cookie },
    { name: "access token (JWT)", server: real, path: task, headers: bearer(jwt) },
    { name: "verify, API key", server: real, path: "/api/auth/verify", headers: bearer(key.secret) },
    { name: "verify, session cookie", server: real, path: "/api/auth/verify", headers: cookie },
    { name: "verify, JWT", server: real, path: "/api/auth/verify", headers: bearer(jwt) },
    { name: "refused: forged JWT", server: real, path: task, headers: bearer(forged), expect: 401 },
    { name: "refused: unknown session", server: real, path: task, headers: strangerCookie, expect: 401 },
    { name: "refused: key past budget", server: limited, path: task, headers: bearer(key.secret), expect: 429 },
    { name: "refused: no credential", server: limited, path: task, headers: {}, expect: 429 },
    { name: "refused: forged JWT, 429", server: limited, path: task, headers: bearer(forged), expect: 429 },
    { name: "refused: unknown session, 429", server: limited, path: task, headers: strangerCookie, expect: 429 }
  ]
  for (const v of variants) {
    // Twice: the first request of a budget of one is admitted.
    for (let i = 0; i < 2; i++) {
      const r = await fetch(`${v.server.url}${v.path}`, { headers: v.headers })
      const text = await r.text()
      if (i === 1 && r.status !== (v.expect ?? 200)) throw new Error(`${v.name}: ${r.status} ${text}`)
    }
  }

  log(`load generator: ${WRK ?? "autocannon"}, ${config.connections} connections, ${config.duration} s per run`)
  const results = variants.map((v) => ({ name: v.name, rounds: [] }))
  for (let round = 1; round <= config.rounds; round++) {
    for (const [i, v] of variants.entries()) {
      await load(`${v.server.url}${v.path}`, v.headers, config.warmup)
      const cpu0 = cpuSeconds(v.server.pid)
      const r = await load(`${v.server.url}${v.path}`, v.headers, config.duration)
      const cpu = cpuSeconds(v.server.pid) - cpu0
      // Answers other than the variant's own status (wrk counts the non-2xx).
      const unexpected = (v.expect ?? 200) === 200 ? r.non2xx : r.requests - r.non2xx
      const row = { ...r, unexpected, cpu_us_per_request: r.requests > 0 ? (cpu * 1e6) / r.requests : Number.NaN }
      results[i].rounds.push(row)
      log(
        `round ${round}  ${v.name.padEnd(30)} ${row.rps.toFixed(0).padStart(7)} req/s  p50 ${row.p50.toFixed(2)} ms  p99 ${row.p99.toFixed(2)} ms  cpu ${row.cpu_us_per_request.toFixed(1)} µs/req  other statuses ${row.unexpected}`
      )
    }
  }

  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length
  const base = results[0]
  const summary = results.map((r) => {
    const ratioRps = r.rounds.map((x, i) => x.rps / base.rounds[i].rps)
    const ratioCpu = r.rounds.map((x, i) => x.cpu_us_per_request / base.rounds[i].cpu_us_per_request)
    return {
      variant: r.name,
      rps: mean(r.rounds.map((x) => x.rps)),
      p50_ms: mean(r.rounds.map((x) => x.p50)),
      p99_ms: mean(r.rounds.map((x) => x.p99)),
      cpu_us_per_request: mean(r.rounds.map((x) => x.cpu_us_per_request)),
      unexpected: r.rounds.reduce((a, x) => a + x.unexpected, 0),
      rps_vs_baseline: mean(ratioRps),
      rps_vs_baseline_per_round: ratioRps,
      cpu_vs_baseline: mean(ratioCpu),
      added_cpu_us: mean(r.rounds.map((x, i) => x.cpu_us_per_request - base.rounds[i].cpu_us_per_request))
    }
  })
  const micro = await microbench()

  const line = (s) =>
    `| ${s.variant.padEnd(30)} | ${s.rps.toFixed(0).padStart(7)} | ${s.p50_ms.toFixed(2).padStart(6)} | ${s.p99_ms.toFixed(2).padStart(6)} | ${s.cpu_us_per_request.toFixed(1).padStart(6)} | ${s.added_cpu_us.toFixed(1).padStart(7)} | ${s.rps_vs_baseline.toFixed(2).padStart(5)} (${s.rps_vs_baseline_per_round.map((x) => x.toFixed(2)).join(", ")}) | ${String(s.unexpected).padStart(5)} |`
  console.log(
    [
      `Authentication and rate limiting, GET /api/tasks/:id and /api/auth/verify on ${DATABASE.DATABASE_URL ? "PostgreSQL (rate limits in the database)" : "SQLite (rate limits in memory)"} (${config.rounds} rounds × ${config.duration} s, ${config.connections} connections, ${WRK === null ? "autocannon" : "wrk"})`,
      "",
      "| variant                        |   req/s | p50 ms | p99 ms | cpu µs | +cpu µs | req/s ÷ baseline (rounds) | other |",
      "|--------------------------------|--------:|-------:|-------:|-------:|--------:|---------------------------|------:|",
      ...summary.map(line),
      "",
      `cpu µs: server CPU time per request (/proc); +cpu µs: over the pre-authenticated baseline; other: answers whose status was not the variant's (200, or the refusal's 401 or 429).`,
      `In-memory limiter: ${micro.store_hit_ns} ns per store hit, ${micro.limiter_consume_run_sync_ns} ns per RateLimiter.consume (Effect.runSync included).`
    ].join("\n")
  )
  mkdirSync(dirname(config.out), { recursive: true })
  const store = DATABASE.DATABASE_URL ? "postgres" : "sqlite"
  writeFileSync(
    config.out,
    `${JSON.stringify({ config, store, loadgen: WRK ?? "autocannon", summary, micro }, null, 2)}\n`
  )
  log(`results written to ${config.out}`)
  for (const s of [real, limited, fixed, authOnly]) s.child.kill("SIGTERM")
  await sleep(500)
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
  // The servers' pipes would keep this process alive, and the servers with it.
  stopAll()
})
