/**
 * The per-group task counts behind a list's `total`, under concurrent writes on each store: tasks
 * moved back and forth between statuses and priorities by many requests at once (on PostgreSQL,
 * moves in opposite directions once deadlocked in the count trigger: a 500 after a second's
 * wait), PATCHes that keep a task in its group, and deletes. Every request succeeds and the counts
 * equal a COUNT(*) of the tasks afterwards, group by group.
 */
import { startTestServer, type TestServer, type TestUser, testStores } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

interface Group {
  readonly owner_id: string
  readonly project_id: string
  readonly status: string
  readonly priority: string
  readonly n: number
}

const groups = async (s: TestServer) => {
  const counted = await s.query<Group>(
    "SELECT owner_id, project_id, status, priority, n FROM task_counts WHERE n <> 0 ORDER BY owner_id, project_id, status, priority"
  )
  const actual = await s.query<Group>(
    "SELECT owner_id, COALESCE(project_id, '') AS project_id, status, priority, COUNT(*) AS n FROM tasks GROUP BY owner_id, COALESCE(project_id, ''), status, priority ORDER BY owner_id, project_id, status, priority"
  )
  const plain = (rows: ReadonlyArray<Group>) => rows.map((row) => ({ ...row, n: Number(row.n) }))
  return { counted: plain(counted), actual: plain(actual) }
}

describe.each(testStores())("task counts under concurrent writes on %s", (store) => {
  let s: TestServer
  let alice: TestUser

  beforeAll(async () => {
    s = await startTestServer({ store })
    alice = await s.createUser()
  })
  afterAll(() => s.close())

  it("stay exact while many requests move tasks in opposite directions at once", async () => {
    const ids: Array<number> = []
    for (let i = 0; i < 12; i++) {
      const r = await s.request<{ id: number }>("POST", "/api/tasks", {
        key: alice.key,
        body: { title: `Mover ${i}`, priority: i % 2 === 0 ? "low" : "high" }
      })
      expect(r.status).toBe(201)
      ids.push(r.body.id)
    }
    // Even tasks go todo -> in_progress -> todo ..., odd ones the other way round, all at once.
    const statuses = ["todo", "in_progress"] as const
    const requests: Array<Promise<{ status: number; text: string }>> = []
    for (let round = 0; round < 12; round++) {
      for (const [i, id] of ids.entries()) {
        const status = statuses[(round + i) % 2]
        const priority = (round + i) % 3 === 0 ? "urgent" : i % 2 === 0 ? "low" : "high"
        requests.push(s.request("PATCH", `/api/tasks/${id}`, { key: alice.key, body: { status, priority } }))
      }
    }
    const answers = await Promise.all(requests)
    expect(answers.filter((a) => a.status !== 200).map((a) => `${a.status} ${a.text}`)).toEqual([])
    const { counted, actual } = await groups(s)
    expect(counted).toEqual(actual)
  }, 60_000)

  it("stay exact through changes that keep a task in its group, and through deletes", async () => {
    const made = await s.request<{ id: number; status: string; priority: string }>("POST", "/api/tasks", {
      key: alice.key,
      body: { title: "Stays", labels: ["one"] }
    })
    const id = made.body.id
    const before = await groups(s)
    for (const body of [
      { labels: ["two", "three"] },
      { title: "Still stays" },
      { status: made.body.status },
      { priority: made.body.priority, description: "same group" }
    ]) {
      const r = await s.request("PATCH", `/api/tasks/${id}`, { key: alice.key, body })
      expect(r.status, JSON.stringify(body)).toBe(200)
    }
    const after = await groups(s)
    expect(after.counted).toEqual(before.counted)
    expect(after.counted).toEqual(after.actual)

    const all = await s.query<{ id: number }>("SELECT id FROM tasks WHERE owner_id = ?", [alice.id])
    const deletes = await Promise.all(
      all.slice(0, 5).map((row) => s.request("DELETE", `/api/tasks/${row.id}`, { key: alice.key }))
    )
    expect(deletes.map((d) => d.status)).toEqual([200, 200, 200, 200, 200])
    const end = await groups(s)
    expect(end.counted).toEqual(end.actual)
    const total = await s.request<{ total: number }>("GET", "/api/tasks?limit=1", { key: alice.key })
    expect(total.body.total).toBe(all.length - 5)
  })
})
