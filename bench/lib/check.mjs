/**
 * Before a server is loaded, the runner checks that it answers what the benchmark assumes, so
 * that a server that cuts a corner fails here instead of winning the race:
 *
 * - every rotated task id, read with the API key, and a sample read with the session cookie,
 *   answers the body read straight from the seed (an oracle independent of all three servers);
 * - the lists (the two the bench loads and three other filters and pages) answer the oracle's
 *   page and exact total;
 * - creates, with and without labels: the task answered and read back, labels folded
 *   case-insensitively to their stored names, a new label created with the default colour;
 * - updates of status, labels and other fields answer the get-task shape with the change;
 *   a delete answers `{success:true}` and the task is gone;
 * - every DECISIONS rule the bench's requests could skip: credentials (401 with
 *   `WWW-Authenticate`), scopes, validation (400 `BAD_REQUEST` with `details.fields`), paging
 *   bounds, malformed ids, unknown fields, ownership (403), existence (404), 413;
 * - afterwards, in the server's database: `task_counts` equals a count of `tasks`, the label
 *   made on the fly has its owner, folded name and colour, and (when the server appends events)
 *   every change has its event row and no refused request has one.
 *
 * A response may carry more fields than expected (DECISIONS allows a superset), but the expected
 * ones must be there with the expected values (a failure: the figures are not comparable) and
 * in the expected order (otherwise a warning only: clients do not depend on key order). Errors
 * are compared by status and code (messages are free).
 *
 * `level: "list"` (the single-client list phase) checks only a few task reads and the loaded list.
 */
import http from "node:http"
import Database from "better-sqlite3"
import pg from "pg"
import { defaultColor } from "../servers/shared.mjs"
import { credentialHeaders, LIST_PAGE_PATH, LIST_PATH, POST_BODY, POST_LABELS_BODY } from "./endpoints.mjs"
import { numberTypes } from "./pg.mjs"

/** The lists the check compares: the two the bench loads, then other filters and pages. */
export const LIST_CHECKS = [
  { path: LIST_PATH, where: { status: "todo" }, limit: 50, offset: 0 },
  { path: LIST_PAGE_PATH, where: { status: "todo" }, limit: 50, offset: 1000 },
  { path: "/api/tasks?priority=urgent&limit=20&offset=40", where: { priority: "urgent" }, limit: 20, offset: 40 },
  { path: "/api/tasks?limit=200", where: {}, limit: 200, offset: 0 },
  {
    path: "/api/tasks?project_id=proj_bench00000000000&status=done&limit=7&offset=0007",
    where: { project_id: "proj_bench00000000000", status: "done" },
    limit: 7,
    offset: 7
  }
]

const TASK_SQL =
  "SELECT id, title, description, status, priority, labels, project_id, created_at, updated_at FROM tasks WHERE id = ?"
const RUNS_SQL =
  "SELECT id, agent, status, started_at, completed_at FROM runs WHERE task_id = ? ORDER BY started_at, id"
const listSql = (where) => {
  const clause = ["owner_id = ?", ...Object.keys(where).map((k) => `${k} = ?`)].join(" AND ")
  return {
    page: `SELECT id, title, description, status, priority, labels, created_at, updated_at FROM tasks WHERE ${clause} ORDER BY id DESC LIMIT ? OFFSET ?`,
    total: `SELECT COALESCE(SUM(n), 0) AS total FROM task_counts WHERE ${clause}`
  }
}
/** `?` placeholders → `$1, $2, …` for PostgreSQL. */
const numbered = (text) => {
  let n = 0
  return text.replace(/\?/g, () => `$${++n}`)
}

