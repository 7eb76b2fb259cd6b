/**
 * What the bench's two peers share: the floor (`floor.mjs`, bare `node:http`) and the peer
 * (`fastify.mjs`, Fastify 5) differ only in their HTTP layer. Here, once for both and for both
 * stores:
 *
 * - the command line (`--store sqlite --db FILE` or `--store pg --database URL`, `--events`);
 * - the store: one better-sqlite3 connection (synchronous) or a `pg` pool of 10 (asynchronous),
 *   with every statement the peers run, written once with `?` placeholders (`$n` on PostgreSQL);
 * - the contract's rules (DECISIONS.md): credentials, scopes, validation, ownership, the error
 *   envelope;
 * - the work of each endpoint, as generator functions run by {@link drive}: a `yield` hands over
 *   a statement's result, a value on SQLite and a promise on PostgreSQL, so on SQLite a whole
 *   request runs synchronously (no promise, no microtask) and on PostgreSQL it awaits the pool.
 *
 * Every write is one transaction (a single statement is its own), and every statement runs to
 * completion: a statement that writes is read with `all()` or `run()`, never better-sqlite3's
 * `get()`, which stops at the first row and leaves the statement open (SQLite then never
 * checkpoints, and the write-ahead log grows by gigabytes). `storeGet` refuses a writing statement.
 */
import * as crypto from "node:crypto"
import { crc32 } from "node:zlib"

// ---------------------------------------------------------------------------------------------
// Command line

/** `--port`, `--host`, `--store sqlite|pg`, `--db FILE` (SQLite), `--database URL` (PostgreSQL), `--events`. */
export const parseOptions = (argv, name) => {
  const value = (flag) => {
    const i = argv.indexOf(`--${flag}`)
    return i === -1 ? undefined : argv[i + 1]
  }
  const store = value("store") ?? (value("database") ? "pg" : "sqlite")
  const options = {
    port: Number(value("port") ?? "3001"),
    host: value("host") ?? "127.0.0.1",
    store,
    db: value("db"),
    database: value("database"),
    events: argv.includes("--events")
  }
  const missing = store === "pg" ? !options.database : store === "sqlite" ? !options.db : true
  if (missing || !Number.isInteger(options.port)) {
    console.error(
      `usage: ${name} --port <port> [--host 127.0.0.1] (--store sqlite --db <file> | --store pg --database postgres://...) [--events]`
    )
    process.exit(2)
  }
  return options
}

// ---------------------------------------------------------------------------------------------
// Running the work of a request

/**
 * Runs a generator to its end: each yielded value is handed back at once, each yielded promise
 * when it settles (a rejection is thrown into the generator, so `try`/`finally` there works).
 * Answers the generator's result, or a promise of it once something was awaited.
 */
export const drive = (generator) => {
  const resume = (ok, input) => {
    let step = ok ? generator.next(input) : generator.throw(input)
    while (!step.done) {
      const value = step.value
      if (value instanceof Promise) {
        return value.then(
          (v) => resume(true, v),
          (e) => resume(false, e)
        )
      }
      step = generator.next(value)
    }
    return step.value
  }
  return resume(true, undefined)
}

/** Both results: at once on SQLite; on PostgreSQL the two statements run side by side on the pool. */
const both = (a, b) => (a instanceof Promise || b instanceof Promise ? Promise.all([a, b]) : [a, b])

// ---------------------------------------------------------------------------------------------
// Statements

/** `?` placeholders → `$1, $2, …` (the peers' SQL has no `?` inside a literal). */
const numbered = (text) => {
  let n = 0
  return text.replace(/\?/g, () => `$${++n}`)
}

/** A statement: its name (prepared once per connection) and its text for each dialect. */
const sql = (name, sqlite, pg = numbered(sqlite)) => ({ name, sqlite, pg })

const TASK_COLUMNS = "id, owner_id, project_id, title, description, status, priority, labels, created_at, updated_at"

