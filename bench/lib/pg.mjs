/**
 * PostgreSQL plumbing for the bench: where the server is, creating a database (from a template)
 * and dropping it again, finding the server processes that serve one database (to read their CPU
 * time), and dropping everything this process created, also when it is interrupted.
 *
 * Every database the bench creates is named `twbench_<kind>_p<pid>` after the runner's process:
 * two runners never meet, and one that was SIGKILLed leaves names the next run recognises as
 * orphans (their process is gone) and drops.
 */
import pg from "pg"

/** The server (without a database). Loopback only: the bench sends nothing off the machine. */
export const PG_BASE_URL = process.env.BENCH_PG_URL || "postgres://postgres@127.0.0.1:5432"
/** The pool size of every server under test: Taskwright's default (`max: 10`). */
export const PG_POOL_MAX = 10

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]", "::1"])

/** The URL of one database on the bench's server. */
export const dbUrl = (database) => {
  const url = new URL(PG_BASE_URL)
  url.pathname = `/${database}`
  return url.toString()
}

/** Throws unless BENCH_PG_URL points at this machine. */
export const assertLoopback = () => {
  const url = new URL(PG_BASE_URL)
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:")
    throw new Error(`BENCH_PG_URL must be a postgres:// URL, got ${PG_BASE_URL}`)
  if (!LOOPBACK.has(url.hostname))
    throw new Error(`BENCH_PG_URL must point at this machine (127.0.0.1), got host ${url.hostname}`)
  if (url.pathname !== "" && url.pathname !== "/")
    throw new Error("BENCH_PG_URL names the server only (no database): the bench creates its own databases")
}

/** `int8` and `numeric` as JS numbers (ids, COUNT and SUM here all fit), as Taskwright parses them. */
export const numberTypes = {
  getTypeParser: (oid, format) =>
    oid === 20 || oid === 1700 ? (value) => Number(value) : pg.types.getTypeParser(oid, format)
}

const ident = (name) => {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`not a plain identifier: ${name}`)
  return `"${name}"`
}

/** Runs one statement (or several) on the maintenance database `postgres`, on a connection of its own. */
export const adminQuery = async (text, values) => {
  const client = new pg.Client({ connectionString: dbUrl("postgres"), connectionTimeoutMillis: 10_000 })
  await client.connect()
  try {
    return await client.query(text, values)
  } finally {
    await client.end()
  }
}

/** The server's version, e.g. "15.20"; throws a readable error when it is not running. */
export const serverVersion = async () => {
  try {
    const r = await adminQuery("SHOW server_version")
    return r.rows[0].server_version.split(" ")[0]
  } catch (e) {
    throw new Error(
      `cannot reach PostgreSQL at ${PG_BASE_URL} (${e.message}); start it with\n` +
        "  pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"
    )
  }
}

/** The databases this process created and has not dropped yet, and the creations under way. */
const created = new Set()
const creating = new Set()
let refusing = false

export const benchDbName = (kind) => `twbench_${kind}_p${process.pid}`

/**
 * Creates `name` (empty, or a copy of `template`). A copy takes the template's files as they are
 * (`STRATEGY = FILE_COPY`: one checkpoint and a file copy, much faster than WAL-logging every
 * block of a large database); nobody may be connected to the template meanwhile.
 */
export const createDatabase = async (name, { template } = {}) => {
  if (refusing) throw new Error(`not creating ${name}: the bench is stopping`)
  const from = template ? ` TEMPLATE ${ident(template)} STRATEGY = FILE_COPY` : ""
  const done = (async () => {
    await dropDatabase(name)
    created.add(name)
    await adminQuery(`CREATE DATABASE ${ident(name)}${from}`)
  })()
  creating.add(done)
  try {
    await done
  } finally {
    creating.delete(done)
  }
}

/** From now on `createDatabase` refuses (the runner was interrupted). */
export const refuseNewDatabases = () => {
  refusing = true
}

/** Drops `name` if it exists, closing whatever is still connected to it. */
export const dropDatabase = async (name) => {
  await adminQuery(`DROP DATABASE IF EXISTS ${ident(name)} WITH (FORCE)`)
  created.delete(name)
}

/** Drops every database this process created (at exit, and on SIGINT/SIGTERM). Never throws. */
export const dropCreated = async () => {
  await Promise.allSettled([...creating]) // a CREATE under way must not outlive the drop
  const failures = []
  for (const name of [...created]) {
    try {
      await dropDatabase(name)
    } catch (e) {
      failures.push(`${name}: ${e.message}`)
    }
  }
  return failures
}

/** The names still to drop (for a last message when dropping failed). */
export const createdNames = () => [...created]

/** True while this process has a database to drop or a creation under way. */
export const holdsDatabases = () => created.size > 0 || creating.size > 0

const alive = (pid) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return e.code === "EPERM"
  }
}

/** Drops the databases of bench processes that are gone (a runner killed with SIGKILL). */
export const dropOrphans = async (log) => {
  const r = await adminQuery("SELECT datname FROM pg_database WHERE datname LIKE 'twbench\\_%\\_p%'")
  for (const { datname } of r.rows) {
    const pid = Number(/_p(\d+)$/.exec(datname)?.[1])
    if (!Number.isInteger(pid) || pid === process.pid || alive(pid)) continue
    log?.(`dropping ${datname}, left behind by bench process ${pid} (gone)`)
    await adminQuery(`DROP DATABASE IF EXISTS ${ident(datname)} WITH (FORCE)`)
  }
}

/**
 * The PostgreSQL server processes (backends) connected to `database`. Their CPU time is the
 * database's share of a request's cost, which the server process's own CPU does not include.
 */
export const backendPids = async (client, database) => {
  const r = await client.query(
    "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
    [database]
  )
  return r.rows.map((row) => row.pid)
}
