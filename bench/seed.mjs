#!/usr/bin/env node
/**
 * Seeds a Taskwright SQLite database for the benchmark.
 *
 * The schema is Taskwright's own: `taskwright migrate --data-dir <dir>` when
 * `packages/cli/dist/main.js` exists. Before it exists (development of the bench only) the DDL can
 * come from a scratch file outside the repository: `--schema-sql <file>` or `BENCH_SCHEMA_SQL`.
 *
 * The data is deterministic (a seeded PRNG): the same `--tasks`, `--skewed` and `--pool` give the
 * same rows, the same credentials and the same task ids for the rotating endpoints.
 *
 *   node bench/seed.mjs [--data-dir DIR] [--tasks 100000] [--skewed 1] [--pool 0] [--schema-sql FILE]
 *
 * Writes `<dir>/taskwright.db` and `<dir>/bench-seed.json` (secrets, user id, task ids).
 */
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import Database from "better-sqlite3"
import { apiKeyChecksum } from "./servers/shared.mjs"

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..")
/** Where `npm run build` puts Taskwright's CLI: its entry, which runs the bundle beside it (`cli.cjs`). */
export const BUILT_CLI = join(ROOT, "packages/cli/dist/main.js")
/**
 * A build's files, the entry `main` and its bundle beside it, or null while one is missing; with
 * the build's code caches of that bundle (`npm run build` writes one beside it, named
 * `cli-<the bundle's hash>-<Node's version and flags>.v8`), which a copy needs to start as the build does.
 */
export const readBuild = (main) => {
  const dir = dirname(main)
  const bundlePath = join(dir, "cli.cjs")
  if (!existsSync(main) || !existsSync(bundlePath)) return null
  const bundle = readFileSync(bundlePath)
  const tag = `cli-${createHash("sha256").update(bundle).digest("hex").slice(0, 24)}-`
  const caches = readdirSync(dir)
    .filter((name) => name.startsWith(tag) && name.endsWith(".v8"))
    .map((name) => ({ name, bytes: readFileSync(join(dir, name)) }))
  return { entry: readFileSync(main), bundle, caches }
}
/** What identifies a build: both files' bytes. */
export const buildHash = ({ entry, bundle }) =>
  createHash("sha256").update(entry).update("\0").update(bundle).digest("hex")
/**
 * The CLI the bench runs: the build itself, or the runner's private copy of it (`useCli`), so
 * that a rebuild by someone else during a run neither removes it nor changes it between rounds.
 */
export let CLI = BUILT_CLI
export const useCli = (file) => {
  CLI = file
}
/** Bumped whenever the generated data changes, so a cached seed is rebuilt. */
export const SEED_VERSION = 4

// Ids follow DECISIONS.md: prefix + exactly 16 base62 characters.
export const BENCH_USER_ID = "usr_bench00000000000"
export const BENCH_USER_EMAIL = "bench@example.com"
export const OTHER_USER_ID = "usr_other00000000000"
export const BENCH_PROJECT_ID = "proj_bench00000000000"
export const BENCH_KEY_ID = "key_bench00000000000"
export const BENCH_SCOPES = "tasks:read,tasks:write"
/** The owner of the delete pool: tasks that exist only to be deleted, one per `DELETE` request. */
export const POOL_USER_ID = "usr_pool000000000000"
export const POOL_USER_EMAIL = "pool@example.com"
export const POOL_KEY_ID = "key_pool000000000000"
export const BENCH_SESSION_ID = "ses_bench00000000000"
/** How many task ids `GET /api/tasks/:id` (and `PATCH`) rotate over. */
export const GET_ID_COUNT = 1000
/** Skewed seeds: the newest tenth of the tasks all have this status (an import, say). */
export const SKEW_STATUS = "backlog"
/** The fraction of the newest tasks a skewed seed gives `SKEW_STATUS`: 100,000 of 1,000,000. */
export const SKEW_FRACTION = 0.1

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
const STATUSES = [
  ["backlog", 0.25],
  ["todo", 0.2],
  ["in_progress", 0.15],
  ["in_review", 0.1],
  ["done", 0.25],
  ["cancelled", 0.05]
]
const PRIORITIES = [
  ["low", 0.25],
  ["medium", 0.4],
  ["high", 0.25],
  ["urgent", 0.1]
]
const LABELS = ["bug", "feature", "docs", "perf", "ui", "backend", "infra", "security"]
const AGENTS = ["claude-code", "codex", "gemini"]
const RUN_STATUSES = ["completed", "completed", "completed", "failed", "stopped"]
const WORDS = (
  "add fix refactor update remove improve migrate document test verify cache index query " +
  "endpoint handler schema parser router session token key label project worktree branch " +
  "agent review diff commit log stream event socket retry timeout limit page offset total " +
  "the a of for with when on in to from and or not before after during each every"
).split(" ")

