#!/usr/bin/env node
/**
 * Seeds a PostgreSQL database for the benchmark with exactly the rows of the SQLite seed
 * (`generate` in seed.mjs: same PRNG, same rows, same task ids for `GET /api/tasks/:id`).
 *
 * The schema is Taskwright's own: `DATABASE_URL=... taskwright migrate`. The rows go in by
 * `INSERT ... SELECT * FROM unnest($1::text[], ...)`, a few thousand rows per statement, in one
 * transaction with triggers and foreign-key checks off (`session_replication_role = replica`);
 * the indexes grow row by row, as in a database that grew by use. `task_counts` is then filled by
 * one `GROUP BY` (what the trigger would have counted, row by row), the identity of `tasks.id`
 * moved past the seeded ids, and the database vacuumed and analysed. 100,000 tasks take about
 * 4 s, 1,000,000 about 25 s on a quiet machine (the rows go in at about 50,000 a second).
 *
 *   node bench/seed-pg.mjs --database twbench_manual [--tasks 100000] [--skewed 1] [--pool 0]
 *
 * The command keeps the database (for profiling) and writes its details, with the secret, to
 * `bench/.work/<database>.json`; drop it with `psql -h 127.0.0.1 -U postgres -c 'DROP DATABASE <database>'`.
 * The runner creates and drops its own.
 */
