#!/usr/bin/env node
/**
 * The peer: the benchmarked endpoints written with Fastify 5 the way a user would write them:
 * JSON schemas for params, query string, body and responses, an auth hook, an error handler
 * giving Taskwright's error envelope, and better-sqlite3 prepared statements. Same work per
 * request as Taskwright and the floor.
 *
 *   node bench/servers/fastify.mjs --port 3002 --db path/to/taskwright.db [--host 127.0.0.1]
 */
import { createHash } from "node:crypto"
import Ajv from "ajv"
import Database from "better-sqlite3"
import Fastify from "fastify"

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? fallback : process.argv[i + 1]
}
const port = Number(arg("port", "3002"))
const host = arg("host", "127.0.0.1")
const dbFile = arg("db")
if (!dbFile) {
  console.error("usage: fastify.mjs --port <port> --db <file> [--host 127.0.0.1]")
  process.exit(2)
}

// The same connection settings as Taskwright's SQLite store.
const db = new Database(dbFile, { fileMustExist: true })
db.pragma("journal_mode = WAL")
db.pragma("synchronous = NORMAL")
db.pragma("foreign_keys = ON")
db.pragma("busy_timeout = 5000")

const stmts = {
  auth: db.prepare(
    "SELECT k.id, k.user_id, k.scopes, k.expires_at, k.revoked_at, u.is_admin FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.secret_hash = ?"
  ),
  task: db.prepare(
    "SELECT id, owner_id, project_id, title, description, status, priority, labels, created_at, updated_at FROM tasks WHERE id = ?"
  ),
  runs: db.prepare(
    "SELECT id, agent, status, started_at, completed_at FROM runs WHERE task_id = ? ORDER BY started_at"
  ),
  list: db.prepare(
    "SELECT id, title, description, status, priority, labels, created_at, updated_at FROM tasks WHERE owner_id = ? AND status = ? ORDER BY id DESC LIMIT ? OFFSET ?"
  ),
  total: db.prepare("SELECT COALESCE(SUM(n), 0) AS total FROM task_counts WHERE owner_id = ? AND status = ?"),
  listAll: db.prepare(
    "SELECT id, title, description, status, priority, labels, created_at, updated_at FROM tasks WHERE owner_id = ? ORDER BY id DESC LIMIT ? OFFSET ?"
  ),
  totalAll: db.prepare("SELECT COALESCE(SUM(n), 0) AS total FROM task_counts WHERE owner_id = ?"),
  insert: db.prepare(
    "INSERT INTO tasks (owner_id, project_id, title, description, status, priority, labels, created_at, updated_at) VALUES (?, NULL, ?, ?, 'backlog', ?, ?, ?, ?) RETURNING id"
  )
}

const STATUSES = ["backlog", "todo", "in_progress", "in_review", "done", "cancelled"]
const PRIORITIES = ["low", "medium", "high", "urgent"]

class HttpError extends Error {
  constructor(statusCode, code, message, details = {}) {
    super(message)
    this.statusCode = statusCode
    this.code = code
    this.details = details
  }
}

// Fastify's default Ajv coerces types everywhere and silently drops unknown properties. The API
// refuses unknown fields and wrong types in bodies, so bodies get a strict instance; params and
// the query string (always strings on the wire) keep coercion and defaults.
const ajvOptions = { useDefaults: true, removeAdditional: false, allErrors: true, addUsedSchema: false }
const bodyAjv = new Ajv({ ...ajvOptions, coerceTypes: false })
const stringAjv = new Ajv({ ...ajvOptions, coerceTypes: "array" })

const app = Fastify({ logger: false, bodyLimit: 1024 * 1024 })
app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === "body" ? bodyAjv : stringAjv).compile(schema))
app.decorateRequest("auth", null)

