/**
 * The endpoints the bench loads: everything a board does. Each has a label for the report and a
 * request plan (`planFor`): the credential it sends and the requests a load generator cycles
 * through, or, for `DELETE`, a sequence of task ids never sent twice.
 */

/** The fixed bodies of the creates. */
export const POST_BODY = JSON.stringify({
  title: "Benchmark task",
  priority: "high",
  description: "Created by the Taskwright benchmark."
})
/** Two labels the seed holds, one in another case: both found by name, stored as `bug`, `backend`. */
export const POST_LABELS_BODY = JSON.stringify({
  title: "Benchmark task with labels",
  priority: "high",
  description: "Created by the Taskwright benchmark.",
  labels: ["Bug", "backend"]
})
export const LIST_PATH = "/api/tasks?status=todo&limit=50"
/** A later page of the same list: page 21. */
export const LIST_PAGE_PATH = "/api/tasks?status=todo&limit=50&offset=1000"

/**
 * `PATCH` status: each pass over the ids moves every task to the same next column of the board.
 * Every pass moves the same way on purpose: on PostgreSQL, concurrent moves in opposite directions
 * deadlock in the `task_counts` trigger today (each change locks its old group's count row, then
 * its new group's), in every server alike; the bench measures the write, not the deadlock.
 */
export const STATUS_CYCLE = ["todo", "in_progress", "in_review"]
/** `PATCH` labels: each pass swaps every task's labels (names the seed holds, some in another case). */
export const LABEL_SETS = [
  ["bug", "ui"],
  ["Docs", "perf"]
]

/**
 * `credential`: `key` (the bench user's API key), `session` (its `service_session` cookie) or
 * `pool` (the API key of the delete pool's owner).
 */
export const ENDPOINTS = {
  get_task: { label: "GET /api/tasks/:id", credential: "key", expect: 200 },
  get_task_session: { label: "GET /api/tasks/:id (session cookie)", credential: "session", expect: 200 },
  list_tasks: { label: `GET ${LIST_PATH}`, credential: "key", expect: 200 },
  list_tasks_page: { label: `GET ${LIST_PAGE_PATH}`, credential: "key", expect: 200 },
  create_task: { label: "POST /api/tasks (no labels)", credential: "key", expect: 201 },
  create_task_labels: { label: "POST /api/tasks (two labels)", credential: "key", expect: 201 },
  update_status: { label: "PATCH /api/tasks/:id {status}", credential: "key", expect: 200 },
  update_labels: { label: "PATCH /api/tasks/:id {labels}", credential: "key", expect: 200 },
  delete_task: { label: "DELETE /api/tasks/:id", credential: "pool", expect: 200 }
}

/** The endpoints that change the database, and so the write-ahead log. */
export const WRITES = new Set(["create_task", "create_task_labels", "update_status", "update_labels", "delete_task"])

/**
 * The endpoints measured over the long run: a write's or a list's rate leaves a short run too few
 * requests for its p99 (bench README, "Long runs of writes and lists").
 */
export const LONG_RUNS = new Set([...WRITES, "list_tasks", "list_tasks_page"])

/** The headers of a credential. */
export const credentialHeaders = (credential, seed) =>
  credential === "session"
    ? { cookie: `service_session=${seed.sessionToken}` }
    : { authorization: `Bearer ${credential === "pool" ? seed.poolSecret : seed.secret}` }

const JSON_BODY = { "content-type": "application/json" }

/**
 * What a load generator sends for `endpoint`: `{ headers, requests, start }` (cycled through from
 * `start`, each `{ method, path, body? }`) or `{ headers, sequence }` (`DELETE /api/tasks/<id>`
 * for `id` from `sequence.from` up, each sent once). `after`: how many requests of this endpoint
 * were sent before (a warm-up): the cycle goes on from there, so a status PATCH keeps moving
 * tasks the same way, and the sequence starts past what was already deleted.
 */
export const planFor = (endpoint, seed, { after = 0 } = {}) => {
  const plan = planOf(endpoint, seed, after)
  if (plan.requests) plan.start = after % plan.requests.length
  return plan
}

const planOf = (endpoint, seed, after) => {
  const headers = credentialHeaders(ENDPOINTS[endpoint].credential, seed)
  const ids = seed.getIds
  switch (endpoint) {
    case "get_task":
    case "get_task_session":
      return { headers, requests: ids.map((id) => ({ method: "GET", path: `/api/tasks/${id}` })) }
    case "list_tasks":
      return { headers, requests: [{ method: "GET", path: LIST_PATH }] }
    case "list_tasks_page":
      return { headers, requests: [{ method: "GET", path: LIST_PAGE_PATH }] }
    case "create_task":
      return {
        headers: { ...headers, ...JSON_BODY },
        requests: [{ method: "POST", path: "/api/tasks", body: POST_BODY }]
      }
    case "create_task_labels":
      return {
        headers: { ...headers, ...JSON_BODY },
        requests: [{ method: "POST", path: "/api/tasks", body: POST_LABELS_BODY }]
      }
    case "update_status":
      return {
        headers: { ...headers, ...JSON_BODY },
        requests: STATUS_CYCLE.flatMap((status) =>
          ids.map((id) => ({ method: "PATCH", path: `/api/tasks/${id}`, body: JSON.stringify({ status }) }))
        )
      }
    case "update_labels":
      return {
        headers: { ...headers, ...JSON_BODY },
        requests: LABEL_SETS.flatMap((labels) =>
          ids.map((id) => ({ method: "PATCH", path: `/api/tasks/${id}`, body: JSON.stringify({ labels }) }))
        )
      }
    case "delete_task":
      return {
        headers,
        sequence: { from: seed.poolFirstId + after, to: seed.poolFirstId + seed.pool - 2 }
      }
    default:
      throw new Error(`unknown endpoint ${endpoint}`)
  }
}
