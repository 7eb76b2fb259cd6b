/**
 * The plan of Taskwright's list query on a seeded database: `EXPLAIN QUERY PLAN` on SQLite,
 * `EXPLAIN (ANALYZE, BUFFERS)` on PostgreSQL, both with the bench user and the status the list
 * phase loads. On PostgreSQL the statement is prepared as Taskwright's `pg` pool prepares it
 * (parameters untyped), then explained twice: with the values (the custom plan, what the first
 * five executions of a named statement get) and with `plan_cache_mode = force_generic_plan` (the
 * plan PostgreSQL keeps from the sixth).
 *
 * `LIST_SQL` (SQLite), `LIST_SQL_PG` and `LIST_SQL_PG_FIRST` are copies of the statements `TasksRepo`
 * builds for an owner and a status (the peers run the same page, with its bounds as parameters,
 * `servers/shared.mjs`). Taskwright's HTTP answer on
 * SQLite selects each row as `json_object(…)` instead of its columns: the same plan. On PostgreSQL the runner also records the statements
 * Taskwright's connections were seen running during the list phase, and says when its list
 * statement no longer matches this copy.
 */
import Database from "better-sqlite3"
import pg from "pg"
import { BENCH_USER_ID } from "../seed.mjs"

const LIST_COLUMNS = "id, title, description, status, priority, labels, created_at, updated_at"
const LIST_WHERE = "WHERE owner_id = ? AND status = ?"
export const LIST_SQL = `SELECT ${LIST_COLUMNS} FROM tasks ${LIST_WHERE} ORDER BY id DESC LIMIT ? OFFSET ?`
/**
 * On PostgreSQL the page's ids are picked from the filter's index alone, then fetched by id: the
 * plain form is planned as a backward walk of the primary key that filters (slow when the newest
 * tasks have another status). The peers run this page and the count from `task_counts` side by
 * side; Taskwright's `TasksRepo` runs both in one statement, this one, the count a scalar
 * subquery on every row (the filter's `$1` and `$2` serve both).
 */
const LIST_FROM_PG = `FROM tasks WHERE id = ANY (ARRAY(SELECT id FROM tasks WHERE owner_id = $1 AND status = $2 ORDER BY id DESC LIMIT $3 OFFSET $4)) ORDER BY id DESC`
export const LIST_SQL_PG = `SELECT (SELECT COALESCE(SUM(n), 0) AS total FROM task_counts WHERE owner_id = $1 AND status = $2) AS total, ${LIST_COLUMNS} ${LIST_FROM_PG}`
/**
 * A first page of 50 (or 200), what the list at scale asks for, is its own statement in
 * Taskwright, its size written into the text (a later page's is `LIMIT 50 OFFSET (SELECT
 * $3::bigint)`) and its values read through subqueries the planner does not look into: PostgreSQL
 * then keeps one plan for it where it plans the form above again at every execution, and the
 * "custom" plan below is the generic one (docs/serving.md). The peers run the form above.
 */
const HIDDEN_WHERE_PG = "WHERE owner_id = (SELECT $1::text) AND status = (SELECT $2::text)"
export const LIST_SQL_PG_FIRST = `SELECT (SELECT COALESCE(SUM(n), 0) AS total FROM task_counts ${HIDDEN_WHERE_PG}) AS total, ${LIST_COLUMNS} FROM tasks WHERE id = ANY (ARRAY(SELECT id FROM tasks ${HIDDEN_WHERE_PG} ORDER BY id DESC LIMIT 50)) ORDER BY id DESC`
/** Taskwright's statement of the list at scale (a first page of 50), per dialect. */
export const listSql = (pg) => (pg ? LIST_SQL_PG_FIRST : LIST_SQL)
export const LIST_PARAMS = [BENCH_USER_ID, "todo", 50, 0]

const numbered = (text) => {
  let n = 0
  return text.replace(/\?/g, () => `$${++n}`)
}

/** The same statement, whitespace aside, with `?` or `$n` placeholders. */
export const sameStatement = (a, b) => {
  const norm = (t) => numbered(t).replace(/\s+/g, " ").trim().toLowerCase()
  return norm(a) === norm(b)
}

/** `EXPLAIN QUERY PLAN` of the list query on a SQLite file (opened read-write so it stays one file; nothing is written). */
export const explainSqlite = (file) => {
  const db = new Database(file, { fileMustExist: true })
  try {
    const rows = db.prepare(`EXPLAIN QUERY PLAN ${LIST_SQL}`).all(LIST_PARAMS)
    const depth = new Map([[0, -1]])
    const lines = rows.map((r) => {
      const d = (depth.get(r.parent) ?? -1) + 1
      depth.set(r.id, d)
      return `${"  ".repeat(d)}${r.detail}`
    })
    // The query's own time in process, without HTTP: the median of 200 runs.
    const stmt = db.prepare(LIST_SQL)
    const times = []
    for (let i = 0; i < 200; i++) {
      const t0 = performance.now()
      stmt.all(LIST_PARAMS)
      times.push(performance.now() - t0)
    }
    times.sort((a, b) => a - b)
    return { text: lines.join("\n"), medianMs: times[100] }
  } finally {
    db.close()
  }
}

/** Both plans of the list query on a PostgreSQL database (the connection is closed before the answer). */
export const explainPg = async (url) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(`PREPARE bench_list AS ${LIST_SQL_PG_FIRST}`)
    const values = LIST_PARAMS.slice(0, 2).map((v) => `'${v.replace(/'/g, "''")}'`)
    const explain = async () => {
      const r = await client.query(`EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_list(${values.join(", ")})`)
      return r.rows.map((row) => row["QUERY PLAN"]).join("\n")
    }
    const custom = await explain()
    await client.query("SET plan_cache_mode = force_generic_plan")
    const generic = await explain()
    return { custom, generic }
  } finally {
    await client.end()
  }
}