// Authentication and the endpoint's scope come before validation (DECISIONS: order of checks),
// so they run in onRequest, before the body is even read.
app.addHook("onRequest", async (request) => {
  const scope = request.routeOptions.config.scope
  if (scope === undefined) return
  const header = request.headers.authorization
  if (header === undefined) throw new HttpError(401, "UNAUTHORIZED", "Missing credential")
  const space = header.indexOf(" ")
  if (space === -1 || header.slice(0, space).toLowerCase() !== "bearer") {
    throw new HttpError(401, "UNAUTHORIZED", "Expected a Bearer credential")
  }
  const secret = header.slice(space + 1).trim()
  if (!secret.startsWith("twk_")) throw new HttpError(401, "UNAUTHORIZED", "Invalid credential")
  const key = stmts.auth.get(createHash("sha256").update(secret).digest("hex"))
  if (key === undefined) throw new HttpError(401, "UNAUTHORIZED", "Invalid credential")
  if (key.revoked_at !== null) throw new HttpError(401, "UNAUTHORIZED", "The API key has been revoked")
  if (key.expires_at !== null && key.expires_at <= new Date().toISOString()) {
    throw new HttpError(401, "UNAUTHORIZED", "The API key has expired")
  }
  const scopes = key.scopes.split(",")
  const admin = key.is_admin === 1 && scopes.includes("admin")
  if (!admin && !scopes.includes(scope)) {
    throw new HttpError(403, "FORBIDDEN", `This credential lacks the ${scope} scope`, { required_scope: scope })
  }
  request.auth = { userId: key.user_id, admin }
})

