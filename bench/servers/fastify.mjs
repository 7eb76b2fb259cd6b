#!/usr/bin/env node
/**
 * The peer: the board's endpoints written with Fastify 5 as a careful user writes them: JSON
 * schemas for params, query string, bodies and responses (Ajv validates, fast-json-stringify
 * serialises), the credential checked in an `onRequest` hook before the body is read, an error
 * handler giving the `{"error":{"code","message","details"}}` envelope. The store, the statements
 * and the endpoints' work are the floor's (`shared.mjs`); handlers and the hook return the result
 * itself on SQLite (Fastify sends it without a promise) and a promise on PostgreSQL.
 *
 * What JSON Schema cannot say is checked after it: a title and label names are measured once
 * trimmed (Ajv has no trim).
 *
 *   node bench/servers/fastify.mjs --port 3002 --store sqlite --db path/to/taskwright.db [--events]
 *   node bench/servers/fastify.mjs --port 3002 --store pg --database postgres://127.0.0.1/DB [--events]
 */
import Ajv from "ajv"
import Fastify from "fastify"
import {
  badRequest,
  drive,
  errorBody,
  HttpError,
  MAX_BODY_BYTES,
  makePeer,
  openStore,
  PAYLOAD_TOO_LARGE,
  PRIORITIES,
  parseOptions,
  STATUSES,
  taskIdFrom,
  trimmedLabels,
  trimmedTitle
} from "./shared.mjs"

const options = parseOptions(process.argv, "fastify.mjs")
const store = await openStore(options)
const peer = makePeer(store, options)

// Fastify's default Ajv coerces types and silently drops unknown properties. The API refuses
// unknown fields and wrong types in bodies, so bodies get a strict instance; the query string and
// params are strings on the wire and are checked as strings. `unicode: false`: lengths count
// UTF-16 units, as JavaScript's `length` (and Taskwright) do.
const ajvOptions = { allErrors: true, removeAdditional: false, unicode: false, addUsedSchema: false }
const bodyAjv = new Ajv({ ...ajvOptions, coerceTypes: false, useDefaults: false })
const stringAjv = new Ajv({ ...ajvOptions, coerceTypes: false, useDefaults: false })

const app = Fastify({ logger: false, bodyLimit: MAX_BODY_BYTES })
app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === "body" ? bodyAjv : stringAjv).compile(schema))
app.decorateRequest("actor", null)

// DECISIONS' order of checks: the credential (401) and the endpoint's scope (403) before any
// validation (400), so before the body is parsed.
app.addHook("onRequest", (request, _reply, done) => {
  const scope = request.routeOptions.config.scope
  if (scope === undefined) return done()
  const actor = drive(peer.authenticate(request.headers, scope, request.method))
  if (actor instanceof Promise) {
    actor.then((a) => {
      request.actor = a
      done()
    }, done)
  } else {
    request.actor = actor
    done()
  }
})

app.setErrorHandler((error, _request, reply) => {
  if (error instanceof HttpError) {
    if (error.status === 401) reply.header("www-authenticate", 'Bearer realm="taskwright"')
    return reply.code(error.status).send(errorBody(error))
  }
  if (error.validation) {
    const fields = error.validation.map((v) => ({
      path:
        [
          error.validationContext === "body" ? "" : error.validationContext,
          v.instancePath.slice(1).replaceAll("/", "."),
          v.params.missingProperty ?? v.params.additionalProperty
        ]
          .filter(Boolean)
          .join(".") || "body",
      message: v.message
    }))
    return reply.code(400).send(errorBody(badRequest(fields)))
  }
  if (error.statusCode === 413) {
    reply.header("connection", "close")
    return reply.code(413).send(errorBody(PAYLOAD_TOO_LARGE))
  }
  if (error.statusCode >= 400 && error.statusCode < 500) {
    // A body that is not JSON, of another content type (415 in Fastify), empty, and the like.
    return reply.code(400).send(errorBody(badRequest([{ path: "body", message: error.message }])))
  }
  console.error(error)
  return reply.code(500).send(errorBody(new HttpError(500, "INTERNAL_ERROR", "internal server error")))
})

app.setNotFoundHandler((request, reply) => {
  reply
    .code(404)
    .send(errorBody(new HttpError(404, "NOT_FOUND", `no route for ${request.method} ${request.url.split("?")[0]}`)))
})

// Schemas -----------------------------------------------------------------------------------