const q = {
  key: sql(
    "key",
    "SELECT k.id, k.user_id, k.secret_hash, k.scopes, k.expires_at, k.revoked_at, u.is_admin FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.secret_hash = ?"
  ),
  session: sql(
    "session",
    "SELECT s.id, s.user_id, s.token_hash, s.expires_at, u.is_admin FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.token_hash = ?"
  ),
  // A task and its runs, oldest run first, in one statement (Taskwright's own query).
  taskWithRuns: sql(
    "taskWithRuns",
    "SELECT t.id, t.owner_id, t.project_id, t.title, t.description, t.status, t.priority, t.labels, t.created_at, t.updated_at, r.id AS run_id, r.agent AS run_agent, r.status AS run_status, r.started_at AS run_started_at, r.completed_at AS run_completed_at FROM tasks t LEFT JOIN runs r ON r.task_id = t.id WHERE t.id = ? ORDER BY r.started_at, r.id"
  ),
  runs: sql(
    "runs",
    "SELECT id, agent, status, started_at, completed_at FROM runs WHERE task_id = ? ORDER BY started_at, id"
  ),
  ownerOf: sql("ownerOf", "SELECT owner_id FROM tasks WHERE id = ?"),
  projectOwner: sql("projectOwner", "SELECT owner_id FROM projects WHERE id = ?"),
  insertTask: sql(
    "insertTask",
    "INSERT INTO tasks (owner_id, project_id, title, description, status, priority, labels, created_at, updated_at) VALUES (?, ?, ?, ?, 'backlog', ?, ?, ?, ?) RETURNING id"
  ),
  deleteOwn: sql(
    "deleteOwn",
    "DELETE FROM tasks WHERE id = ? AND owner_id = ? AND NOT EXISTS (SELECT 1 FROM runs WHERE task_id = ? AND status = 'running') RETURNING owner_id, project_id"
  ),
  deleteAny: sql(
    "deleteAny",
    "DELETE FROM tasks WHERE id = ? AND NOT EXISTS (SELECT 1 FROM runs WHERE task_id = ? AND status = 'running') RETURNING owner_id, project_id"
  ),
  labelByName: sql("labelByName", "SELECT name FROM labels WHERE owner_id = ? AND name_lower = ?"),
  insertLabel: sql(
    "insertLabel",
    "INSERT INTO labels (id, owner_id, name, name_lower, color, created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (owner_id, name_lower) DO NOTHING"
  )
}

/** The stored labels of an owner among `n` case-folded names: one statement for all of a request's labels. */
const labelsByName = new Map()
const labelsStatement = (n) => {
  let s = labelsByName.get(n)
  if (s === undefined) {
    const marks = new Array(n).fill("?").join(", ")
    s = sql(`labels${n}`, `SELECT name, name_lower FROM labels WHERE owner_id = ? AND name_lower IN (${marks})`)
    labelsByName.set(n, s)
  }
  return s
}

/**
 * The list page and its exact total, per combination of filters (owner unless admin, status,
 * priority, project): the statements Taskwright runs (`TasksRepo`), built on first use.
 */
const listStatements = new Map()
const listFor = (filter) => {
  const key = `${filter.ownerId === null ? "" : "o"}${filter.status === undefined ? "" : "s"}${filter.priority === undefined ? "" : "p"}${filter.projectId === undefined ? "" : "j"}`
  let found = listStatements.get(key)
  if (found === undefined) {
    const where = []
    if (filter.ownerId !== null) where.push("owner_id = ?")
    if (filter.status !== undefined) where.push("status = ?")
    if (filter.priority !== undefined) where.push("priority = ?")
    if (filter.projectId !== undefined) where.push("project_id = ?")
    const clause = where.length === 0 ? "" : ` WHERE ${where.join(" AND ")}`
    const columns = "id, title, description, status, priority, labels, created_at, updated_at"
    found = {
      // On PostgreSQL the page's ids come from the filter's index first, then the rows by id: the
      // plain form is planned as a backward walk of the primary key (Taskwright's TasksRepo, which
      // the peers follow: the same plans for everyone).
      page: sql(
        `list.${key}`,
        `SELECT ${columns} FROM tasks${clause} ORDER BY id DESC LIMIT ? OFFSET ?`,
        numbered(
          `SELECT ${columns} FROM tasks WHERE id = ANY (ARRAY(SELECT id FROM tasks${clause} ORDER BY id DESC LIMIT ? OFFSET ?)) ORDER BY id DESC`
        )
      ),
      count: sql(`count.${key}`, `SELECT COALESCE(SUM(n), 0) AS total FROM task_counts${clause}`)
    }
    listStatements.set(key, found)
  }
  return found
}

/** The fields a PATCH may change, in the order of their columns. */
const PATCH_FIELDS = ["title", "description", "status", "priority", "labels", "project_id"]

/**
 * `UPDATE tasks SET <the fields sent>, updated_at = MAX(?, updated_at) WHERE id = ? [AND owner_id = ?]
 * RETURNING <the row>`, per combination of fields and for owners and admins. Only the columns sent
 * change (the count trigger fires only when status, priority or project is among them), and
 * `updated_at` never goes back, as in Taskwright.
 */
