#!/usr/bin/env node
/**
 * The floor on PostgreSQL: bare `node:http` + a `pg` pool (Taskwright's size, 10 connections)
 * running named prepared statements, doing per request exactly the work Taskwright does for the
 * benchmarked endpoints (hash the key, look it up, check the scope, validate, query, answer the
 * same JSON). The same server as `floor.mjs`, with `await` where the store answers. Minimal but
 * correct: every failure is an error envelope with the right status, nothing a client sends
 * gives a 500.
 *
 *   node bench/servers/floor-pg.mjs --port 3001 --database postgres://postgres@127.0.0.1:5432/DB [--host 127.0.0.1]
 */
import { createHash } from "node:crypto"
import { createServer } from "node:http"
import pg from "pg"

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? fallback : process.argv[i + 1]
}
const port = Number(arg("port", "3001"))
const host = arg("host", "127.0.0.1")
const databaseUrl = arg("database")
if (!databaseUrl) {
  console.error("usage: floor-pg.mjs --port <port> --database postgres://... [--host 127.0.0.1]")
  process.exit(2)
}

// int8 (tasks.id) and numeric (SUM) as JS numbers, as Taskwright's store parses them: the JSON
// then has numbers, as on SQLite.
pg.types.setTypeParser(20, Number)
pg.types.setTypeParser(1700, Number)
const pool = new pg.Pool({ connectionString: databaseUrl, max: 10 })
pool.on("error", (e) => console.error("idle connection failed:", e.message))

/** A named statement: parsed once per connection, then only bound and executed. */
const prepared = (name, text) => {
  const all = async (values) => (await pool.query({ name, text, values })).rows
  return { all, get: async (values) => (await all(values))[0] }
}
const authStmt = prepared(
  "auth",
  "SELECT k.id, k.user_id, k.scopes, k.expires_at, k.revoked_at, u.is_admin FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.secret_hash = $1"
)
const taskStmt = prepared(
  "task",
  "SELECT id, owner_id, project_id, title, description, status, priority, labels, created_at, updated_at FROM tasks WHERE id = $1"
)
const runsStmt = prepared(
  "runs",
  "SELECT id, agent, status, started_at, completed_at FROM runs WHERE task_id = $1 ORDER BY started_at, id"
)
const listStmt = prepared(
  "list",
  "SELECT id, title, description, status, priority, labels, created_at, updated_at FROM tasks WHERE owner_id = $1 AND status = $2 ORDER BY id DESC LIMIT $3 OFFSET $4"
)
const totalStmt = prepared(
  "total",
  "SELECT COALESCE(SUM(n), 0) AS total FROM task_counts WHERE owner_id = $1 AND status = $2"
)
const listAllStmt = prepared(
  "listAll",
  "SELECT id, title, description, status, priority, labels, created_at, updated_at FROM tasks WHERE owner_id = $1 ORDER BY id DESC LIMIT $2 OFFSET $3"
)
const totalAllStmt = prepared("totalAll", "SELECT COALESCE(SUM(n), 0) AS total FROM task_counts WHERE owner_id = $1")
const insertStmt = prepared(
  "insert",
  "INSERT INTO tasks (owner_id, project_id, title, description, status, priority, labels, created_at, updated_at) VALUES ($1, NULL, $2, $3, 'backlog', $4, $5, $6, $7) RETURNING id"
)

const STATUSES = new Set(["backlog", "todo", "in_progress", "in_review", "done", "cancelled"])
const PRIORITIES = new Set(["low", "medium", "high", "urgent"])
const CREATE_FIELDS = new Set(["title", "description", "priority", "labels"])
const TASK_ID = /^[1-9][0-9]{0,15}$/
const UINT = /^(0|[1-9][0-9]{0,15})$/
const MAX_BODY = 1024 * 1024

class HttpError extends Error {
  constructor(status, code, message, details = {}) {
    super(message)
    this.status = status
    this.code = code
    this.details = details
  }
}
const badRequest = (fields) => new HttpError(400, "BAD_REQUEST", "Invalid request", { fields })

const send = (res, status, body, extraHeaders) => {
  const text = JSON.stringify(body)
  const headers = { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(text) }
  res.writeHead(status, extraHeaders ? { ...headers, ...extraHeaders } : headers)
  res.end(text)
}
const sendError = (res, e) => {
  const err = e instanceof HttpError ? e : new HttpError(500, "INTERNAL_ERROR", "Internal server error")
  if (!(e instanceof HttpError)) console.error(e)
  const extra = err.status === 401 ? { "www-authenticate": "Bearer" } : undefined
  send(res, err.status, { error: { code: err.code, message: err.message, details: err.details } }, extra)
}