const string = { type: "string" }
const nullableString = { type: ["string", "null"] }
const labelNames = { type: "array", items: string }
const head = {
  id: { type: "integer" },
  title: string,
  description: string,
  status: string,
  priority: string,
  labels: labelNames
}
const stamps = { created_at: string, updated_at: string }
const listItem = { type: "object", properties: { ...head, ...stamps } }
const createdTask = { type: "object", properties: { ...head, project_id: nullableString, ...stamps } }
const task = {
  type: "object",
  properties: {
    ...createdTask.properties,
    agent_runs: {
      type: "array",
      items: {
        type: "object",
        properties: { id: string, agent: string, status: string, started_at: string, completed_at: nullableString }
      }
    }
  }
}
const idParams = {
  type: "object",
  properties: { id: { type: "string", pattern: "^[1-9][0-9]{0,15}$" } },
  required: ["id"]
}
const projectId = { type: ["string", "null"], pattern: "^proj_[0-9A-Za-z]{16}$" }
const taskFields = {
  title: string,
  description: { type: "string", maxLength: 100_000 },
  priority: { type: "string", enum: PRIORITIES },
  // Each name's length is checked once trimmed (trimmedLabels).
  labels: { type: "array", maxItems: 50, items: string },
  project_id: projectId
}
const createBody = { type: "object", additionalProperties: false, required: ["title"], properties: taskFields }
const patchBody = {
  type: "object",
  additionalProperties: false,
  minProperties: 1,
  properties: { ...taskFields, status: { type: "string", enum: STATUSES } }
}
const listQuery = {
  type: "object",
  properties: {
    status: { type: "string", enum: STATUSES },
    priority: { type: "string", enum: PRIORITIES },
    project_id: { type: "string", pattern: "^proj_[0-9A-Za-z]{16}$" },
    // Digits only, 1-200 (leading zeros allowed, as in Taskwright), and offset up to 9 digits.
    limit: { type: "string", pattern: "^(?=[0-9]{1,9}$)0*([1-9][0-9]?|1[0-9][0-9]|200)$" },
    offset: { type: "string", pattern: "^[0-9]{1,9}$" }
  }
}

/** The trimmed title and label names of a body Ajv accepted; 400 when one is empty or too long once trimmed. */
const trimmed = (body) => {
  const fields = []
  const input = { ...body }
  if (body.title !== undefined) input.title = trimmedTitle(body.title, fields)
  if (body.labels !== undefined) input.labels = trimmedLabels(body.labels, fields)
  if (fields.length > 0) throw badRequest(fields)
  return input
}

const READ = { scope: "tasks:read" }
const WRITE = { scope: "tasks:write" }

// Routes --------------------------------------------------------------------------------------

app.get("/api/health", () => ({ status: "ok" }))

app.get(
  "/api/tasks",
  {
    config: READ,
    schema: {
      querystring: listQuery,
      response: {
        200: {
          type: "object",
          properties: {
            tasks: { type: "array", items: listItem },
            total: { type: "integer" },
            limit: { type: "integer" },
            offset: { type: "integer" }
          }
        }
      }
    }
  },
  (request) => {
    const { status, priority, project_id, limit, offset } = request.query
    const input = {
      status,
      priority,
      projectId: project_id,
      limit: limit === undefined ? 50 : Number(limit),
      offset: offset === undefined ? 0 : Number(offset)
    }
    return drive(peer.listTasks(request.actor, input))
  }
)

app.get("/api/tasks/:id", { config: READ, schema: { params: idParams, response: { 200: task } } }, (request) =>
  drive(peer.getTask(request.actor, taskIdFrom(request.params.id)))
)

app.post(
  "/api/tasks",
  { config: WRITE, schema: { body: createBody, response: { 201: createdTask } } },
  (request, reply) => {
    reply.code(201)
    return drive(peer.createTask(request.actor, trimmed(request.body)))
  }
)

app.patch(
  "/api/tasks/:id",
  { config: WRITE, schema: { params: idParams, body: patchBody, response: { 200: task } } },
  (request) => drive(peer.updateTask(request.actor, taskIdFrom(request.params.id), trimmed(request.body)))
)

app.delete(
  "/api/tasks/:id",
  {
    config: WRITE,
    schema: {
      params: idParams,
      response: { 200: { type: "object", properties: { success: { type: "boolean" } } } }
    }
  },
  (request) => drive(peer.deleteTask(request.actor, taskIdFrom(request.params.id)))
)

await app.listen({ port: options.port, host: options.host })
console.log(`fastify (${options.store}) listening on http://${options.host}:${app.server.address().port}`)

let closing = false
const shutdown = async () => {
  if (closing) return
  closing = true
  setTimeout(() => process.exit(1), 5000).unref()
  await app.close()
  await store.close()
  process.exit(0)
}
process.on("SIGTERM", shutdown)
process.on("SIGINT", shutdown)