const patchStatements = new Map()
const patchFor = (fields, owned) => {
  const key = `${fields.join(",")}|${owned ? "own" : "any"}`
  let s = patchStatements.get(key)
  if (s === undefined) {
    const set = fields.map((f) => `${f} = ?`).join(", ")
    const where = owned ? "id = ? AND owner_id = ?" : "id = ?"
    const text = (max) =>
      `UPDATE tasks SET ${set}${set ? ", " : ""}updated_at = ${max}(?, updated_at) WHERE ${where} RETURNING ${TASK_COLUMNS}`
    s = sql(`patch.${key}`, text("MAX"), numbered(text("GREATEST")))
    patchStatements.set(key, s)
  }
  return s
}

// ---------------------------------------------------------------------------------------------
// Stores

/**
 * The Taskwright-owned `events` table when the schema has one (the WebSocket feature), else the
 * peers' own, and the insert that appends one event. The peers fill the columns they know; a
 * column they do not know that has no default stops them with a message.
 */
const eventsTable = {
  sqlite:
    "CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT NOT NULL, owner_id TEXT NOT NULL, data TEXT NOT NULL, created_at TEXT NOT NULL)",
  pg: "CREATE TABLE IF NOT EXISTS events (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, type TEXT NOT NULL, owner_id TEXT NOT NULL, data TEXT NOT NULL, created_at TEXT NOT NULL)"
}
const EVENT_COLUMNS = {
  type: "type",
  owner_id: "owner",
  user_id: "owner",
  data: "data",
  payload: "data",
  created_at: "at",
  timestamp: "at"
}
const eventStatement = (columns) => {
  const known = []
  for (const c of columns) {
    const role = EVENT_COLUMNS[c.name]
    if (role !== undefined) known.push([c.name, role])
    else if (c.required) {
      throw new Error(
        `events.${c.name} has no default and the peers do not know what to put there: teach bench/servers/shared.mjs (EVENT_COLUMNS)`
      )
    }
  }
  for (const role of ["type", "owner", "data", "at"]) {
    if (!known.some(([, r]) => r === role)) throw new Error(`events has no column for the event's ${role}`)
  }
  const order = known.map(([, role]) => role)
  const names = known.map(([c]) => c).join(", ")
  const values = known.map(() => "?").join(", ")
  const statement = sql(
    "event",
    `INSERT INTO events (${names}) VALUES (${values})`,
    // As Taskwright on PostgreSQL: a transaction-scoped advisory lock (its key, 727002) taken by the
    // append and held until commit, so ids are handed out in commit order and a reader that has
    // seen id N has seen every id below it. SQLite has one writer at a time anyway.
    numbered(
      `WITH ordered AS (SELECT pg_advisory_xact_lock(727002)) INSERT INTO events (${names}) SELECT ${values} FROM ordered`
    )
  )
  return { statement, order }
}

/** One better-sqlite3 connection with Taskwright's settings; statements prepared once. */
const openSqlite = async (file, { events }) => {
  const { default: Database } = await import("better-sqlite3")
  const db = new Database(file, { fileMustExist: true })
  db.pragma("journal_mode = WAL")
  db.pragma("synchronous = NORMAL")
  db.pragma("foreign_keys = ON")
  db.pragma("busy_timeout = 5000")
  const prepared = new Map()
  const prepare = (s) => {
    let p = prepared.get(s.name)
    if (p === undefined) {
      p = db.prepare(s.sqlite)
      prepared.set(s.name, p)
    }
    return p
  }
  const store = {
    dialect: "sqlite",
    /** One row of a read (`get()` stops at the first row: only for statements that do not write). */
    get: (s, params) => {
      const p = prepare(s)
      if (!p.readonly) throw new Error(`${s.name} writes: read it with all() or run(), never get()`)
      return p.get(params)
    },
    all: (s, params) => prepare(s).all(params),
    run: (s, params) => prepare(s).run(params).changes,
    close: () => db.close()
  }
  // BEGIN IMMEDIATE, as Taskwright: the write lock is taken at the start, not on the first write.
  const immediate = db.transaction((body) => drive(body(store))).immediate
  store.transaction = (body) => immediate(body)
  if (events) {
    db.exec(eventsTable.sqlite)
    const columns = db
      .prepare(
        "SELECT name, \"notnull\" AND dflt_value IS NULL AND pk = 0 AS required FROM pragma_table_info('events')"
      )
      .all()
    store.event = eventStatement(columns)
  }
  return store
}

