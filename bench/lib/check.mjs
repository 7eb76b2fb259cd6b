/**
 * Before each server is loaded, the runner checks that it answers what the benchmark assumes:
 * every rotated task id gives 200 with the right body, the list and the create answer right,
 * and a request without a credential is refused. The expected bodies come straight from the
 * seeded database (an oracle independent of all three servers). A response may carry more
 * fields than expected (DECISIONS.md allows a superset), but the expected ones must be there
 * with the expected values (a failure: the figures are not comparable) and in the expected
 * order (otherwise a warning only: clients do not depend on key order).
 */
import http from "node:http"
import Database from "better-sqlite3"
import pg from "pg"
import { ENDPOINTS, LIST_PATH, POST_BODY } from "./loadgen.mjs"
import { numberTypes } from "./pg.mjs"

/** Expected bodies, computed once from the seed file. */
export const makeOracle = (dbFile, userId, ids) => {
  // Not `readonly`: a read-only connection to a WAL database leaves -wal and -shm files behind,
  // and the seed must stay a single file to be copied. Nothing is written.
  const db = new Database(dbFile, { fileMustExist: true })
  try {
    const task = db.prepare(
      "SELECT id, title, description, status, priority, labels, project_id, created_at, updated_at FROM tasks WHERE id = ?"
    )
    const runs = db.prepare(
      "SELECT id, agent, status, started_at, completed_at FROM runs WHERE task_id = ? ORDER BY started_at"
    )
    const tasks = new Map()
    let withRuns = 0
    for (const id of ids) {
      const t = task.get(id)
      t.labels = JSON.parse(t.labels)
      t.agent_runs = runs.all(id)
      if (t.agent_runs.length > 0) withRuns++
      tasks.set(id, t)
    }
    const list = db
      .prepare(
        "SELECT id, title, description, status, priority, labels, created_at, updated_at FROM tasks WHERE owner_id = ? AND status = 'todo' ORDER BY id DESC LIMIT 50 OFFSET 0"
      )
      .all(userId)
    for (const t of list) t.labels = JSON.parse(t.labels)
    const total = db
      .prepare("SELECT COALESCE(SUM(n), 0) AS total FROM task_counts WHERE owner_id = ? AND status = 'todo'")
      .get(userId).total
    return { tasks, withRuns, list: { tasks: list, total, limit: 50, offset: 0 } }
  } finally {
    db.close()
  }
}

/**
 * Expected bodies, computed once from the seeded PostgreSQL database (its connection is closed
 * before the answer: the database is then copied as a template). Ids and sums as JS numbers.
 */
export const makePgOracle = async (url, userId, ids) => {
  const client = new pg.Client({ connectionString: url, types: numberTypes })
  await client.connect()
  try {
    const tasks = new Map()
    let withRuns = 0
    const found = await client.query(
      "SELECT id, title, description, status, priority, labels, project_id, created_at, updated_at FROM tasks WHERE id = ANY($1::bigint[])",
      [ids]
    )
    const byId = new Map(found.rows.map((t) => [t.id, t]))
    const runs = await client.query(
      "SELECT task_id, id, agent, status, started_at, completed_at FROM runs WHERE task_id = ANY($1::bigint[]) ORDER BY task_id, started_at, id",
      [ids]
    )
    const runsOf = new Map()
    for (const { task_id, ...run } of runs.rows) {
      if (!runsOf.has(task_id)) runsOf.set(task_id, [])
      runsOf.get(task_id).push(run)
    }
    for (const id of ids) {
      const t = byId.get(id)
      if (t === undefined) throw new Error(`oracle: task ${id} is not in the seed`)
      t.labels = JSON.parse(t.labels)
      t.agent_runs = runsOf.get(id) ?? []
      if (t.agent_runs.length > 0) withRuns++
      tasks.set(id, t)
    }
    const list = (
      await client.query(
        "SELECT id, title, description, status, priority, labels, created_at, updated_at FROM tasks WHERE owner_id = $1 AND status = 'todo' ORDER BY id DESC LIMIT 50 OFFSET 0",
        [userId]
      )
    ).rows
    for (const t of list) t.labels = JSON.parse(t.labels)
    const { total } = (
      await client.query(
        "SELECT COALESCE(SUM(n), 0) AS total FROM task_counts WHERE owner_id = $1 AND status = 'todo'",
        [userId]
      )
    ).rows[0]
    return { tasks, withRuns, list: { tasks: list, total, limit: 50, offset: 0 } }
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
    const order = Object.keys(actual)
    let last = -1
    for (const key of Object.keys(expected)) {
      const at = order.indexOf(key)
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
    req.on("error", reject)
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

/** Runs the checks against a live server. Answers { ok, failures: [...], counts }. */
export const checkServer = async ({ port, secret, ids, oracle }) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const auth = { authorization: `Bearer ${secret}` }
  const failures = []
  const counts = { get_task: {}, list_tasks: {}, create_task: {}, unauthenticated: {} }
  const note = (kind, status) => {
    counts[kind][status] = (counts[kind][status] ?? 0) + 1
  }
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
  try {
    for (const id of ids) {
      const res = await request(agent, port, { path: `/api/tasks/${id}`, headers: auth })
      note("get_task", res.status)
      if (res.status !== 200) {
        fail(`GET /api/tasks/${id}`, res, `status ${res.status}`)
        continue
      }
      compare(`GET /api/tasks/${id}`, res, oracle.tasks.get(id), parse(res.text))
    }

    const list = await request(agent, port, { path: LIST_PATH, headers: auth })
    note("list_tasks", list.status)
    if (list.status !== 200) fail(`GET ${LIST_PATH}`, list, `status ${list.status}`)
    else compare(`GET ${LIST_PATH}`, list, oracle.list, parse(list.text))

    const created = await request(agent, port, {
      method: "POST",
      path: ENDPOINTS.create_task.path,
      headers: { ...auth, "content-type": "application/json" },
      body: POST_BODY
    })
    note("create_task", created.status)
    if (created.status !== 201) fail("POST /api/tasks", created, `status ${created.status}`)
    else {
      const body = parse(created.text)
      const sent = JSON.parse(POST_BODY)
      const expected = {
        id: body?.id,
        title: sent.title,
        description: sent.description,
        status: "backlog",
        priority: sent.priority,
        labels: [],
        project_id: null,
        created_at: body?.created_at,
        updated_at: body?.updated_at
      }
      if (!Number.isInteger(body?.id)) fail("POST /api/tasks", created, ".id: not an integer")
      else if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(body.created_at)) {
        fail("POST /api/tasks", created, ".created_at: not an ISO timestamp")
      } else compare("POST /api/tasks", created, expected, body)
    }

    const anon = await request(agent, port, { path: `/api/tasks/${ids[0]}` })
    note("unauthenticated", anon.status)
    const envelope = parse(anon.text)
    if (anon.status !== 401 || envelope?.error?.code !== "UNAUTHORIZED") {
      fail(`GET /api/tasks/${ids[0]} without a credential`, anon, "expected 401 UNAUTHORIZED")
    }
  } catch (e) {
    fail("check", undefined, String(e?.message ?? e))
  } finally {
    agent.destroy()
  }
  return { ok: failureCount === 0, failureCount, failures, orderWarnings, warnings, counts }
}