/** Expected bodies: every rotated task with its runs, and each checked list. */
const buildOracle = async (query, userId, ids, lists) => {
  const tasks = new Map()
  let withRuns = 0
  for (const id of ids) {
    const [t] = await query.rows(TASK_SQL, [id])
    if (t === undefined) throw new Error(`oracle: task ${id} is not in the seed`)
    t.labels = JSON.parse(t.labels)
    t.agent_runs = await query.rows(RUNS_SQL, [id])
    if (t.agent_runs.length > 0) withRuns++
    tasks.set(id, t)
  }
  const pages = new Map()
  for (const l of lists) {
    const s = listSql(l.where)
    const params = [userId, ...Object.values(l.where)]
    const page = await query.rows(s.page, [...params, l.limit, l.offset])
    for (const t of page) t.labels = JSON.parse(t.labels)
    const [{ total }] = await query.rows(s.total, params)
    pages.set(l.path, { tasks: page, total, limit: l.limit, offset: l.offset })
  }
  return { tasks, withRuns, lists: pages }
}

/** Expected bodies, from a seeded SQLite file (opened read-write so it stays a single file; nothing is written). */
export const makeOracle = async (dbFile, userId, ids, lists = LIST_CHECKS) => {
  const db = new Database(dbFile, { fileMustExist: true })
  try {
    return await buildOracle({ rows: async (text, params) => db.prepare(text).all(params) }, userId, ids, lists)
  } finally {
    db.close()
  }
}

/** Expected bodies, from a seeded PostgreSQL database (closed before the answer: it is then a template). */
export const makePgOracle = async (url, userId, ids, lists = LIST_CHECKS) => {
  const client = new pg.Client({ connectionString: url, types: numberTypes })
  await client.connect()
  try {
    const query = { rows: async (text, values) => (await client.query(numbered(text), values)).rows }
    return await buildOracle(query, userId, ids, lists)
  } finally {
    await client.end()
  }
}

/**
 * Where `actual` departs from `expected` (null when it matches; extra fields are allowed). With
 * `order`, the expected keys must also come in the expected order.
 */
const mismatch = (expected, actual, order = false, path = "") => {
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) return `${path || "body"}: expected an array`
    if (actual.length !== expected.length) return `${path}: expected ${expected.length} items, got ${actual.length}`
    for (let i = 0; i < expected.length; i++) {
      const m = mismatch(expected[i], actual[i], order, `${path}[${i}]`)
      if (m) return m
    }
    return null
  }
  if (expected !== null && typeof expected === "object") {
    if (actual === null || typeof actual !== "object" || Array.isArray(actual))
      return `${path || "body"}: expected an object`
    const keys = Object.keys(actual)
    let last = -1
    for (const key of Object.keys(expected)) {
      const at = keys.indexOf(key)
      if (at === -1) return `${path}.${key}: missing`
      if (order && at < last) return `${path}.${key}: out of order (expected ${Object.keys(expected).join(", ")})`
      last = at
      const m = mismatch(expected[key], actual[key], order, `${path}.${key}`)
      if (m) return m
    }
    return null
  }
  return expected === actual ? null : `${path}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`
}

const request = (agent, port, { method = "GET", path, headers = {}, body }) =>
  new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method, path, headers, agent, timeout: 10_000 }, (res) => {
      const chunks = []
      res.on("data", (c) => chunks.push(c))
      res.on("end", () =>
        resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString() })
      )
      res.on("error", reject)
    })
    req.on("timeout", () => req.destroy(new Error("timeout")))
    req.on("error", (e) =>
      e.code === "ECONNRESET" || e.code === "EPIPE" ? resolve({ status: 0, text: "" }) : reject(e)
    )
    if (body !== undefined) req.end(body)
    else req.end()
  })

const parse = (text) => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** A JSON object sent as JSON: a 400 for it names the offending fields in `details.fields`. */
const fieldError = (r) => r.headers["content-type"] === "application/json" && r.body?.startsWith('{"')

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/
const json = (value) => JSON.stringify(value)
const x = (n, c = "x") => c.repeat(n)