/** sfc32: small, fast, deterministic. Returns floats in [0, 1). */
const prng = (seedText) => {
  const h = createHash("sha256").update(seedText).digest()
  let a = h.readUInt32LE(0)
  let b = h.readUInt32LE(4)
  let c = h.readUInt32LE(8)
  let d = h.readUInt32LE(12)
  return () => {
    a |= 0
    b |= 0
    c |= 0
    d |= 0
    const t = (((a + b) | 0) + d) | 0
    d = (d + 1) | 0
    a = b ^ (b >>> 9)
    b = (c + (c << 3)) | 0
    c = (c << 21) | (c >>> 11)
    c = (c + t) | 0
    return (t >>> 0) / 4294967296
  }
}

const weighted = (rand, table) => {
  let x = rand()
  for (const [value, w] of table) {
    if (x < w) return value
    x -= w
  }
  return table[table.length - 1][0]
}
const pick = (rand, list) => list[Math.floor(rand() * list.length)]
const base62 = (rand, n) => {
  let s = ""
  for (let i = 0; i < n; i++) s += BASE62[Math.floor(rand() * 62)]
  return s
}
/** An API key secret in Taskwright's format: `twk_` + 43 base62 + the 6-character checksum. */
const apiKeySecret = (rand) => {
  const head = `twk_${base62(rand, 43)}`
  return head + apiKeyChecksum(head)
}
const BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
const words = (rand, min, max) => {
  const n = min + Math.floor(rand() * (max - min + 1))
  const out = []
  for (let i = 0; i < n; i++) out.push(pick(rand, WORDS))
  return out.join(" ")
}

export const sha256Hex = (text) => createHash("sha256").update(text).digest("hex")

/** An environment for Taskwright's CLI that cannot point it at another store. */
export const cliEnv = (extra = {}) => {
  const env = { ...process.env, ...extra }
  delete env.DATABASE_URL
  return env
}

/** What identifies the schema source, for the seed cache. */
export const schemaSource = (schemaSql) => {
  const build = readBuild(CLI)
  if (build !== null && !process.env.BENCH_FORCE_SCHEMA_SQL) return `cli:${buildHash(build)}`
  if (schemaSql) return `sql:${sha256Hex(readFileSync(schemaSql, "utf8"))}`
  return null
}

const createSchema = (dataDir, file, schemaSql, log) => {
  if (existsSync(CLI) && !process.env.BENCH_FORCE_SCHEMA_SQL) {
    log(`schema: taskwright migrate --data-dir ${dataDir}`)
    const r = spawnSync(process.execPath, [CLI, "migrate", "--data-dir", dataDir], {
      cwd: ROOT,
      env: cliEnv(),
      encoding: "utf8",
      timeout: 120_000
    })
    if (r.status !== 0 || !existsSync(file)) {
      throw new Error(
        `taskwright migrate failed (exit ${r.status}${r.signal ? `, ${r.signal}` : ""}):\n${r.stdout}\n${r.stderr}`
      )
    }
    return "taskwright migrate"
  }
  if (!schemaSql) {
    throw new Error(
      `${CLI} does not exist yet, so the schema cannot come from \`taskwright migrate\`.\n` +
        "Build Taskwright (npm run build), or for bench development point BENCH_SCHEMA_SQL (or --schema-sql)\n" +
        "at a scratch file outside the repository holding the sqlite statements of `initial` in\n" +
        "packages/core/src/store/migrations.ts."
    )
  }
  log(`schema: ${schemaSql} (scratch DDL; Taskwright's CLI is not built)`)
  const db = new Database(file)
  db.exec(readFileSync(schemaSql, "utf8"))
  db.close()
  return `scratch DDL ${schemaSql}`
}