/** A `pg` pool of 10 (Taskwright's default) running named prepared statements. */
const openPg = async (url, { events }) => {
  const { default: pg } = await import("pg")
  // int8 (tasks.id) and numeric (SUM) as JS numbers, as Taskwright's store reads them.
  const types = {
    getTypeParser: (oid, format) => (oid === 20 || oid === 1700 ? Number : pg.types.getTypeParser(oid, format))
  }
  const pool = new pg.Pool({ connectionString: url, max: 10, types })
  pool.on("error", (e) => console.error("idle connection failed:", e.message))
  const on = (client) => ({
    dialect: "pg",
    get: (s, values) => client.query({ name: s.name, text: s.pg, values }).then((r) => r.rows[0]),
    all: (s, values) => client.query({ name: s.name, text: s.pg, values }).then((r) => r.rows),
    run: (s, values) => client.query({ name: s.name, text: s.pg, values }).then((r) => r.rowCount)
  })
  const store = on(pool)
  store.transaction = async (body) => {
    const client = await pool.connect()
    try {
      await client.query("BEGIN")
      const result = await drive(body(on(client)))
      await client.query("COMMIT")
      return result
    } catch (e) {
      await client.query("ROLLBACK").catch(() => {})
      throw e
    } finally {
      client.release()
    }
  }
  store.close = () => pool.end()
  if (events) {
    await pool.query(eventsTable.pg)
    const { rows } = await pool.query(
      `SELECT column_name AS name, is_nullable = 'NO' AND column_default IS NULL AND is_identity = 'NO' AS required
       FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'events'`
    )
    store.event = eventStatement(rows)
  }
  return store
}

/** Opens the store the options name. */
export const openStore = (options) =>
  options.store === "pg" ? openPg(options.database, options) : openSqlite(options.db, options)

// ---------------------------------------------------------------------------------------------
// Errors: the envelope `{"error":{"code","message","details"}}`

export class HttpError extends Error {
  constructor(status, code, message, details = {}) {
    super(message)
    this.status = status
    this.code = code
    this.details = details
  }
}

export const errorBody = (e) => ({ error: { code: e.code, message: e.message, details: e.details } })
export const badRequest = (fields) =>
  new HttpError(400, "BAD_REQUEST", `${fields[0].path}: ${fields[0].message}`, { fields })
const notFound = (resource, id) => new HttpError(404, "NOT_FOUND", `${resource} ${id} not found`, { resource, id })
const othersResource = (resource, id) =>
  new HttpError(403, "FORBIDDEN", `${resource} ${id} belongs to another user`, { resource, id })
export const PAYLOAD_TOO_LARGE = new HttpError(413, "PAYLOAD_TOO_LARGE", "the body is over 1048576 bytes", {
  limit: 1024 * 1024
})
export const MAX_BODY_BYTES = 1024 * 1024

// ---------------------------------------------------------------------------------------------
// Credentials

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** The 6-character checksum of an API key secret (CRC-32 of the rest, base62), as Taskwright makes it. */
export const apiKeyChecksum = (head) => {
  let n = crc32(head)
  let out = ""
  for (let i = 0; i < 6; i++) {
    out = BASE62[n % 62] + out
    n = Math.floor(n / 62)
  }
  return out
}
const API_KEY_SHAPE = /^twk_[0-9A-Za-z]{49}$/
/** Shape and checksum: a mistyped key is refused before any lookup. */
const wellFormedApiKey = (secret) =>
  API_KEY_SHAPE.test(secret) && apiKeyChecksum(secret.slice(0, -6)) === secret.slice(-6)

const sha256Hex =
  typeof crypto.hash === "function"
    ? (text) => crypto.hash("sha256", text, "hex")
    : (text) => crypto.createHash("sha256").update(text).digest("hex")

/** Constant-time comparison of two hex digests of public, fixed length. */
const digestsEqual = (a, b) => {
  if (a.length !== b.length) return false
  let difference = 0
  for (let i = 0; i < a.length; i++) difference |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return difference === 0
}

const bearerToken = (header) => /^Bearer[ ]+([^ ]+)[ ]*$/i.exec(header)?.[1]