/** Requests that must be refused, and how (status and code). */
const refusals = (seed, otherTaskId) => {
  const key = credentialHeaders("key", seed)
  const body = { ...key, "content-type": "application/json" }
  const post = (b, expect = [400, "BAD_REQUEST"]) => ({
    method: "POST",
    path: "/api/tasks",
    headers: body,
    body: b,
    expect
  })
  const get = (path, expect = [400, "BAD_REQUEST"], headers = key) => ({ method: "GET", path, headers, expect })
  const id = seed.getIds[1]
  const patch = (b, path = `/api/tasks/${id}`, expect = [400, "BAD_REQUEST"]) => ({
    method: "PATCH",
    path,
    headers: body,
    body: b,
    expect
  })
  const unauthorized = [401, "UNAUTHORIZED"]
  const forbidden = [403, "FORBIDDEN"]
  const notFound = [404, "NOT_FOUND"]
  // A key of the right shape whose checksum does not match, and one that matches but is unknown.
  const badChecksum = `${seed.secret.slice(0, -1)}${seed.secret.endsWith("A") ? "B" : "A"}`
  return [
    get(`/api/tasks/${id}`, unauthorized, {}),
    get(`/api/tasks/${id}`, unauthorized, { authorization: `Bearer ${badChecksum}` }),
    get(`/api/tasks/${id}`, unauthorized, { authorization: `Basic ${seed.secret}` }),
    get(`/api/tasks/${id}`, unauthorized, { cookie: `service_session=${x(43, "A")}` }),
    get(`/api/tasks/${id}`, unauthorized, { cookie: "service_session=short" }),
    { ...post(POST_BODY, unauthorized), headers: { "content-type": "application/json" } },
    get("/api/tasks/abc"),
    get("/api/tasks/0"),
    get("/api/tasks/01"),
    get("/api/tasks/1e3"),
    get("/api/tasks/-5"),
    get("/api/tasks/99999999999999999"),
    get("/api/tasks/999999999", notFound),
    get(`/api/tasks/${otherTaskId}`, forbidden),
    get("/api/tasks?limit=0"),
    get("/api/tasks?limit=201"),
    get("/api/tasks?limit=abc"),
    get("/api/tasks?limit=1.5"),
    get("/api/tasks?limit="),
    get("/api/tasks?offset=-1"),
    get("/api/tasks?offset=1234567890"),
    get("/api/tasks?status=nope"),
    get("/api/tasks?priority=HIGH"),
    get("/api/tasks?project_id=proj_x"),
    get("/api/tasks?status=todo&status=done"),
    get("/api/nope", notFound),
    post(json({ title: "   " })),
    post(json({ title: "" })),
    post(json({ title: x(501) })),
    post(json({ description: "no title" })),
    post(json({ title: 5 })),
    post(json({ title: "t", status: "todo" })),
    post(json({ title: "t", id: 5 })),
    post(json({ title: "t", created_at: "2025-01-01T00:00:00.000Z" })),
    post(json({ title: "t", bogus: 1 })),
    post(json({ title: "t", description: x(100_001) })),
    // 50,001 characters outside the BMP: 100,002 UTF-16 units, over the limit as JavaScript counts.
    post(json({ title: "t", description: x(50_001, "😀") })),
    post(json({ title: "t", description: null })),
    post(json({ title: "t", priority: "high " })),
    post(json({ title: "t", labels: "bug" })),
    post(json({ title: "t", labels: Array.from({ length: 51 }, (_, i) => `l${i}`) })),
    post(json({ title: "t", labels: [x(51)] })),
    post(json({ title: "t", labels: ["   "] })),
    post(json({ title: "t", labels: [1] })),
    post(json({ title: "t", project_id: "proj_nope" })),
    post(json({ title: "t", project_id: "proj_AAAAAAAAAAAAAAAA" }), notFound),
    post("[]"),
    post('"a title"'),
    post("{not json"),
    post(""),
    { ...post(POST_BODY), headers: { ...key, "content-type": "text/plain" } },
    patch("{}"),
    patch(json({ status: "nope" })),
    patch(json({ title: "  " })),
    patch(json({ created_at: "2025-01-01T00:00:00.000Z" })),
    patch(json({ status: "done" }), "/api/tasks/abc"),
    patch(json({ status: "done" }), "/api/tasks/999999999", notFound),
    patch(json({ status: "done" }), `/api/tasks/${otherTaskId}`, forbidden),
    { method: "DELETE", path: "/api/tasks/abc", headers: key, expect: [400, "BAD_REQUEST"] },
    { method: "DELETE", path: "/api/tasks/999999999", headers: key, expect: notFound },
    { method: "DELETE", path: `/api/tasks/${otherTaskId}`, headers: key, expect: forbidden },
    post(JSON.stringify({ title: "t", description: x(1024 * 1024) }), [413, "PAYLOAD_TOO_LARGE"])
  ]
}

