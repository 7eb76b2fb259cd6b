#!/usr/bin/env node
/**
 * The peer on PostgreSQL: the benchmarked endpoints written with Fastify 5 the way a user would
 * write them: JSON schemas for params, query string, body and responses, an auth hook, an error
 * handler giving Taskwright's error envelope, and a `pg` pool (Taskwright's size, 10
 * connections) running named prepared statements. The same server as `fastify.mjs`, with
 * `await` where the store answers. Same work per request as Taskwright and the floor.
 *
 *   node bench/servers/fastify-pg.mjs --port 3002 --database postgres://postgres@127.0.0.1:5432/DB [--host 127.0.0.1]
 */
import { createHash } from "node:crypto"
import Ajv from "ajv"
import Fastify from "fastify"
import pg from "pg"

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? fallback : process.argv[i + 1]
}
const port = Number(arg("port", "3002"))
const host = arg("host", "127.0.0.1")
const databaseUrl = arg("database")
if (!databaseUrl) {
  console.error("usage: fastify-pg.mjs --port <port> --database postgres://... [--host 127.0.0.1]")
  process.exit(2)
}

// int8 (tasks.id) and numeric (SUM) as JS numbers, as Taskwright's store parses them: the JSON
// then has numbers, as on SQLite.
pg.types.setTypeParser(20, Number)
pg.types.setTypeParser(1700, Number)
const pool = new pg.Pool({ connectionString: databaseUrl, max: 10 })
pool.on("error", (e) => console.error("idle connection failed:", e.message))

/** Named statements: each is parsed once per connection, then only bound and executed. */
const sql = {
  auth: "SELECT k.id, k.user_id, k.scopes, k.expires_at, k.revoked_at, u.is_admin FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.secret_hash = $1",
  task: "SELECT id, owner_id, project_id, title, description, status, priority, labels, created_at, updated_at FROM tasks WHERE id = $1",
  runs: "SELECT id, agent, status, started_at, completed_at FROM runs WHERE task_id = $1 ORDER BY started_at, id",
  list: "SELECT id, title, description, status, priority, labels, created_at, updated_at FROM tasks WHERE owner_id = $1 AND status = $2 ORDER BY id DESC LIMIT $3 OFFSET $4",
  total: "SELECT COALESCE(SUM(n), 0) AS total FROM task_counts WHERE owner_id = $1 AND status = $2",
  listAll:
    "SELECT id, title, description, status, priority, labels, created_at, updated_at FROM tasks WHERE owner_id = $1 ORDER BY id DESC LIMIT $2 OFFSET $3",
  totalAll: "SELECT COALESCE(SUM(n), 0) AS total FROM task_counts WHERE owner_id = $1",
  insert:
    "INSERT INTO tasks (owner_id, project_id, title, description, status, priority, labels, created_at, updated_at) VALUES ($1, NULL, $2, $3, 'backlog', $4, $5, $6, $7) RETURNING id"
}
const all = async (name, values) => (await pool.query({ name, text: sql[name], values })).rows
const get = async (name, values) => (await all(name, values))[0]

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
  const key = await get("auth", [createHash("sha256").update(secret).digest("hex")])
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
    const task = await get("task", [id])
    if (task === undefined) throw new HttpError(404, "NOT_FOUND", `Task ${id} not found`)
    if (task.owner_id !== request.auth.userId && !request.auth.admin) {
      throw new HttpError(403, "FORBIDDEN", "This task belongs to another user")
    }
    task.labels = JSON.parse(task.labels)
    task.agent_runs = await all("runs", [id])
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
      status === undefined
        ? await all("listAll", [owner, limit, offset])
        : await all("list", [owner, status, limit, offset])
    for (const task of tasks) task.labels = JSON.parse(task.labels)
    const { total } = status === undefined ? await get("totalAll", [owner]) : await get("total", [owner, status])
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
    const { id } = await get("insert", [
      request.auth.userId,
      title,
      description,
      priority,
      JSON.stringify(labels),
      now,
      now
    ])
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

// Fail fast when the database is not there, as Taskwright does.
await pool.query("SELECT 1")
await app.listen({ port, host })
console.log(`fastify (PostgreSQL) listening on http://${host}:${app.server.address().port}`)

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
const shutdown = async () => {
  if (closing) return
  closing = true
  setTimeout(() => process.exit(1), 8000).unref()
  await app.close()
  await quiesce()
  await pool.end()
  process.exit(0)
}
process.on("SIGTERM", shutdown)
process.on("SIGINT", shutdown)