const CODES = { 400: "BAD_REQUEST", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND", 413: "PAYLOAD_TOO_LARGE" }

app.setErrorHandler((error, request, reply) => {
  if (error instanceof HttpError) {
    if (error.statusCode === 401) reply.header("www-authenticate", "Bearer")
    return reply
      .code(error.statusCode)
      .send({ error: { code: error.code, message: error.message, details: error.details } })
  }
  if (error.validation) {
    const fields = error.validation.map((v) => ({
      path: [v.instancePath.slice(1).replaceAll("/", "."), v.params.missingProperty ?? v.params.additionalProperty]
        .filter(Boolean)
        .join("."),
      message: v.message
    }))
    return reply.code(400).send({ error: { code: "BAD_REQUEST", message: "Invalid request", details: { fields } } })
  }
  const status = error.statusCode
  if (status === 413) {
    return reply
      .code(413)
      .send({ error: { code: "PAYLOAD_TOO_LARGE", message: "The request body exceeds 1 MiB", details: {} } })
  }
  if (status >= 400 && status < 500) {
    // Malformed JSON, a body that is not JSON (415 in Fastify) and the like.
    const code = CODES[status] ?? "BAD_REQUEST"
    return reply.code(CODES[status] ? status : 400).send({ error: { code, message: error.message, details: {} } })
  }
  request.log.error(error)
  return reply.code(500).send({ error: { code: "INTERNAL_ERROR", message: "Internal server error", details: {} } })
})

app.setNotFoundHandler((request, reply) => {
  reply.code(404).send({
    error: { code: "NOT_FOUND", message: `No route for ${request.method} ${request.url.split("?")[0]}`, details: {} }
  })
})

const nullableString = { type: ["string", "null"] }
const labelsSchema = { type: "array", items: { type: "string" } }
const taskProperties = {
  id: { type: "integer" },
  title: { type: "string" },
  description: { type: "string" },
  status: { type: "string" },
  priority: { type: "string" },
  labels: labelsSchema
}

app.get("/api/health", async () => ({ status: "ok" }))

app.get(
  "/api/tasks/:id",
  {
    config: { scope: "tasks:read" },
    schema: {
      params: {
        type: "object",
        properties: { id: { type: "string", pattern: "^[1-9][0-9]{0,15}$" } },
        required: ["id"]
      },
      response: {
        200: {
          type: "object",
          properties: {
            ...taskProperties,
            project_id: nullableString,
            created_at: { type: "string" },
            updated_at: { type: "string" },
            agent_runs: {
              type: "array",
              items: {
                type: "object",
                properties: {
                  id: { type: "string" },
                  agent: { type: "string" },
                  status: { type: "string" },
                  started_at: { type: "string" },
                  completed_at: nullableString
                }
              }
            }
          }
        }
      }
    }
  },
  async (request) => {
    const id = Number(request.params.id)
    if (!Number.isSafeInteger(id)) {
      throw new HttpError(400, "BAD_REQUEST", "Invalid request", {
        fields: [{ path: "id", message: "must be a positive integer" }]
      })
    }
    const task = stmts.task.get(id)
    if (task === undefined) throw new HttpError(404, "NOT_FOUND", `Task ${id} not found`)
    if (task.owner_id !== request.auth.userId && !request.auth.admin) {
      throw new HttpError(403, "FORBIDDEN", "This task belongs to another user")
    }
    task.labels = JSON.parse(task.labels)
    task.agent_runs = stmts.runs.all(id)
    return task
  }
)

app.get(
  "/api/tasks",
  {
    config: { scope: "tasks:read" },
    schema: {
      querystring: {
        type: "object",
        properties: {
          status: { type: "string", enum: STATUSES },
          limit: { type: "integer", minimum: 1, maximum: 200, default: 50 },
          offset: { type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER, default: 0 }
        }
      },
      response: {
        200: {
          type: "object",
          properties: {
            tasks: {
              type: "array",
              items: {
                type: "object",
                properties: { ...taskProperties, created_at: { type: "string" }, updated_at: { type: "string" } }
              }
            },
            total: { type: "integer" },
            limit: { type: "integer" },
            offset: { type: "integer" }
          }
        }
      }
    }
  },
  async (request) => {
    const { status, limit, offset } = request.query
    const owner = request.auth.userId
    const tasks =
      status === undefined ? stmts.listAll.all(owner, limit, offset) : stmts.list.all(owner, status, limit, offset)
    for (const task of tasks) task.labels = JSON.parse(task.labels)
    const { total } = status === undefined ? stmts.totalAll.get(owner) : stmts.total.get(owner, status)
    return { tasks, total, limit, offset }
  }
)

app.post(
  "/api/tasks",
  {
    config: { scope: "tasks:write" },
    schema: {
      body: {
        type: "object",
        additionalProperties: false,
        required: ["title"],
        properties: {
          title: { type: "string", minLength: 1, maxLength: 500 },
          description: { type: "string", maxLength: 100_000, default: "" },
          priority: { type: "string", enum: PRIORITIES, default: "medium" },
          labels: { type: "array", maxItems: 50, items: { type: "string", minLength: 1, maxLength: 50 }, default: [] }
        }
      },
      response: {
        201: {
          type: "object",
          properties: {
            ...taskProperties,
            project_id: nullableString,
            created_at: { type: "string" },
            updated_at: { type: "string" }
          }
        }
      }
    }
  },
  async (request, reply) => {
    const { description, priority, labels } = request.body
    const title = request.body.title.trim()
    if (title.length === 0) {
      throw new HttpError(400, "BAD_REQUEST", "Invalid request", {
        fields: [{ path: "title", message: "must not be blank" }]
      })
    }
    const now = new Date().toISOString()
    const { id } = stmts.insert.get(request.auth.userId, title, description, priority, JSON.stringify(labels), now, now)
    reply.code(201)
    return {
      id,
      title,
      description,
      status: "backlog",
      priority,
      labels,
      project_id: null,
      created_at: now,
      updated_at: now
    }
  }
)

await app.listen({ port, host })
console.log(`fastify listening on http://${host}:${app.server.address().port}`)

let closing = false
const shutdown = async () => {
  if (closing) return
  closing = true
  setTimeout(() => process.exit(1), 5000).unref()
  await app.close()
  db.close()
  process.exit(0)
}
process.on("SIGTERM", shutdown)
process.on("SIGINT", shutdown)