/** Authenticates the request and checks the endpoint's scope; answers { userId, admin }. */
const authenticate = async (req, scope) => {
  const header = req.headers.authorization
  if (header === undefined) throw new HttpError(401, "UNAUTHORIZED", "Missing credential")
  const space = header.indexOf(" ")
  if (space === -1 || header.slice(0, space).toLowerCase() !== "bearer") {
    throw new HttpError(401, "UNAUTHORIZED", "Expected a Bearer credential")
  }
  const secret = header.slice(space + 1).trim()
  if (!secret.startsWith("twk_")) throw new HttpError(401, "UNAUTHORIZED", "Invalid credential")
  const key = await authStmt.get([createHash("sha256").update(secret).digest("hex")])
  if (key === undefined) throw new HttpError(401, "UNAUTHORIZED", "Invalid credential")
  if (key.revoked_at !== null) throw new HttpError(401, "UNAUTHORIZED", "The API key has been revoked")
  if (key.expires_at !== null && key.expires_at <= new Date().toISOString()) {
    throw new HttpError(401, "UNAUTHORIZED", "The API key has expired")
  }
  const scopes = key.scopes.split(",")
  const admin = key.is_admin === true && scopes.includes("admin")
  if (!admin && !scopes.includes(scope)) {
    throw new HttpError(403, "FORBIDDEN", `This credential lacks the ${scope} scope`, { required_scope: scope })
  }
  return { userId: key.user_id, admin }
}

const getTask = async (req, res, rawId) => {
  const auth = await authenticate(req, "tasks:read")
  const id = TASK_ID.test(rawId) ? Number(rawId) : Number.NaN
  if (!Number.isSafeInteger(id)) throw badRequest([{ path: "id", message: "must be a positive integer" }])
  const t = await taskStmt.get([id])
  if (t === undefined) throw new HttpError(404, "NOT_FOUND", `Task ${id} not found`)
  if (t.owner_id !== auth.userId && !auth.admin)
    throw new HttpError(403, "FORBIDDEN", "This task belongs to another user")
  send(res, 200, {
    id: t.id,
    title: t.title,
    description: t.description,
    status: t.status,
    priority: t.priority,
    labels: JSON.parse(t.labels),
    project_id: t.project_id,
    created_at: t.created_at,
    updated_at: t.updated_at,
    agent_runs: await runsStmt.all([id])
  })
}

const listTasks = async (req, res, query) => {
  const auth = await authenticate(req, "tasks:read")
  const params = new URLSearchParams(query)
  const fields = []
  const status = params.get("status")
  if (status !== null && !STATUSES.has(status)) {
    fields.push({ path: "status", message: `must be one of ${[...STATUSES].join(", ")}` })
  }
  const limitText = params.get("limit")
  const limit = limitText === null ? 50 : UINT.test(limitText) ? Number(limitText) : Number.NaN
  if (!(limit >= 1 && limit <= 200)) fields.push({ path: "limit", message: "must be an integer from 1 to 200" })
  const offsetText = params.get("offset")
  const offset = offsetText === null ? 0 : UINT.test(offsetText) ? Number(offsetText) : Number.NaN
  if (!Number.isSafeInteger(offset)) fields.push({ path: "offset", message: "must be an integer >= 0" })
  if (fields.length > 0) throw badRequest(fields)
  const rows =
    status === null
      ? await listAllStmt.all([auth.userId, limit, offset])
      : await listStmt.all([auth.userId, status, limit, offset])
  for (const r of rows) r.labels = JSON.parse(r.labels)
  const { total } = status === null ? await totalAllStmt.get([auth.userId]) : await totalStmt.get([auth.userId, status])
  send(res, 200, { tasks: rows, total, limit, offset })
}

const validateCreate = (body) => {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw badRequest([{ path: "", message: "must be a JSON object" }])
  }
  const fields = []
  for (const k of Object.keys(body)) {
    if (!CREATE_FIELDS.has(k)) fields.push({ path: k, message: "is not allowed" })
  }
  const { title, description = "", priority = "medium", labels = [] } = body
  const trimmed = typeof title === "string" ? title.trim() : ""
  if (typeof title !== "string" || trimmed.length < 1 || trimmed.length > 500) {
    fields.push({ path: "title", message: "must be a string of 1 to 500 characters" })
  }
  if (typeof description !== "string" || description.length > 100_000) {
    fields.push({ path: "description", message: "must be a string of at most 100000 characters" })
  }
  if (typeof priority !== "string" || !PRIORITIES.has(priority)) {
    fields.push({ path: "priority", message: `must be one of ${[...PRIORITIES].join(", ")}` })
  }
  if (!Array.isArray(labels) || labels.length > 50) {
    fields.push({ path: "labels", message: "must be an array of at most 50 names" })
  } else {
    labels.forEach((l, i) => {
      if (typeof l !== "string" || l.length < 1 || l.length > 50) {
        fields.push({ path: `labels.${i}`, message: "must be a name of 1 to 50 characters" })
      }
    })
  }
  if (fields.length > 0) throw badRequest(fields)
  return { title: trimmed, description, priority, labels }
}