export const SESSION_COOKIE = "service_session"
const SESSION_TOKEN = /^[A-Za-z0-9_-]{43}$/
/** The `service_session` token of a `Cookie` header, if it has a session token's shape. */
const sessionToken = (header) => {
  if (header === undefined) return undefined
  let at = header.indexOf(`${SESSION_COOKIE}=`)
  while (at !== -1) {
    if (at === 0 || header[at - 1] === " " || header[at - 1] === ";") {
      const start = at + SESSION_COOKIE.length + 1
      const end = header.indexOf(";", start)
      const value = (end === -1 ? header.slice(start) : header.slice(start, end)).trim()
      return SESSION_TOKEN.test(value) ? value : undefined
    }
    at = header.indexOf(`${SESSION_COOKIE}=`, at + 1)
  }
  return undefined
}

const SCOPES = ["tasks:read", "tasks:write", "projects:read", "projects:write", "agents:run"]
const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"])

/** True when a cookie-authenticated change names this service as its origin (CSRF defence). */
const sameOrigin = (headers) => {
  const claimed = headers.origin ?? headers.referer
  if (claimed === undefined) return false
  try {
    return new URL(claimed).host === headers.host
  } catch {
    return false
  }
}

const missingCredential = new HttpError(
  401,
  "UNAUTHORIZED",
  "authentication required: send Authorization: Bearer <API key>, or the service_session cookie"
)
const invalidCredential = new HttpError(401, "UNAUTHORIZED", "invalid or expired credential")
const csrf = new HttpError(
  403,
  "FORBIDDEN",
  "cross-site request refused: a cookie-authenticated change must come from this service's origin",
  { reason: "csrf" }
)

// ---------------------------------------------------------------------------------------------
// Validation (DECISIONS.md, "Validation")

export const STATUSES = ["backlog", "todo", "in_progress", "in_review", "done", "cancelled"]
export const PRIORITIES = ["low", "medium", "high", "urgent"]
export const TASK_ID = /^[1-9][0-9]{0,15}$/
export const PROJECT_ID = /^proj_[0-9A-Za-z]{16}$/
export const DIGITS = /^[0-9]{1,9}$/

/** A task id from a path segment: digits only, at most `Number.MAX_SAFE_INTEGER`; else 400. */
export const taskIdFrom = (text) => {
  const id = TASK_ID.test(text) ? Number(text) : Number.NaN
  if (!(id <= Number.MAX_SAFE_INTEGER)) throw badRequest([{ path: "id", message: "must be a positive integer" }])
  return id
}

/** A title: a string of 1 to 500 characters once trimmed (pushes the failure to `fields`). */
export const trimmedTitle = (value, fields) => {
  if (typeof value !== "string") {
    fields.push({ path: "title", message: "must be a string" })
    return undefined
  }
  const title = value.trim()
  if (title.length < 1 || title.length > 500)
    fields.push({ path: "title", message: "must be 1 to 500 characters once trimmed" })
  return title
}

/** Label names: at most 50, each a string of 1 to 50 characters once trimmed. */
export const trimmedLabels = (value, fields) => {
  if (!Array.isArray(value) || value.length > 50) {
    fields.push({ path: "labels", message: "must be an array of at most 50 names" })
    return undefined
  }
  const out = new Array(value.length)
  for (let i = 0; i < value.length; i++) {
    const name = typeof value[i] === "string" ? value[i].trim() : ""
    if (name.length < 1 || name.length > 50) fields.push({ path: `labels.${i}`, message: "must be 1 to 50 characters" })
    out[i] = name
  }
  return out
}

const oneOf = (value, allowed, path, fields) => {
  if (!allowed.includes(value)) fields.push({ path, message: `must be one of ${allowed.join(", ")}` })
}

const BODY_FIELDS = new Set(PATCH_FIELDS)

/** Every rule of a task body: unknown fields, types, lengths, enumerations. `create` needs a title. */
export const taskInput = (body, create) => {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw badRequest([{ path: "body", message: "must be a JSON object" }])
  }
  const fields = []
  const input = {}
  for (const key of Object.keys(body)) {
    // A task is created in the backlog: `status` only on a change.
    if (!BODY_FIELDS.has(key) || (create && key === "status")) fields.push({ path: key, message: "is not allowed" })
  }
  if (create || body.title !== undefined) input.title = trimmedTitle(body.title, fields)
  if (body.description !== undefined) {
    if (typeof body.description !== "string" || body.description.length > 100_000) {
      fields.push({ path: "description", message: "must be a string of at most 100,000 characters" })
    }
    input.description = body.description
  }
  if (body.status !== undefined && !create) {
    oneOf(body.status, STATUSES, "status", fields)
    input.status = body.status
  }
  if (body.priority !== undefined) {
    oneOf(body.priority, PRIORITIES, "priority", fields)
    input.priority = body.priority
  }
  if (body.labels !== undefined) input.labels = trimmedLabels(body.labels, fields)
  if (body.project_id !== undefined) {
    if (body.project_id !== null && !(typeof body.project_id === "string" && PROJECT_ID.test(body.project_id))) {
      fields.push({ path: "project_id", message: "must look like proj_ followed by 16 letters or digits, or null" })
    }
    input.project_id = body.project_id
  }
  if (!create && fields.length === 0 && Object.keys(input).length === 0) {
    fields.push({ path: "body", message: "send at least one field to change" })
  }
  if (fields.length > 0) throw badRequest(fields)
  return input
}