/** The columns of the rows `generate` yields, per table (the others keep their defaults). */
export const COLUMNS = {
  users: ["id", "email", "email_lower", "name", "created_at", "updated_at"],
  api_keys: ["id", "user_id", "name", "secret_hash", "prefix", "scopes", "created_at"],
  projects: ["id", "owner_id", "name", "path", "created_at", "updated_at"],
  labels: ["id", "owner_id", "name", "name_lower", "color", "created_at"],
  sessions: ["id", "user_id", "token_hash", "created_at", "expires_at"],
  tasks: [
    "id",
    "owner_id",
    "project_id",
    "title",
    "description",
    "status",
    "priority",
    "labels",
    "created_at",
    "updated_at"
  ],
  runs: ["id", "task_id", "owner_id", "agent", "branch", "status", "started_at", "completed_at", "output"]
}

/**
 * Generates the bench data, deterministically: yields `[table, row]` for every row, the row an
 * array in the column order of `COLUMNS`. The SQLite and the PostgreSQL seeds both use it, so the
 * two stores hold the same rows.
 *
 * - `pool` tasks of another user (`POOL_USER_ID`) come first, with the lowest ids: the delete
 *   pool, one task per `DELETE` request. They sit below every other task, so no list of the bench
 *   user ever walks over them, and they carry no runs or labels.
 * - then `tasks` tasks: nine in ten the bench user's, one in ten another user's (so the list
 *   query really filters on the owner), spread over the statuses and priorities; with `skewed`,
 *   the newest tenth all have the status `SKEW_STATUS`. About one in eight has agent runs.
 * - the bench user's session (the `service_session` cookie; only its SHA-256 is stored) and an
 *   API key for the bench user and for the pool's owner (generated; the runner mints its own with
 *   `taskwright keys create` when the CLI exists).
 *
 * It returns the generated secrets, the session token, the ids the rotating endpoints use and a
 * few counts.
 */