/**
 * Reads what the server left in its database: `task_counts` against a count of `tasks`, and the
 * label made on the fly. `db`: `{ rows(sql, params) }` on the server's own database (SQLite file
 * or PostgreSQL copy).
 */
const checkDatabase = async (db, userId, label, { events, deleted }) => {
  const problems = []
  if (events) {
    // The check's changes: five creates (one label made on the fly), four updates, the delete.
    const expected = { "task.created": 5, "label.created": 1, "task.updated": 4, "task.deleted": deleted }
    const rows = await db.rows("SELECT type, COUNT(*) AS n FROM events GROUP BY type", [])
    const found = Object.fromEntries(rows.map((r) => [r.type, Number(r.n)]))
    for (const [type, n] of Object.entries(expected)) {
      if ((found[type] ?? 0) !== n) problems.push(`events: ${found[type] ?? 0} ${type}, expected ${n}`)
    }
  }
  const counts = await db.rows(
    `SELECT c.owner_id, c.project_id, c.status, c.priority, c.n, COALESCE(t.n, 0) AS actual
     FROM task_counts c LEFT JOIN (SELECT owner_id, COALESCE(project_id, '') AS project_id, status, priority, COUNT(*) AS n
       FROM tasks GROUP BY 1, 2, 3, 4) t
     ON t.owner_id = c.owner_id AND t.project_id = c.project_id AND t.status = c.status AND t.priority = c.priority
     WHERE c.n <> COALESCE(t.n, 0)`,
    []
  )
  for (const c of counts.slice(0, 3))
    problems.push(`task_counts ${c.owner_id}/${c.status}/${c.priority}: ${c.n}, tasks: ${c.actual}`)
  const missing = await db.rows(
    `SELECT COUNT(*) AS n FROM (SELECT owner_id, COALESCE(project_id, '') AS p, status, priority FROM tasks GROUP BY 1, 2, 3, 4) t
     WHERE NOT EXISTS (SELECT 1 FROM task_counts c WHERE c.owner_id = t.owner_id AND c.project_id = t.p AND c.status = t.status AND c.priority = t.priority)`,
    []
  )
  if (Number(missing[0].n) > 0) problems.push(`${missing[0].n} groups of tasks have no task_counts row`)
  const labels = await db.rows("SELECT id, name, color FROM labels WHERE owner_id = ? AND name_lower = ?", [
    userId,
    label.toLowerCase()
  ])
  if (labels.length !== 1) problems.push(`label ${label}: ${labels.length} rows for its folded name`)
  else {
    const l = labels[0]
    if (l.name !== label) problems.push(`label ${label}: stored as ${l.name}`)
    if (l.color !== defaultColor(label))
      problems.push(`label ${label}: colour ${l.color}, expected ${defaultColor(label)}`)
    if (!/^lbl_[0-9A-Za-z]{16}$/.test(l.id)) problems.push(`label ${label}: id ${l.id}`)
  }
  return problems
}

/** Opens the server's own database for {@link checkDatabase}. */
export const databaseReader = async ({ file, url }) => {
  if (file) {
    const db = new Database(file, { fileMustExist: true, readonly: true })
    return { rows: async (text, params) => db.prepare(text).all(params), close: async () => db.close() }
  }
  const client = new pg.Client({ connectionString: url, types: numberTypes })
  await client.connect()
  return { rows: async (text, params) => (await client.query(numbered(text), params)).rows, close: () => client.end() }
}

/**
 * Runs the checks against a live server. `seed` gives the credentials and ids, `oracle` the
 * expected bodies, `database` how to read the server's own database afterwards (full level), and
 * `events` whether the server appends to `events` (then each change must have its row).
 * Answers { ok, failureCount, failures, orderWarnings, warnings, counts }.
 */