/** The list's query: status, priority, project_id, limit (1-200, default 50), offset (default 0). */
export const listInput = (query) => {
  const fields = []
  const one = (name) => {
    const v = query[name]
    if (Array.isArray(v)) {
      fields.push({ path: name, message: "must be given once" })
      return undefined
    }
    return v
  }
  const status = one("status")
  if (status !== undefined) oneOf(status, STATUSES, "status", fields)
  const priority = one("priority")
  if (priority !== undefined) oneOf(priority, PRIORITIES, "priority", fields)
  const projectId = one("project_id")
  if (projectId !== undefined && !PROJECT_ID.test(projectId)) {
    fields.push({ path: "project_id", message: "must look like proj_ followed by 16 letters or digits" })
  }
  const limitText = one("limit")
  const limit = limitText === undefined ? 50 : DIGITS.test(limitText) ? Number(limitText) : Number.NaN
  if (!(limit >= 1 && limit <= 200)) fields.push({ path: "limit", message: "must be a whole number from 1 to 200" })
  const offsetText = one("offset")
  const offset = offsetText === undefined ? 0 : DIGITS.test(offsetText) ? Number(offsetText) : Number.NaN
  if (!(offset >= 0)) fields.push({ path: "offset", message: "must be a whole number" })
  if (fields.length > 0) throw badRequest(fields)
  return { status, priority, projectId, limit, offset }
}

// ---------------------------------------------------------------------------------------------
// Labels

// Taskwright's palette and hash (`core/src/labels/Label.ts`): a label created on the fly gets
// the same colour in every server.
const PALETTE = [
  "#d73a4a",
  "#0075ca",
  "#a2eeef",
  "#7057ff",
  "#008672",
  "#e4e669",
  "#d876e3",
  "#fbca04",
  "#0e8a16",
  "#b60205"
]
export const defaultColor = (name) => {
  let h = 0
  for (const ch of name.toLowerCase()) h = (h * 31 + (ch.codePointAt(0) ?? 0)) >>> 0
  return PALETTE[h % PALETTE.length]
}