export function* generate(tasks, { skewed = false, pool = 0 } = {}) {
  const rand = prng(`taskwright-bench-v${SEED_VERSION}`)
  const keyRand = prng(`taskwright-bench-key-v${SEED_VERSION}`)
  const generatedSecret = apiKeySecret(keyRand)
  const generatedPoolSecret = apiKeySecret(keyRand)
  let sessionToken = ""
  for (let i = 0; i < 43; i++) sessionToken += BASE64URL[Math.floor(keyRand() * 64)]
  const createdBase = Date.UTC(2025, 0, 1)
  const stamp = (ms) => new Date(ms).toISOString()
  const now = stamp(createdBase)

  const getIds = []
  const step = Math.max(1, Math.floor(tasks / GET_ID_COUNT))
  let nextPick = 1
  let runCount = 0
  let withRuns = 0
  const skewFrom = skewed ? tasks - Math.floor(tasks * SKEW_FRACTION) + 1 : Number.POSITIVE_INFINITY

  yield ["users", [BENCH_USER_ID, BENCH_USER_EMAIL, BENCH_USER_EMAIL, "Bench User", now, now]]
  yield ["users", [OTHER_USER_ID, "other@example.com", "other@example.com", "Other User", now, now]]
  yield ["users", [POOL_USER_ID, POOL_USER_EMAIL, POOL_USER_EMAIL, "Pool User", now, now]]
  yield [
    "api_keys",
    [BENCH_KEY_ID, BENCH_USER_ID, "bench", sha256Hex(generatedSecret), generatedSecret.slice(0, 10), BENCH_SCOPES, now]
  ]
  yield [
    "api_keys",
    [
      POOL_KEY_ID,
      POOL_USER_ID,
      "bench-pool",
      sha256Hex(generatedPoolSecret),
      generatedPoolSecret.slice(0, 10),
      BENCH_SCOPES,
      now
    ]
  ]
  // The session expires long after any run (Taskwright's last 7 days from login).
  yield ["sessions", [BENCH_SESSION_ID, BENCH_USER_ID, sha256Hex(sessionToken), now, "2099-01-01T00:00:00.000Z"]]
  yield ["projects", [BENCH_PROJECT_ID, BENCH_USER_ID, "bench", "/tmp/taskwright-bench-project", now, now]]
  let n = 0
  for (const owner of [BENCH_USER_ID, OTHER_USER_ID]) {
    for (const name of LABELS) {
      const color = `#${sha256Hex(name).slice(0, 6)}`
      yield ["labels", [`lbl_bench${String(n++).padStart(11, "0")}`, owner, name, name, color, now]]
    }
  }

  const poolStamp = stamp(createdBase - 86_400_000)
  for (let id = 1; id <= pool; id++) {
    yield ["tasks", [id, POOL_USER_ID, null, `Pool task ${id}`, "", "done", "low", "[]", poolStamp, poolStamp]]
  }

  for (let i = 1; i <= tasks; i++) {
    const id = pool + i
    // One task in ten belongs to another user: the list query has to filter on the owner.
    const owner = i % 10 === 0 ? OTHER_USER_ID : BENCH_USER_ID
    const projectId = owner === BENCH_USER_ID && rand() < 0.5 ? BENCH_PROJECT_ID : null
    const title = `Task ${i}: ${words(rand, 3, 8)}`
    const description = rand() < 0.2 ? "" : words(rand, 5, 40)
    const drawn = weighted(rand, STATUSES)
    const status = i >= skewFrom ? SKEW_STATUS : drawn
    const priority = weighted(rand, PRIORITIES)
    const nLabels = Math.floor(rand() * 4)
    const labels = []
    for (let k = 0; k < nLabels; k++) {
      const l = pick(rand, LABELS)
      if (!labels.includes(l)) labels.push(l)
    }
    const createdMs = createdBase + i * 60_000
    const updatedMs = createdMs + Math.floor(rand() * 3 * 86_400_000)
    yield [
      "tasks",
      [
        id,
        owner,
        projectId,
        title,
        description,
        status,
        priority,
        JSON.stringify(labels),
        stamp(createdMs),
        stamp(updatedMs)
      ]
    ]
    // About one task in eight has between one and three agent runs.
    if (rand() < 0.125) {
      withRuns++
      const nRuns = 1 + Math.floor(rand() * 3)
      for (let r = 0; r < nRuns; r++) {
        const started = createdMs + (r + 1) * 3_600_000
        const runStatus = pick(rand, RUN_STATUSES)
        const output = JSON.stringify({
          files_modified: Math.floor(rand() * 10),
          lines_added: Math.floor(rand() * 500),
          lines_removed: Math.floor(rand() * 200)
        })
        yield [
          "runs",
          [
            `run_${base62(rand, 16)}`,
            id,
            owner,
            pick(rand, AGENTS),
            `taskwright/task-${id}`,
            runStatus,
            stamp(started),
            stamp(started + 60_000 + Math.floor(rand() * 1_800_000)),
            output
          ]
        ]
        runCount++
      }
    }
    if (owner === BENCH_USER_ID && i >= nextPick && getIds.length < GET_ID_COUNT) {
      getIds.push(id)
      nextPick = i + step
    }
  }
  return { generatedSecret, generatedPoolSecret, sessionToken, getIds, runCount, withRuns }
}

/** What a seed is: its size, whether it is skewed, and its delete pool. */
export const seedName = ({ tasks, skewed = false, pool = 0 }) =>
  `${tasks}${skewed ? "-skewed" : ""}${pool > 0 ? `-pool${pool}` : ""}`

/**
 * Mints the API keys the bench uses with `taskwright keys create` (so the secrets carry whatever
 * format and checksum Taskwright expects), or keeps the generated ones. `cli` takes the CLI's
 * arguments and answers its stdout (or null when it failed).
 */