import { spawnSync } from "node:child_process"
import { chmodSync, existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { assertLoopback, createDatabase, dbUrl, dropCreated, numberTypes, serverVersion } from "./lib/pg.mjs"
import {
  BENCH_USER_ID,
  CLI,
  COLUMNS,
  cliEnv,
  generate,
  mintKeys,
  parseArgs,
  ROOT,
  SEED_VERSION,
  seedShape
} from "./seed.mjs"

/** Rows per INSERT of the big tables. */
const BATCH = 5000
const ORDER = ["users", "api_keys", "sessions", "projects", "labels", "tasks", "runs"]
const BIGINT = { tasks: new Set(["id"]), runs: new Set(["task_id"]) }
/** Columns the generator does not produce and that have no default. */
const CONSTANTS = { runs: { autonomy: "'workspace-write'" } }

const insertText = (table) => {
  const cols = COLUMNS[table]
  const constants = Object.entries(CONSTANTS[table] ?? {})
  const arrays = cols.map((c, i) => `$${i + 1}::${BIGINT[table]?.has(c) ? "bigint" : "text"}[]`)
  const names = [...cols, ...constants.map(([c]) => c)].join(", ")
  const values = ["u.*", ...constants.map(([, v]) => v)].join(", ")
  return `INSERT INTO ${table} (${names}) SELECT ${values} FROM unnest(${arrays.join(", ")}) AS u`
}

/** Runs the Taskwright CLI against the database; answers its stdout or throws. */
const cli = (url, args, dataDir) => {
  const out = tryCli(url, args, dataDir)
  if (typeof out !== "string") throw new Error(out.error)
  return out
}
/** The CLI's stdout, or `{ error }`. */
const tryCli = (url, args, dataDir) => {
  const r = spawnSync(process.execPath, [CLI, ...args, "--data-dir", dataDir], {
    cwd: ROOT,
    env: { ...cliEnv(), DATABASE_URL: url },
    encoding: "utf8",
    timeout: 120_000
  })
  if (r.status !== 0) {
    return {
      error: `taskwright ${args[0]} ${args[1] ?? ""} failed (exit ${r.status}${r.signal ? `, ${r.signal}` : ""}):\n${r.stdout}\n${r.stderr}`
    }
  }
  return r.stdout
}

/**
 * Creates `database` afresh (dropping any database of that name) and seeds `tasks` tasks.
 * `keySource`: "auto"/"cli" (minted by `taskwright keys create`) or "generated". `scratch` is
 * the CLI's (empty) data dir, removed at the end. Answers what the runner needs; leaves no
 * connection open (the database serves as a template).
 */
export const seedPg = async ({
  database,
  tasks = 100_000,
  skewed = false,
  pool = 0,
  keySource = "auto",
  scratch = join(ROOT, "bench/.work", `cli-${database}`),
  log = console.error
}) => {
  const t0 = performance.now()
  /** Seconds per step, for the JSON. */
  const phases = {}
  let last = t0
  const lap = (name) => {
    const now = performance.now()
    phases[name] = (now - last) / 1000
    last = now
  }
  assertLoopback()
  if (!/^twbench_[a-z0-9_]+$/.test(database)) throw new Error(`the bench only seeds databases named twbench_*`)
  if (!existsSync(CLI)) {
    throw new Error(
      `${CLI} does not exist: the PostgreSQL schema comes from \`taskwright migrate\` (build with \`npm run build\`)`
    )
  }
  const version = await serverVersion()
  const url = dbUrl(database)
  rmSync(scratch, { recursive: true, force: true })
  mkdirSync(scratch, { recursive: true })
  try {
    await createDatabase(database)
    log(`schema: DATABASE_URL=${url} taskwright migrate`)
    cli(url, ["migrate"], scratch)
    lap("schema")

    const client = new pg.Client({ connectionString: url, types: numberTypes })
    await client.connect()
    let info
    try {
      await client.query("SET synchronous_commit = off")
      await client.query("SET session_replication_role = replica") // no triggers, no FK checks
      await client.query("BEGIN")
      const texts = Object.fromEntries(ORDER.map((t) => [t, insertText(t)]))
      const buffers = Object.fromEntries(ORDER.map((t) => [t, COLUMNS[t].map(() => [])]))
      // One batch goes to the server while the next is generated (two cores).
      let inflight = Promise.resolve()
      const flush = async () => {
        const queries = []
        for (const t of ORDER) {
          if (buffers[t][0].length === 0) continue
          queries.push({ text: texts[t], values: buffers[t] })
          buffers[t] = COLUMNS[t].map(() => [])
        }
        await inflight
        inflight = queries.reduce((p, q) => p.then(() => client.query(q)), Promise.resolve())
        inflight.catch(() => {}) // awaited at the next flush; not an unhandled rejection meanwhile
      }
      const rows = generate(tasks, { skewed, pool })
      let r = rows.next()
      for (; !r.done; r = rows.next()) {
        const [table, row] = r.value
        const cols = buffers[table]
        for (let i = 0; i < row.length; i++) cols[i].push(row[i])
        if (table === "tasks" && cols[0].length >= BATCH) await flush()
      }
      await flush()
      await inflight
      lap("rows")
      await client.query(
        `INSERT INTO task_counts (owner_id, project_id, status, priority, n)
         SELECT owner_id, COALESCE(project_id, ''), status, priority, COUNT(*) FROM tasks GROUP BY 1, 2, 3, 4`
      )
      await client.query("SELECT setval(pg_get_serial_sequence('tasks', 'id'), (SELECT MAX(id) FROM tasks))")
      await client.query("COMMIT")
      lap("counts")
      info = r.value
    } finally {
      await client.end()
    }
    const loadS = (performance.now() - t0) / 1000

    const keys = mintKeys({
      keySource,
      generated: { secret: info.generatedSecret, poolSecret: info.generatedPoolSecret },
      cli: (args) => {
        const out = tryCli(url, args, scratch)
        if (typeof out === "string") return out
        log(out.error)
        return null
      },
      log,
      pool
    })

    const check = new pg.Client({ connectionString: url, types: numberTypes })
    await check.connect()
    let todo
    try {
      lap("key")
      await check.query("VACUUM (ANALYZE)")
      lap("vacuum")
      const owned = await check.query(
        "SELECT COUNT(*) AS n FROM tasks WHERE owner_id = $1 AND id = ANY($2::bigint[])",
        [BENCH_USER_ID, info.getIds]
      )
      if (owned.rows[0].n !== info.getIds.length) throw new Error("seed: a GET id is not owned by the bench user")
      todo = (
        await check.query("SELECT COALESCE(SUM(n), 0) AS n FROM task_counts WHERE owner_id = $1 AND status = 'todo'", [
          BENCH_USER_ID
        ])
      ).rows[0].n
    } finally {
      await check.end()
    }
    return {
      store: "pg",
      seedVersion: SEED_VERSION,
      tasks,
      skewed,
      pool,
      poolFirstId: 1,
      runs: info.runCount,
      tasksWithRuns: info.withRuns,
      benchUserTodo: todo,
      schema: "taskwright migrate",
      ...keys,
      sessionToken: info.sessionToken,
      userId: BENCH_USER_ID,
      getIds: info.getIds,
      database,
      url,
      postgres: version,
      loadSeconds: loadS,
      phases,
      seconds: (performance.now() - t0) / 1000
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  // Interrupted while seeding: the half-seeded database goes.
  for (const sig of ["SIGINT", "SIGTERM"]) {
    process.on(sig, async () => {
      console.error(`\n${sig}: dropping the database being seeded`)
      await dropCreated()
      const name = process.argv[process.argv.indexOf("--database") + 1]
      if (/^twbench_[a-z0-9_]+$/.test(name ?? ""))
        rmSync(join(ROOT, "bench/.work", `cli-${name}`), { recursive: true, force: true })
      process.exit(130)
    })
  }
  try {
    const args = parseArgs(process.argv.slice(2))
    if (!args.database)
      throw new Error("usage: seed-pg.mjs --database twbench_<name> [--tasks N] [--skewed 1] [--pool N]")
    const info = await seedPg({
      database: args.database,
      ...seedShape(args),
      keySource: args["key-source"] ?? process.env.BENCH_KEY_SOURCE ?? "auto"
    })
    const infoFile = join(ROOT, "bench/.work", `${args.database}.json`)
    mkdirSync(join(ROOT, "bench/.work"), { recursive: true })
    writeFileSync(infoFile, `${JSON.stringify(info, null, 2)}\n`)
    chmodSync(infoFile, 0o600)
    console.log(
      `seeded ${info.url}: ${info.tasks} tasks, ${info.runs} runs, key ${info.keySource}, ` +
        `${info.seconds.toFixed(1)} s (details in ${infoFile})`
    )
  } catch (e) {
    console.error(e instanceof Error ? e.message : e)
    await dropCreated() // a half-seeded database is worth nothing
    process.exit(1)
  }
}
