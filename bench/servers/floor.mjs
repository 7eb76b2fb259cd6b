#!/usr/bin/env node
/**
 * The floor: the board's endpoints on bare `node:http`, doing per request exactly the work of
 * Taskwright (see `shared.mjs` for the store, the rules and every statement), with nothing in
 * between: a hand-written router, the body read into one buffer, `JSON.stringify` to the socket.
 * On SQLite a request runs synchronously from the first byte to the answer.
 *
 *   node bench/servers/floor.mjs --port 3001 --store sqlite --db path/to/taskwright.db [--events]
 *   node bench/servers/floor.mjs --port 3001 --store pg --database postgres://127.0.0.1/DB [--events]
 */
import { createServer } from "node:http"
import {
  badRequest,
  drive,
  errorBody,
  HttpError,
  listInput,
  MAX_BODY_BYTES,
  makePeer,
  openStore,
  PAYLOAD_TOO_LARGE,
  parseOptions,
  taskIdFrom,
  taskInput
} from "./shared.mjs"

const options = parseOptions(process.argv, "floor.mjs")
const store = await openStore(options)
const peer = makePeer(store, options)

const JSON_TYPE = "application/json; charset=utf-8"

const send = (res, status, body) => {
  const text = JSON.stringify(body)
  res.writeHead(status, ["content-type", JSON_TYPE, "content-length", String(Buffer.byteLength(text))])
  res.end(text)
}

const sendError = (res, e) => {
  if (!(e instanceof HttpError)) {
    console.error(e)
    e = new HttpError(500, "INTERNAL_ERROR", "internal server error")
  }
  if (e.status === 401) res.setHeader("www-authenticate", 'Bearer realm="taskwright"')
  send(res, e.status, errorBody(e))
}

/** Answers the work's result, now (SQLite) or when it settles (PostgreSQL). */
const answer = (res, status, work) => {
  const result = drive(work)
  if (result instanceof Promise) {
    result.then(
      (body) => send(res, status, body),
      (e) => sendError(res, e)
    )
  } else {
    send(res, status, result)
  }
}

/** The query string as an object; a name given twice becomes an array (refused by the checks). */
const parseQuery = (text) => {
  const out = {}
  if (text === "") return out
  for (const [k, v] of new URLSearchParams(text)) {
    const prev = out[k]
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v]
  }
  return out
}

/**
 * Reads a JSON body of at most 1 MiB, then calls `done(body)`; a body that is absent, not JSON
 * or of another type is `done(undefined, error)`: refused once the credential is checked
 * (DECISIONS: 401 and 403 before 400). Over 1 MiB: 413 at once (`tooLarge`).
 */
const readJson = (req, res, done) => {
  const declared = Number(req.headers["content-length"] ?? 0)
  if (declared > MAX_BODY_BYTES) return tooLarge(req, res, declared > DRAIN_LIMIT_BYTES)
  const chunks = []
  let size = 0
  let aborted = false
  req.on("data", (chunk) => {
    size += chunk.length
    if (aborted) {
      if (size > DRAIN_LIMIT_BYTES) req.socket.destroy()
      return
    }
    if (size > MAX_BODY_BYTES) {
      aborted = true
      tooLarge(req, res, false)
      return
    }
    chunks.push(chunk)
  })
  req.on("end", () => {
    if (aborted) return
    if (size === 0) return done(undefined, badRequest([{ path: "body", message: "a JSON body is required" }]))
    const type = req.headers["content-type"]
    if (type === undefined || !/^application\/(.+\+)?json\b/i.test(type)) {
      return done(undefined, badRequest([{ path: "body", message: "Content-Type must be application/json" }]))
    }
    let body
    try {
      body = JSON.parse(chunks.length === 1 ? chunks[0].toString("utf8") : Buffer.concat(chunks, size).toString("utf8"))
    } catch {
      return done(undefined, badRequest([{ path: "body", message: "the body is not valid JSON" }]))
    }
    done(body)
  })
  req.on("error", () => {
    aborted = true
  })
}

/**
 * 413 at once; the rest of the body is read and discarded up to 16 MiB (closing with it unread
 * resets the connection under a client still sending, which then loses the answer), and past
 * that the connection closes after the answer. As Taskwright does.
 */
const DRAIN_LIMIT_BYTES = 16 * 1024 * 1024
const tooLarge = (req, res, close) => {
  if (close) res.setHeader("connection", "close")
  sendError(res, PAYLOAD_TOO_LARGE)
  req.resume()
}

const READ = "tasks:read"
const WRITE = "tasks:write"

function* list(req, query) {
  const actor = yield* peer.authenticate(req.headers, READ, "GET")
  return yield* peer.listTasks(actor, listInput(parseQuery(query)))
}
function* get(req, rawId) {
  const actor = yield* peer.authenticate(req.headers, READ, "GET")
  return yield* peer.getTask(actor, taskIdFrom(rawId))
}
function* create(req, body, invalid) {
  const actor = yield* peer.authenticate(req.headers, WRITE, "POST")
  if (invalid) throw invalid
  return yield* peer.createTask(actor, taskInput(body, true))
}
function* update(req, rawId, body, invalid) {
  const actor = yield* peer.authenticate(req.headers, WRITE, "PATCH")
  const id = taskIdFrom(rawId)
  if (invalid) throw invalid
  return yield* peer.updateTask(actor, id, taskInput(body, false))
}
function* remove(req, rawId) {
  const actor = yield* peer.authenticate(req.headers, WRITE, "DELETE")
  return yield* peer.deleteTask(actor, taskIdFrom(rawId))
}

const PREFIX = "/api/tasks/"

const route = (req, res) => {
  const url = req.url
  const q = url.indexOf("?")
  const path = q === -1 ? url : url.slice(0, q)
  const method = req.method
  if (path === "/api/tasks") {
    if (method === "GET") return answer(res, 200, list(req, q === -1 ? "" : url.slice(q + 1)))
    if (method === "POST")
      return readJson(req, res, (body, invalid) => guarded(res, 201, () => create(req, body, invalid)))
  } else if (path.startsWith(PREFIX) && path.indexOf("/", PREFIX.length) === -1) {
    const id = path.slice(PREFIX.length)
    if (method === "GET") return answer(res, 200, get(req, id))
    if (method === "PATCH") {
      return readJson(req, res, (body, invalid) => guarded(res, 200, () => update(req, id, body, invalid)))
    }
    if (method === "DELETE") return answer(res, 200, remove(req, id))
  } else if (path === "/api/health" && method === "GET") {
    return send(res, 200, { status: "ok" })
  }
  throw new HttpError(404, "NOT_FOUND", `no route for ${method} ${path}`)
}

/** `answer`, with a synchronous failure (SQLite) turned into its error answer. */
const guarded = (res, status, work) => {
  try {
    answer(res, status, work())
  } catch (e) {
    sendError(res, e)
  }
}

const server = createServer((req, res) => {
  try {
    route(req, res)
  } catch (e) {
    sendError(res, e)
  }
})
server.listen(options.port, options.host, () => {
  console.log(`floor (${options.store}) listening on http://${options.host}:${server.address().port}`)
})

let closing = false
const shutdown = () => {
  if (closing) return
  closing = true
  server.close(async () => {
    await store.close()
    process.exit(0)
  })
  server.closeIdleConnections()
  setTimeout(() => server.closeAllConnections(), 3000).unref()
}
process.on("SIGTERM", shutdown)
process.on("SIGINT", shutdown)