export const checkServer = async ({ port, seed, oracle, level = "full", database, events = false }) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const key = credentialHeaders("key", seed)
  const session = credentialHeaders("session", seed)
  const pool = credentialHeaders("pool", seed)
  const failures = []
  const counts = {}
  const warnings = []
  let failureCount = 0
  let orderWarnings = 0
  const fail = (what, res, why) => {
    failureCount++
    if (failures.length < 20) failures.push({ what, status: res?.status, why, body: res?.text?.slice(0, 300) })
  }
  /** Wrong or missing values fail the check; the right values in another key order only warn. */
  const compare = (what, res, expected, actual) => {
    const m = mismatch(expected, actual)
    if (m) return fail(what, res, m)
    const o = mismatch(expected, actual, true)
    if (o) {
      orderWarnings++
      if (warnings.length < 5) warnings.push({ what, why: o })
    }
  }
  const send = async (kind, r) => {
    const res = await request(agent, port, r)
    counts[kind] ??= {}
    counts[kind][res.status] = (counts[kind][res.status] ?? 0) + 1
    return res
  }
  /** Sends `r` and compares its 2xx body with `expected` (a function of the body for fields only the answer knows). */
  const expectBody = async (kind, r, status, expected) => {
    const res = await send(kind, r)
    const what = `${r.method ?? "GET"} ${r.path}`
    if (res.status !== status) {
      fail(what, res, `status ${res.status}, expected ${status}`)
      return undefined
    }
    const body = parse(res.text)
    compare(what, res, typeof expected === "function" ? expected(body) : expected, body)
    return body
  }
  const withBody = (headers) => ({ ...headers, "content-type": "application/json" })
  const outcome = () => ({ ok: failureCount === 0, failureCount, failures, orderWarnings, warnings, counts })
  try {
    const ids = level === "full" ? seed.getIds : seed.getIds.slice(0, 20)
    for (const id of ids)
      await expectBody("get_task", { path: `/api/tasks/${id}`, headers: key }, 200, oracle.tasks.get(id))
    for (const id of ids.filter((_, i) => i % 20 === 0)) {
      await expectBody("get_task_session", { path: `/api/tasks/${id}`, headers: session }, 200, oracle.tasks.get(id))
    }
    for (const [path, expected] of oracle.lists) {
      if (level !== "full" && path !== LIST_PATH) continue
      await expectBody("list_tasks", { path, headers: key }, 200, expected)
    }
    if (level !== "full") return outcome()

    // The tenth task after the pool is the other user's (seed.mjs).
    for (const r of refusals(seed, seed.poolFirstId + seed.pool + 9)) {
      const res = await send("refusals", r)
      const [status, code] = r.expect
      const envelope = parse(res.text)
      const what = `${r.method} ${r.path} ${r.body === undefined ? "" : r.body.slice(0, 60)} (${Object.keys(r.headers).join(", ") || "no credential"})`
      if (res.status !== status || envelope?.error?.code !== code) {
        fail(what, res, `expected ${status} ${code}`)
      } else if (typeof envelope.error.message !== "string" || typeof envelope.error.details !== "object") {
        fail(what, res, "not the {error:{code,message,details}} envelope")
      } else if (status === 400 && fieldError(r) && !Array.isArray(envelope.error.details.fields)) {
        fail(what, res, "a validation error without details.fields")
      } else if (status === 401 && !/^Bearer/i.test(res.headers["www-authenticate"] ?? "")) {
        fail(what, res, "a 401 without WWW-Authenticate: Bearer")
      }
    }

    // Creates: the answer, then the same task read back.
    const created = (sent, labels) => (body) => ({
      id: body?.id,
      title: sent.title.trim(),
      description: sent.description ?? "",
      status: "backlog",
      priority: sent.priority ?? "medium",
      labels,
      project_id: sent.project_id ?? null,
      created_at: body?.created_at,
      updated_at: body?.created_at
    })
    const creates = [
      [JSON.parse(POST_BODY), []],
      [JSON.parse(POST_LABELS_BODY), ["bug", "backend"]],
      [
        { title: "  Padded title  ", labels: ["Bug", "bug", "  Check-Label  ", "backend", "BACKEND"] },
        ["bug", "Check-Label", "backend"]
      ],
      [{ title: "Same label again", labels: ["CHECK-label"], project_id: "proj_bench00000000000" }, ["Check-Label"]],
      [{ title: ` ${x(500)} `, priority: "low", project_id: null }, []]
    ]
    for (const [sent, labels] of creates) {
      const r = { method: "POST", path: "/api/tasks", headers: withBody(key), body: JSON.stringify(sent) }
      const body = await expectBody("create_task", r, 201, created(sent, labels))
      if (body === undefined) continue
      if (!Number.isInteger(body.id) || !ISO.test(body.created_at)) {
        fail("POST /api/tasks", { status: 201, text: JSON.stringify(body) }, "id or created_at malformed")
        continue
      }
      await expectBody("get_task", { path: `/api/tasks/${body.id}`, headers: key }, 200, {
        ...created(sent, labels)(body),
        agent_runs: []
      })
    }

    // Updates: the get-task shape with the change, runs included, `updated_at` moved on.
    const withRuns = seed.getIds.find((id) => oracle.tasks.get(id).agent_runs.length > 1) ?? seed.getIds[2]
    const before = oracle.tasks.get(withRuns)
    const status = before.status === "in_review" ? "todo" : "in_review"
    const updates = [
      [{ status }, { status }],
      [{ labels: ["UI", "perf", "ui", " Check-label "] }, { labels: ["ui", "perf", "Check-Label"] }],
      [
        { title: " Renamed ", description: "", priority: "urgent", project_id: null },
        { title: "Renamed", description: "", priority: "urgent", project_id: null }
      ],
      [
        { project_id: "proj_bench00000000000", labels: [] },
        { project_id: "proj_bench00000000000", labels: [] }
      ]
    ]
    let current = before
    for (const [sent, change] of updates) {
      const r = { method: "PATCH", path: `/api/tasks/${withRuns}`, headers: withBody(key), body: JSON.stringify(sent) }
      const body = await expectBody("update", r, 200, (b) => ({ ...current, ...change, updated_at: b?.updated_at }))
      if (body === undefined) continue
      if (!ISO.test(body.updated_at) || body.updated_at < current.updated_at) {
        fail(
          r.path,
          { status: 200, text: JSON.stringify(body) },
          `updated_at ${body.updated_at} before ${current.updated_at}`
        )
      }
      current = { ...current, ...change, updated_at: body.updated_at }
    }
    await expectBody("get_task", { path: `/api/tasks/${withRuns}`, headers: key }, 200, current)

    // Delete: the pool's last task (the load never reaches it), then it is gone.
    const last = seed.poolFirstId + seed.pool - 1
    if (seed.pool > 0) {
      await expectBody("delete_task", { method: "DELETE", path: `/api/tasks/${last}`, headers: pool }, 200, {
        success: true
      })
      for (const method of ["GET", "DELETE"]) {
        const res = await send("delete_task", { method, path: `/api/tasks/${last}`, headers: pool })
        if (res.status !== 404 || parse(res.text)?.error?.code !== "NOT_FOUND") {
          fail(`${method} /api/tasks/${last} after its delete`, res, "expected 404 NOT_FOUND")
        }
      }
      const res = await send("delete_task", { method: "DELETE", path: `/api/tasks/${last - 1}`, headers: key })
      if (res.status !== 403) fail(`DELETE /api/tasks/${last - 1} of another user`, res, "expected 403 FORBIDDEN")
    }

    if (database) {
      const db = await databaseReader(database)
      try {
        for (const p of await checkDatabase(db, seed.userId, "Check-Label", { events, deleted: seed.pool > 0 ? 1 : 0 }))
          fail("database", undefined, p)
      } finally {
        await db.close()
      }
    }
  } catch (e) {
    fail("check", undefined, String(e?.message ?? e))
  } finally {
    agent.destroy()
  }
  return outcome()
}