const createTask = async (res, auth, body) => {
  const input = validateCreate(body)
  const now = new Date().toISOString()
  const labels = JSON.stringify(input.labels)
  const { id } = await insertStmt.get([auth.userId, input.title, input.description, input.priority, labels, now, now])
  send(res, 201, {
    id,
    title: input.title,
    description: input.description,
    status: "backlog",
    priority: input.priority,
    labels: input.labels,
    project_id: null,
    created_at: now,
    updated_at: now
  })
}

/** Reads a JSON body of at most 1 MiB; calls back with the parsed value or an HttpError. */
const readJson = (req, done) => {
  const type = req.headers["content-type"]
  const length = req.headers["content-length"]
  if (length !== undefined && Number(length) > MAX_BODY) {
    done(new HttpError(413, "PAYLOAD_TOO_LARGE", "The request body exceeds 1 MiB"))
    return
  }
  if (type === undefined || !/^application\/json\s*(;|$)/i.test(type)) {
    done(badRequest([{ path: "", message: "the body must be JSON (Content-Type: application/json)" }]))
    return
  }
  const chunks = []
  let size = 0
  let failed = false
  req.on("data", (chunk) => {
    if (failed) return
    size += chunk.length
    if (size > MAX_BODY) {
      failed = true
      done(new HttpError(413, "PAYLOAD_TOO_LARGE", "The request body exceeds 1 MiB"))
      return
    }
    chunks.push(chunk)
  })
  req.on("end", () => {
    if (failed) return
    let value
    try {
      value = JSON.parse(chunks.length === 1 ? chunks[0].toString("utf8") : Buffer.concat(chunks).toString("utf8"))
    } catch {
      done(badRequest([{ path: "", message: "the body is not valid JSON" }]))
      return
    }
    done(null, value)
  })
  req.on("error", () => {
    failed = true
  })
}

const handle = async (req, res) => {
  const url = req.url
  const q = url.indexOf("?")
  const path = q === -1 ? url : url.slice(0, q)
  const query = q === -1 ? "" : url.slice(q + 1)
  const method = req.method
  if (path === "/api/health" && (method === "GET" || method === "HEAD")) {
    send(res, 200, { status: "ok" })
    return
  }
  if (path === "/api/tasks") {
    if (method === "GET") return listTasks(req, res, query)
    if (method === "POST") {
      // Authentication and scope come before reading the body (DECISIONS: order of checks).
      const auth = await authenticate(req, "tasks:write")
      readJson(req, (err, body) => {
        if (err) {
          if (err.status === 413) res.setHeader("connection", "close")
          sendError(res, err)
          return
        }
        createTask(res, auth, body).catch((e) => sendError(res, e))
      })
      return
    }
  } else if (path.startsWith("/api/tasks/") && method === "GET") {
    const id = path.slice("/api/tasks/".length)
    if (!id.includes("/")) return getTask(req, res, id)
  }
  throw new HttpError(404, "NOT_FOUND", `No route for ${method} ${path}`)
}

const server = createServer((req, res) => {
  handle(req, res).catch((e) => sendError(res, e))
})
// Fail fast when the database is not there, as Taskwright does.
await pool.query("SELECT 1")
server.listen(port, host, () => {
  console.log(`floor (PostgreSQL) listening on http://${host}:${server.address().port}`)
})

/**
 * Resolves once no query has run for 50 ms (at most 3 s): a request whose client went away may
 * still be between two of its queries, and ending the pool under it would fail them.
 */
const quiesce = async () => {
  const until = Date.now() + 3000
  let quietSince = Date.now()
  while (Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 10))
    if (pool.idleCount !== pool.totalCount || pool.waitingCount > 0) quietSince = Date.now()
    else if (Date.now() - quietSince >= 50) return
  }
}

let closing = false
const shutdown = () => {
  if (closing) return
  closing = true
  server.close(() => {
    quiesce()
      .then(() => pool.end())
      .then(
        () => process.exit(0),
        () => process.exit(1)
      )
  })
  server.closeIdleConnections()
  setTimeout(() => server.closeAllConnections(), 3000).unref()
}
process.on("SIGTERM", shutdown)
process.on("SIGINT", shutdown)