export const mintKeys = ({ keySource, generated, cli, log, pool }) => {
  const keys = { secret: generated.secret, poolSecret: generated.poolSecret, keySource: "generated" }
  if (keySource === "generated") return keys
  const mint = (email) => {
    const out = cli(["keys", "create", "--user", email, "--name", "bench", "--scopes", BENCH_SCOPES, "--json"])
    return out === null ? undefined : /twk_[0-9A-Za-z]{20,}/.exec(out)?.[0]
  }
  const secret = mint(BENCH_USER_EMAIL)
  const poolSecret = pool > 0 ? mint(POOL_USER_EMAIL) : generated.poolSecret
  if (secret === undefined || poolSecret === undefined) {
    if (keySource === "cli") throw new Error("BENCH_KEY_SOURCE=cli but `taskwright keys create` did not give a key")
    log("warning: `taskwright keys create` failed; using the generated keys")
    return keys
  }
  return { secret, poolSecret, keySource: "taskwright keys create" }
}

/**
 * Seeds `<dataDir>/taskwright.db` from scratch (see `generate` for what it holds). Returns what
 * the runner needs. `keySource`: "auto" (CLI-minted when the CLI exists, else generated), "cli"
 * or "generated".
 */
export const seed = ({
  dataDir,
  tasks = 100_000,
  skewed = false,
  pool = 0,
  schemaSql,
  keySource = "auto",
  log = console.error
}) => {
  const t0 = performance.now()
  rmSync(dataDir, { recursive: true, force: true })
  mkdirSync(dataDir, { recursive: true })
  const file = join(dataDir, "taskwright.db")
  const schema = createSchema(dataDir, file, schemaSql, log)

  const db = new Database(file)
  // Bulk-load settings; the file is switched back to WAL (Taskwright's mode) at the end.
  db.pragma("journal_mode = OFF")
  db.pragma("synchronous = OFF")
  db.pragma("locking_mode = EXCLUSIVE")
  db.pragma("cache_size = -1048576") // 1 GiB: every index page stays in memory while loading
  db.pragma("temp_store = MEMORY")
  db.pragma("foreign_keys = OFF")

  const insertRow = (table, extra = {}) => {
    const columns = [...COLUMNS[table], ...Object.keys(extra)]
    const values = [...COLUMNS[table].map(() => "?"), ...Object.values(extra)]
    return db.prepare(`INSERT INTO ${table} (${columns.join(", ")}) VALUES (${values.join(", ")})`)
  }
  const insert = {
    users: insertRow("users", { password_hash: "NULL", is_admin: "0" }),
    api_keys: insertRow("api_keys"),
    sessions: insertRow("sessions"),
    projects: insertRow("projects"),
    labels: insertRow("labels"),
    tasks: insertRow("tasks"),
    runs: insertRow("runs", { autonomy: "'workspace-write'" })
  }
  const generated = db.transaction(() => {
    const rows = generate(tasks, { skewed, pool })
    for (let r = rows.next(); ; r = rows.next()) {
      if (r.done) return r.value
      insert[r.value[0]].run(r.value[1])
    }
  })()
  const { getIds, runCount, withRuns, sessionToken } = generated

  db.pragma("locking_mode = NORMAL")
  db.pragma("journal_mode = WAL")
  db.pragma("wal_checkpoint(TRUNCATE)")
  const check = db
    .prepare("SELECT COUNT(*) AS n FROM tasks WHERE owner_id = ? AND id IN (SELECT value FROM json_each(?))")
    .get(BENCH_USER_ID, JSON.stringify(getIds))
  if (check.n !== getIds.length) throw new Error("seed: a GET id is not owned by the bench user")
  const todo = db
    .prepare("SELECT COALESCE(SUM(n), 0) AS n FROM task_counts WHERE owner_id = ? AND status = 'todo'")
    .get(BENCH_USER_ID).n
  db.close()

  if (schema !== "taskwright migrate" && keySource === "cli") {
    throw new Error("BENCH_KEY_SOURCE=cli but Taskwright's CLI is not built")
  }
  const keys = mintKeys({
    keySource: schema === "taskwright migrate" ? keySource : "generated",
    generated: { secret: generated.generatedSecret, poolSecret: generated.generatedPoolSecret },
    cli: (args) => {
      const r = spawnSync(process.execPath, [CLI, ...args, "--data-dir", dataDir], {
        cwd: ROOT,
        env: cliEnv(),
        encoding: "utf8",
        timeout: 60_000
      })
      if (r.status === 0) return r.stdout
      log(`\`taskwright ${args.slice(0, 2).join(" ")}\` failed (exit ${r.status}): ${r.stderr.trim()}`)
      return null
    },
    log,
    pool
  })

  const info = {
    seedVersion: SEED_VERSION,
    tasks,
    skewed,
    pool,
    poolFirstId: 1,
    runs: runCount,
    tasksWithRuns: withRuns,
    benchUserTodo: todo,
    schema,
    schemaSource: schemaSource(schemaSql),
    ...keys,
    sessionToken,
    userId: BENCH_USER_ID,
    getIds,
    seconds: (performance.now() - t0) / 1000
  }
  const infoFile = join(dataDir, "bench-seed.json")
  writeFileSync(infoFile, `${JSON.stringify(info, null, 2)}\n`)
  chmodSync(infoFile, 0o600)
  return { ...info, file, dataDir }
}