/** `lbl_` + 16 base62 characters from the CSPRNG, without modulo bias. */
const newLabelId = () => {
  let out = "lbl_"
  while (out.length < 20) {
    for (const byte of crypto.randomBytes(32)) {
      if (byte < 248) out += BASE62[byte % 62]
      if (out.length === 20) break
    }
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// The endpoints' work

/** The create answer; the get-task shape adds `agent_runs`. */
const createdBody = (t) => ({
  id: t.id,
  title: t.title,
  description: t.description,
  status: t.status,
  priority: t.priority,
  labels: JSON.parse(t.labels),
  project_id: t.project_id,
  created_at: t.created_at,
  updated_at: t.updated_at
})
const taskBody = (t, agentRuns) => {
  const task = createdBody(t)
  task.agent_runs = agentRuns
  return task
}

const SUCCESS = { success: true }

/**
 * The peers' work over one store, as generator functions for {@link drive}. `events`: append one
 * row to `events` in the transaction of every change (what Taskwright's WebSocket feature does).
 */
export const makePeer = (store, { events = false } = {}) => {
  const event = events ? store.event : undefined
  const appendEvent = (tx, type, ownerId, data, at) => {
    const values = { type, owner: ownerId, data: JSON.stringify(data), at }
    return tx.run(
      event.statement,
      event.order.map((role) => values[role])
    )
  }

  /**
   * The actor of a request (`Authorization: Bearer <API key>`, else the `service_session` cookie),
   * with the endpoint's scope; 401 and 403 otherwise. Keys: shape and checksum, SHA-256, one
   * lookup, constant-time compare, revoked and expiry. Sessions: SHA-256 of the token, one lookup,
   * constant-time compare, expiry; a change carried by a cookie must come from this origin.
   */
  function* authenticate(headers, scope, method) {
    const authorization = headers.authorization
    let actor
    if (authorization !== undefined) {
      const secret = bearerToken(authorization)
      if (secret === undefined || !wellFormedApiKey(secret)) throw invalidCredential
      const hash = sha256Hex(secret)
      const key = yield store.get(q.key, [hash])
      if (key === undefined || !digestsEqual(key.secret_hash, hash) || key.revoked_at !== null) throw invalidCredential
      if (key.expires_at !== null && key.expires_at <= new Date().toISOString()) throw invalidCredential
      const admin = Boolean(key.is_admin)
      const scopes = key.scopes.split(",")
      actor = { userId: key.user_id, admin: admin && scopes.includes("admin"), scopes }
    } else {
      const token = sessionToken(headers.cookie)
      if (token === undefined) throw missingCredential
      const hash = sha256Hex(token)
      const session = yield store.get(q.session, [hash])
      if (session === undefined || !digestsEqual(session.token_hash, hash)) throw invalidCredential
      if (session.expires_at <= new Date().toISOString()) throw invalidCredential
      if (!SAFE_METHODS.has(method) && !sameOrigin(headers)) throw csrf
      const admin = Boolean(session.is_admin)
      actor = { userId: session.user_id, admin, scopes: SCOPES }
    }
    if (!actor.admin && !actor.scopes.includes(scope)) {
      throw new HttpError(403, "FORBIDDEN", `this credential lacks the ${scope} scope`, { required_scope: scope })
    }
    return actor
  }

  const owns = (actor, ownerId) => actor.admin || actor.userId === ownerId

  function* checkProject(actor, projectId) {
    const project = yield store.get(q.projectOwner, [projectId])
    if (project === undefined) throw notFound("project", projectId)
    if (!owns(actor, project.owner_id)) throw othersResource("project", projectId)
  }

  /**
   * The owner's labels for `names` (already trimmed), created on the fly with the default colour:
   * names folded case-insensitively (the first spelling of a name wins), one statement reading
   * those already stored, an insert for each missing one (`ON CONFLICT DO NOTHING`: a concurrent
   * request may create it first, then it is read back). Answers the canonical names' JSON.
   */
  function* ensureLabels(tx, ownerId, names, at) {
    const wanted = []
    const folded = []
    for (const name of names) {
      const lower = name.toLowerCase()
      if (folded.includes(lower)) continue
      wanted.push(name)
      folded.push(lower)
    }
    if (wanted.length === 0) return "[]"
    const rows = yield tx.all(labelsStatement(folded.length), [ownerId, ...folded])
    const stored = new Map()
    for (const r of rows) stored.set(r.name_lower, r.name)
    const out = new Array(wanted.length)
    for (let i = 0; i < wanted.length; i++) {
      let name = stored.get(folded[i])
      if (name === undefined) {
        const label = { id: newLabelId(), name: wanted[i], color: defaultColor(wanted[i]), created_at: at }
        const inserted = yield tx.run(q.insertLabel, [label.id, ownerId, label.name, folded[i], label.color, at])
        if (inserted === 1) {
          name = label.name
          if (event) yield appendEvent(tx, "label.created", ownerId, label, at)
        } else {
          name = (yield tx.get(q.labelByName, [ownerId, folded[i]])).name
        }
      }
      out[i] = name
    }
    return JSON.stringify(out)
  }

  /** `GET /api/tasks/:id`: the task and its runs (one statement); 404, or 403 for another user's. */
  function* getTask(actor, id) {
    const rows = yield store.all(q.taskWithRuns, [id])
    const t = rows[0]
    if (t === undefined) throw notFound("task", id)
    if (!owns(actor, t.owner_id)) throw othersResource("task", id)
    const runs = []
    for (const r of rows) {
      if (r.run_id !== null) {
        runs.push({
          id: r.run_id,
          agent: r.run_agent,
          status: r.run_status,
          started_at: r.run_started_at,
          completed_at: r.run_completed_at
        })
      }
    }
    return taskBody(t, runs)
  }

  /** `GET /api/tasks`: a page, newest first, and the exact total from `task_counts`. */
  function* listTasks(actor, input) {
    const filter = {
      ownerId: actor.admin ? null : actor.userId,
      status: input.status,
      priority: input.priority,
      projectId: input.projectId
    }
    const s = listFor(filter)
    const params = []
    if (filter.ownerId !== null) params.push(filter.ownerId)
    if (filter.status !== undefined) params.push(filter.status)
    if (filter.priority !== undefined) params.push(filter.priority)
    if (filter.projectId !== undefined) params.push(filter.projectId)
    const [tasks, count] = yield both(
      store.all(s.page, [...params, input.limit, input.offset]),
      store.get(s.count, params)
    )
    for (const t of tasks) t.labels = JSON.parse(t.labels)
    return { tasks, total: count.total, limit: input.limit, offset: input.offset }
  }

  /**
   * `POST /api/tasks`: the project checked, the labels ensured, one `INSERT ... RETURNING id` (the
   * trigger counts it), in one transaction; without labels (and events) the insert alone.
   */
  function* createTask(actor, input) {
    const projectId = input.project_id ?? null
    if (projectId !== null) yield* checkProject(actor, projectId)
    const at = new Date().toISOString()
    const names = input.labels ?? []
    const write = function* (tx) {
      const labels = names.length === 0 ? "[]" : yield* ensureLabels(tx, actor.userId, names, at)
      const title = input.title
      const description = input.description ?? ""
      const priority = input.priority ?? "medium"
      const [row] = yield tx.all(q.insertTask, [actor.userId, projectId, title, description, priority, labels, at, at])
      const task = {
        id: row.id,
        title,
        description,
        status: "backlog",
        priority,
        labels: JSON.parse(labels),
        project_id: projectId,
        created_at: at,
        updated_at: at
      }
      if (event) yield appendEvent(tx, "task.created", actor.userId, task, at)
      return task
    }
    return names.length === 0 && !event ? yield* write(store) : yield store.transaction(write)
  }

  /** Why a write on task `id` found no row of the actor's: 404 or 403. */
  function* refuse(tx, actor, id) {
    const t = yield tx.get(q.ownerOf, [id])
    if (t === undefined || owns(actor, t.owner_id)) throw notFound("task", id)
    throw othersResource("task", id)
  }

  /**
   * `PATCH /api/tasks/:id`: one `UPDATE ... RETURNING` of the fields sent, guarded by the owner (no
   * row: 404 or 403), after the labels are ensured, in one transaction; then the task's runs.
   * An admin, or a change of project, reads the task's owner first (its labels, then the project).
   */
  function* updateTask(actor, id, patch) {
    let ownerId = actor.userId
    if (actor.admin || patch.project_id !== undefined) {
      const t = yield store.get(q.ownerOf, [id])
      if (t === undefined) throw notFound("task", id)
      if (!owns(actor, t.owner_id)) throw othersResource("task", id)
      ownerId = t.owner_id
      if (patch.project_id) yield* checkProject(actor, patch.project_id)
    }
    const at = new Date().toISOString()
    const fields = PATCH_FIELDS.filter((f) => patch[f] !== undefined)
    const write = function* (tx) {
      const values = []
      for (const f of fields) {
        values.push(f === "labels" ? yield* ensureLabels(tx, ownerId, patch.labels, at) : patch[f])
      }
      values.push(at, id)
      if (!actor.admin) values.push(ownerId)
      const [row] = yield tx.all(patchFor(fields, !actor.admin), values)
      if (row === undefined) yield* refuse(tx, actor, id)
      if (event) yield appendEvent(tx, "task.updated", row.owner_id, createdBody(row), at)
      return row
    }
    const row = patch.labels === undefined && !event ? yield* write(store) : yield store.transaction(write)
    return taskBody(row, yield store.all(q.runs, [id]))
  }

  /**
   * `DELETE /api/tasks/:id`: one `DELETE ... WHERE owner and no running run` (the trigger counts
   * it, the runs go by cascade); when it deleted nothing, why: 404, 403 or 409.
   */
  function* deleteTask(actor, id) {
    const write = function* (tx) {
      const [row] = actor.admin
        ? yield tx.all(q.deleteAny, [id, id])
        : yield tx.all(q.deleteOwn, [id, actor.userId, id])
      if (row === undefined) {
        // Nothing deleted: no such task (404), another user's (403), or one with a running run (409).
        const t = yield tx.get(q.ownerOf, [id])
        if (t === undefined) throw notFound("task", id)
        if (!owns(actor, t.owner_id)) throw othersResource("task", id)
        throw new HttpError(409, "CONFLICT", "the task has a running agent run; stop it first", {
          reason: "run_running"
        })
      }
      if (event) {
        yield appendEvent(
          tx,
          "task.deleted",
          row.owner_id,
          { id, project_id: row.project_id },
          new Date().toISOString()
        )
      }
      return SUCCESS
    }
    return event ? yield store.transaction(write) : yield* write(store)
  }

  return { authenticate, getTask, listTasks, createTask, updateTask, deleteTask }
}
