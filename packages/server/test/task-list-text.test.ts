/**
 * A list's answer, byte for byte. On SQLite the page is written as JSON by SQLite itself (its JSON
 * functions), not by `JSON.stringify`; the text must still be exactly what stringifying the stored
 * rows as list items gives, for every character a title, a description or a label can hold, every
 * filter, and a page past the end. Checked on every store against the rows read back.
 */
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startTestServer, type TestServer, type TestUser, testStores } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

interface StoredTask {
  readonly id: number | string
  readonly title: string
  readonly description: string
  readonly status: string
  readonly priority: string
  readonly labels: string
  readonly created_at: string
  readonly updated_at: string
}

// Every escape JSON has, the characters around them, and text outside the Basic Multilingual Plane.
const awkward = [
  'quote " backslash \\ slash / tab \t newline \n return \r',
  "backspace \b form feed \f bell \u0007 unit separator \u001f delete \u007f",
  "line separator \u2028 paragraph separator \u2029 byte order mark \ufeff",
  "é ß 中文 😀 👩‍💻 </script><!-- `tick` &amp; {}",
  "x".repeat(5_000)
]

describe.each(testStores())("a list's JSON text on %s", (store) => {
  let s: TestServer
  let alice: TestUser
  let projectDir: string

  beforeAll(async () => {
    s = await startTestServer({ store })
    alice = await s.createUser()
    projectDir = await mkdtemp(join(tmpdir(), "tw-list-text-"))
    const project = await s.request<{ id: string }>("POST", "/api/projects", {
      key: alice.key,
      body: { name: "Escapes", path: projectDir }
    })
    expect(project.status).toBe(201)
    for (const [i, text] of awkward.entries()) {
      const r = await s.request<{ id: number }>("POST", "/api/tasks", {
        key: alice.key,
        body: {
          title: text.slice(0, 200),
          description: text,
          labels: [text.slice(0, 40), `label ${i}`],
          priority: i % 2 === 0 ? "high" : "low",
          ...(i % 2 === 0 ? { project_id: project.body.id } : {})
        }
      })
      expect(r.status, r.text).toBe(201)
      if (i % 3 === 0) {
        const moved = await s.request("PATCH", `/api/tasks/${r.body.id}`, { key: alice.key, body: { status: "todo" } })
        expect(moved.status, moved.text).toBe(200)
      }
    }
  })
  afterAll(async () => {
    await s.close()
    await rm(projectDir, { recursive: true, force: true })
  })

  /** What `JSON.stringify` makes of the page as stored, newest first. */
  const expected = async (where: string, params: ReadonlyArray<string>, limit: number, offset: number) => {
    const rows = await s.query<StoredTask>(
      `SELECT id, title, description, status, priority, labels, created_at, updated_at FROM tasks WHERE owner_id = ?${where} ORDER BY id DESC`,
      [alice.id, ...params]
    )
    const tasks = rows.slice(offset, offset + limit).map((row) => ({
      id: Number(row.id),
      title: row.title,
      description: row.description,
      status: row.status,
      priority: row.priority,
      labels: JSON.parse(row.labels) as Array<string>,
      created_at: row.created_at,
      updated_at: row.updated_at
    }))
    return JSON.stringify({ tasks, total: rows.length, limit, offset })
  }

  it.each([
    ["", "", [], 50, 0],
    ["?status=todo", " AND status = ?", ["todo"], 50, 0],
    ["?priority=high&limit=2", " AND priority = ?", ["high"], 2, 0],
    ["?priority=low&offset=1", " AND priority = ?", ["low"], 50, 1],
    ["?limit=1&offset=3", "", [], 1, 3],
    ["?offset=100", "", [], 50, 100]
  ] as const)("GET /api/tasks%s is the stored rows stringified", async (query, where, params, limit, offset) => {
    const r = await s.request("GET", `/api/tasks${query}`, { key: alice.key })
    expect(r.status).toBe(200)
    expect(r.text).toBe(await expected(where, params, limit, offset))
  })

  it("filters by project the same way", async () => {
    const [project] = await s.query<{ id: string }>("SELECT id FROM projects WHERE owner_id = ?", [alice.id])
    const r = await s.request("GET", `/api/tasks?project_id=${project?.id}`, { key: alice.key })
    expect(r.status).toBe(200)
    expect(r.text).toBe(await expected(" AND project_id = ?", [project?.id ?? ""], 50, 0))
  })
})