/** True when the database is all in its main file (no WAL content), so copying that file is enough. */
export const walIsEmpty = (file) => {
  try {
    return statSync(`${file}-wal`).size === 0
  } catch {
    return true
  }
}

/** Reuses a seed made by the same version, shape and schema source; seeds afresh otherwise. */
export const seedCached = ({ dataDir, tasks, skewed = false, pool = 0, schemaSql, keySource, log = console.error }) => {
  const infoFile = join(dataDir, "bench-seed.json")
  const file = join(dataDir, "taskwright.db")
  if (!process.env.BENCH_RESEED && existsSync(infoFile) && existsSync(file)) {
    try {
      const info = JSON.parse(readFileSync(infoFile, "utf8"))
      const cachedKeyOk = keySource === "generated" ? info.keySource === "generated" : true
      const source = schemaSource(schemaSql)
      const same = info.seedVersion === SEED_VERSION && info.tasks === tasks && info.skewed === skewed
      if (same && info.pool === pool && cachedKeyOk && walIsEmpty(file)) {
        if (info.schemaSource === source) return { ...info, file, dataDir, cached: true }
        if (source === null) {
          // No way to make the schema now (the CLI is not built, e.g. during a rebuild): the
          // cached seed, made by an earlier build, still serves.
          log(`note: ${CLI} is missing; reusing the seed in ${dataDir} made by an earlier build`)
          return { ...info, file, dataDir, cached: true }
        }
      }
    } catch {
      // fall through and seed again
    }
  }
  return { ...seed({ dataDir, tasks, skewed, pool, schemaSql, keySource, log }), cached: false }
}

/** `--name value` pairs, for the seed scripts' command lines. */
export const parseArgs = (argv) => {
  const out = {}
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (!a.startsWith("--")) throw new Error(`unexpected argument ${a}`)
    out[a.slice(2)] = argv[++i]
  }
  return out
}

/** `--tasks`, `--skewed` and `--pool` of a seed script's command line. */
export const seedShape = (args) => {
  const tasks = Number(args.tasks ?? 100_000)
  const pool = Number(args.pool ?? 0)
  if (!Number.isInteger(tasks) || tasks < GET_ID_COUNT) throw new Error(`--tasks must be an integer >= ${GET_ID_COUNT}`)
  if (!Number.isInteger(pool) || pool < 0) throw new Error("--pool must be an integer >= 0")
  return { tasks, pool, skewed: ["1", "true", "yes"].includes(String(args.skewed ?? "0")) }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const args = parseArgs(process.argv.slice(2))
    const shape = seedShape(args)
    const dataDir = resolve(args["data-dir"] ?? join(ROOT, "bench/.work", `seed-${seedName(shape)}`))
    const info = seed({
      dataDir,
      ...shape,
      schemaSql: args["schema-sql"] ?? process.env.BENCH_SCHEMA_SQL,
      keySource: args["key-source"] ?? process.env.BENCH_KEY_SOURCE ?? "auto"
    })
    console.log(
      `seeded ${info.file}: ${info.tasks} tasks${info.skewed ? " (skewed)" : ""}, ${info.pool} in the delete pool, ` +
        `${info.runs} runs, key ${info.keySource}, ${info.seconds.toFixed(1)} s (details in ${join(dataDir, "bench-seed.json")})`
    )
  } catch (e) {
    console.error(e instanceof Error ? e.message : e)
    process.exit(1)
  }
}
