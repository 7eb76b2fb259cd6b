/**
 * The tasks, projects and labels API, tried as a new user would, against every store layer:
 * shapes, status codes, paging totals, filters, ownership, scopes, validation and 404s, with the
 * database checked after the fact.
 */
import { execFileSync } from "node:child_process"
import { existsSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { startTestServer, type TestServer, type TestUser, testStores } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

interface Envelope {
  readonly error: { readonly code: string; readonly message: string; readonly details: Record<string, unknown> }
}
type Task = Record<string, unknown> & { id: number }

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

const expectError = (r: { status: number; body: unknown }, status: number, code: string) => {
  expect(r.status).toBe(status)
  const body = r.body as Envelope
  expect(body.error.code).toBe(code)
  expect(typeof body.error.message).toBe("string")
  expect(body.error.details).toBeTypeOf("object")
}

describe.each(testStores())("API on %s", (store) => {
  let s: TestServer
  let alice: TestUser
  let bob: TestUser
  let reader: TestUser
  let projectDir: string

  beforeAll(async () => {
    s = await startTestServer({ store })
    alice = await s.createUser()
    bob = await s.createUser()
    reader = await s.createUser({ scopes: ["tasks:read", "projects:read"] })
    projectDir = await mkdtemp(join(tmpdir(), "tw-project-"))
  })
  afterAll(async () => {
    await s.close()
    await rm(projectDir, { recursive: true, force: true })
  })

  describe("health and documents", () => {
    it("answers health without credentials", async () => {
      const r = await s.request("GET", "/api/health")
      expect(r.status).toBe(200)
      expect(r.body).toEqual({ status: "ok" })
    })
    it("serves the OpenAPI document and the reference page", async () => {
      const r = await s.request<{ openapi: string; info: { version: string }; paths: Record<string, unknown> }>(
        "GET",
        "/api/openapi.json"
      )
      expect(r.status).toBe(200)
      expect(r.body.openapi).toMatch(/^3\./)
      expect(r.body.info.version).toBe(r.headers.get("x-taskwright-version"))
      expect(Object.keys(r.body.paths)).toEqual(
        expect.arrayContaining(["/api/tasks", "/api/tasks/{id}", "/api/projects", "/api/projects/{id}", "/api/labels"])
      )
      const docs = await s.request("GET", "/api/docs")
      expect(docs.status).toBe(200)
      expect(docs.headers.get("content-type")).toContain("text/html")
    })
    it("answers unknown routes 404 in the envelope", async () => {
      expectError(await s.request("GET", "/api/nope", { key: alice.key }), 404, "NOT_FOUND")
      // A path that exists with another method is 405, naming the methods it has.
      const wrong = await s.request("PUT", "/api/tasks", { key: alice.key })
      expectError(wrong, 405, "METHOD_NOT_ALLOWED")
      expect(wrong.headers.get("allow")).toBe("GET, HEAD, POST, OPTIONS")
    })
  })

  describe("authentication and scopes", () => {
    it("refuses a request without a credential with 401 and WWW-Authenticate", async () => {
      const r = await s.request("GET", "/api/tasks")
      expectError(r, 401, "UNAUTHORIZED")
      expect(r.headers.get("www-authenticate")).toMatch(/^Bearer/)
    })
    it("refuses a malformed or unknown key with 401", async () => {
      expectError(await s.request("GET", "/api/tasks", { key: "nope" }), 401, "UNAUTHORIZED")
      const last = alice.key.slice(-1)
      const mistyped = `${alice.key.slice(0, -1)}${last === "x" ? "y" : "x"}`
      expectError(await s.request("GET", "/api/tasks", { key: mistyped }), 401, "UNAUTHORIZED")
      expectError(
        await s.request("GET", "/api/tasks", { headers: { authorization: `Basic ${alice.key}` } }),
        401,
        "UNAUTHORIZED"
      )
    })
    it("refuses a credential lacking the endpoint's scope with 403", async () => {
      const r = await s.request("POST", "/api/tasks", { key: reader.key, body: { title: "x" } })
      expectError(r, 403, "FORBIDDEN")
      expect((r.body as Envelope).error.details.required_scope).toBe("tasks:write")
      expectError(
        await s.request("POST", "/api/labels", { key: reader.key, body: { name: "x", color: "#000000" } }),
        403,
        "FORBIDDEN"
      )
      expectError(
        await s.request("POST", "/api/projects", { key: reader.key, body: { name: "x", path: projectDir } }),
        403,
        "FORBIDDEN"
      )
    })
    it("checks the scope before validating the body (403 before 400)", async () => {
      expectError(await s.request("POST", "/api/tasks", { key: reader.key, body: { nope: 1 } }), 403, "FORBIDDEN")
    })
  })

  describe("tasks", () => {
    it("creates a task with defaults and answers 201 with the spec's fields", async () => {
      const r = await s.request<Task>("POST", "/api/tasks", {
        key: alice.key,
        body: { title: "  Write the README  ", description: "for new users", labels: ["docs"] }
      })
      expect(r.status).toBe(201)
      expect(r.body).toMatchObject({
        title: "Write the README",
        description: "for new users",
        status: "backlog",
        priority: "medium",
        labels: ["docs"],
        project_id: null
      })
      expect(r.body.id).toBeTypeOf("number")
      expect(r.body.created_at).toMatch(ISO)
      expect(r.body.updated_at).toBe(r.body.created_at)
      const rows = await s.query<{ title: string; owner_id: string }>(
        "SELECT title, owner_id FROM tasks WHERE id = ?",
        [r.body.id]
      )
      expect(rows).toEqual([{ title: "Write the README", owner_id: alice.id }])
    })

    it("gets a task with project_id and agent_runs", async () => {
      const created = await s.request<Task>("POST", "/api/tasks", {
        key: alice.key,
        body: { title: "Get me", priority: "high" }
      })
      const r = await s.request<Task>("GET", `/api/tasks/${created.body.id}`, { key: alice.key })
      expect(r.status).toBe(200)
      expect(r.headers.get("content-type")).toBe("application/json; charset=utf-8")
      expect(r.body).toEqual({ ...created.body, agent_runs: [] })
    })

    it("lists a task's runs, oldest first, in agent_runs", async () => {
      const t = await s.request<Task>("POST", "/api/tasks", { key: alice.key, body: { title: "With runs" } })
      // Supervised by a live process of another machine: no recovery sweep takes the running one.
      const insert =
        "INSERT INTO runs (id, task_id, owner_id, agent, autonomy, branch, status, started_at, completed_at, output, supervisor, heartbeat_at) VALUES (?, ?, ?, ?, 'workspace-write', 'b', ?, ?, ?, '{}', 'elsewhere/1/test', '2999-01-01T00:00:00.000Z') RETURNING id"
      await s.query(insert, [
        "run_BBBBBBBBBBBBBBBB",
        t.body.id,
        alice.id,
        "codex",
        "running",
        "2026-01-02T00:00:00.000Z",
        null
      ])
      await s.query(insert, [
        "run_AAAAAAAAAAAAAAAA",
        t.body.id,
        alice.id,
        "claude-code",
        "completed",
        "2026-01-01T00:00:00.000Z",
        "2026-01-01T00:05:00.000Z"
      ])
      const r = await s.request<Task>("GET", `/api/tasks/${t.body.id}`, { key: alice.key })
      expect(r.body.agent_runs).toEqual([
        {
          id: "run_AAAAAAAAAAAAAAAA",
          agent: "claude-code",
          status: "completed",
          started_at: "2026-01-01T00:00:00.000Z",
          completed_at: "2026-01-01T00:05:00.000Z"
        },
        {
          id: "run_BBBBBBBBBBBBBBBB",
          agent: "codex",
          status: "running",
          started_at: "2026-01-02T00:00:00.000Z",
          completed_at: null
        }
      ])
      expect(r.body.title).toBe("With runs")
    })

    it("creates unknown labels on the fly and reuses existing ones case-insensitively", async () => {
      await s.request("POST", "/api/labels", { key: alice.key, body: { name: "Backend", color: "#112233" } })
      const r = await s.request<Task>("POST", "/api/tasks", {
        key: alice.key,
        body: { title: "Labelled", labels: ["backend", "Frontend", "frontend"] }
      })
      expect(r.status).toBe(201)
      expect(r.body.labels).toEqual(["Backend", "Frontend"])
      const labels = await s.request<{ labels: Array<{ name: string; color: string }> }>("GET", "/api/labels", {
        key: alice.key
      })
      const frontend = labels.body.labels.find((l) => l.name === "Frontend")
      expect(frontend?.color).toMatch(/^#[0-9a-f]{6}$/)
    })

    it("lists with filters, paging and exact totals; list items carry no project_id", async () => {
      const u = await s.createUser()
      for (let i = 0; i < 7; i++) {
        await s.request("POST", "/api/tasks", {
          key: u.key,
          body: { title: `t${i}`, priority: i % 2 === 0 ? "high" : "low" }
        })
      }
      const page = await s.request<{ tasks: Array<Task>; total: number; limit: number; offset: number }>(
        "GET",
        "/api/tasks?priority=high&limit=2&offset=1",
        { key: u.key }
      )
      expect(page.status).toBe(200)
      expect(page.body.total).toBe(4)
      expect(page.body.limit).toBe(2)
      expect(page.body.offset).toBe(1)
      expect(page.body.tasks.map((t) => t.title)).toEqual(["t4", "t2"])
      expect(page.body.tasks[0]).not.toHaveProperty("project_id")
      expect(page.body.tasks[0]).toHaveProperty("updated_at")
      const all = await s.request<{ tasks: Array<Task>; total: number; limit: number }>("GET", "/api/tasks", {
        key: u.key
      })
      expect(all.body.total).toBe(7)
      expect(all.body.limit).toBe(50)
      const none = await s.request<{ tasks: Array<Task>; total: number }>("GET", "/api/tasks?status=done", {
        key: u.key
      })
      expect(none.body).toMatchObject({ tasks: [], total: 0 })
      // A page past the end still says how many there are (on PostgreSQL the count then runs on its own).
      const past = await s.request<{ tasks: Array<Task>; total: number }>("GET", "/api/tasks?priority=high&offset=4", {
        key: u.key
      })
      expect(past.body).toMatchObject({ tasks: [], total: 4, offset: 4 })
      const last = await s.request<{ tasks: Array<Task>; total: number }>("GET", "/api/tasks?priority=high&offset=3", {
        key: u.key
      })
      expect(last.body).toMatchObject({ total: 4, offset: 3 })
      expect(last.body.tasks.map((t) => t.title)).toEqual(["t0"])
    })

    it("keeps totals right through status changes and deletes", async () => {
      const u = await s.createUser()
      const a = await s.request<Task>("POST", "/api/tasks", { key: u.key, body: { title: "a" } })
      await s.request("POST", "/api/tasks", { key: u.key, body: { title: "b" } })
      await s.request("PATCH", `/api/tasks/${a.body.id}`, { key: u.key, body: { status: "done" } })
      const done = await s.request<{ total: number }>("GET", "/api/tasks?status=done", { key: u.key })
      const backlog = await s.request<{ total: number }>("GET", "/api/tasks?status=backlog", { key: u.key })
      expect([done.body.total, backlog.body.total]).toEqual([1, 1])
      await s.request("DELETE", `/api/tasks/${a.body.id}`, { key: u.key })
      const after = await s.request<{ total: number }>("GET", "/api/tasks?status=done", { key: u.key })
      expect(after.body.total).toBe(0)
    })

    it("patches any editable field and answers the get-task shape", async () => {
      const t = await s.request<Task>("POST", "/api/tasks", { key: alice.key, body: { title: "Patch me" } })
      const r = await s.request<Task>("PATCH", `/api/tasks/${t.body.id}`, {
        key: alice.key,
        body: { status: "in_progress", priority: "urgent", title: "Patched", labels: ["x"] }
      })
      expect(r.status).toBe(200)
      expect(r.body).toMatchObject({
        status: "in_progress",
        priority: "urgent",
        title: "Patched",
        labels: ["x"],
        agent_runs: []
      })
      expect(String(r.body.updated_at) >= String(t.body.updated_at)).toBe(true)
    })

    it("deletes a task: 200 {success:true}, then 404", async () => {
      const t = await s.request<Task>("POST", "/api/tasks", { key: alice.key, body: { title: "Delete me" } })
      const r = await s.request("DELETE", `/api/tasks/${t.body.id}`, { key: alice.key })
      expect(r.status).toBe(200)
      expect(r.body).toEqual({ success: true })
      expectError(await s.request("GET", `/api/tasks/${t.body.id}`, { key: alice.key }), 404, "NOT_FOUND")
      expect(await s.query("SELECT id FROM tasks WHERE id = ?", [t.body.id])).toEqual([])
    })

    it("answers 403 for another user's task and lets an admin in", async () => {
      const t = await s.request<Task>("POST", "/api/tasks", { key: alice.key, body: { title: "Alice's" } })
      expectError(await s.request("GET", `/api/tasks/${t.body.id}`, { key: bob.key }), 403, "FORBIDDEN")
      expectError(
        await s.request("PATCH", `/api/tasks/${t.body.id}`, { key: bob.key, body: { status: "done" } }),
        403,
        "FORBIDDEN"
      )
      expectError(await s.request("DELETE", `/api/tasks/${t.body.id}`, { key: bob.key }), 403, "FORBIDDEN")
      const bobs = await s.request<{ tasks: Array<Task> }>("GET", "/api/tasks?limit=200", { key: bob.key })
      expect(bobs.body.tasks.some((x) => x.id === t.body.id)).toBe(false)
      const admin = await s.request<Task>("GET", `/api/tasks/${t.body.id}`, { key: s.adminKey })
      expect(admin.status).toBe(200)
      const adminList = await s.request<{ total: number }>("GET", "/api/tasks", { key: s.adminKey })
      expect(adminList.body.total).toBeGreaterThanOrEqual(1)
      const rows = await s.query<{ status: string }>("SELECT status FROM tasks WHERE id = ?", [t.body.id])
      expect(rows).toEqual([{ status: "backlog" }])
    })

    it("creates no labels for a PATCH refused with 403 or 404, and lets an admin change and delete", async () => {
      const t = await s.request<Task>("POST", "/api/tasks", { key: alice.key, body: { title: "Alice's labels" } })
      const body = { labels: ["refused-label-403"] }
      expectError(await s.request("PATCH", `/api/tasks/${t.body.id}`, { key: bob.key, body }), 403, "FORBIDDEN")
      expectError(
        await s.request("PATCH", "/api/tasks/999999", { key: bob.key, body: { labels: ["refused-label-404"] } }),
        404,
        "NOT_FOUND"
      )
      const refused = await s.query("SELECT name FROM labels WHERE name IN (?, ?)", [
        "refused-label-403",
        "refused-label-404"
      ])
      expect(refused).toEqual([])

      const changed = await s.request<Task>("PATCH", `/api/tasks/${t.body.id}`, {
        key: s.adminKey,
        body: { status: "done", labels: ["by-admin"] }
      })
      expect(changed.status).toBe(200)
      expect(changed.body).toMatchObject({ status: "done", labels: ["by-admin"] })
      // The label is the task owner's, not the admin's.
      const owners = await s.query<{ owner_id: string }>("SELECT owner_id FROM labels WHERE name = ?", ["by-admin"])
      expect(owners).toEqual([{ owner_id: alice.id }])
      const deleted = await s.request("DELETE", `/api/tasks/${t.body.id}`, { key: s.adminKey })
      expect(deleted.status).toBe(200)
      expect(await s.query("SELECT id FROM tasks WHERE id = ?", [t.body.id])).toEqual([])
      expectError(await s.request("DELETE", `/api/tasks/${t.body.id}`, { key: s.adminKey }), 404, "NOT_FOUND")
    })

    it("answers 404 for a well-formed missing id and 400 for a malformed one", async () => {
      expectError(await s.request("GET", "/api/tasks/999999", { key: alice.key }), 404, "NOT_FOUND")
      for (const bad of ["abc", "0", "-1", "1.5", "1e3", "0x10", "99999999999999999"]) {
        expectError(await s.request("GET", `/api/tasks/${bad}`, { key: alice.key }), 400, "BAD_REQUEST")
      }
    })

    it("refuses invalid bodies with 400 naming each field, and stores nothing", async () => {
      const before = await s.query<{ n: number }>("SELECT COUNT(*) AS n FROM tasks")
      const cases: Array<[unknown, string]> = [
        [{}, "title"],
        [{ title: "   " }, "title"],
        [{ title: "x".repeat(501) }, "title"],
        [{ title: "ok", status: "done" }, "status"],
        [{ title: "ok", id: 5 }, "id"],
        [{ title: "ok", created_at: "2026-01-01T00:00:00.000Z" }, "created_at"],
        [{ title: "ok", priority: "asap" }, "priority"],
        [{ title: "ok", labels: "bug" }, "labels"],
        [{ title: "ok", labels: Array.from({ length: 51 }, (_, i) => `l${i}`) }, "labels"],
        [{ title: "ok", labels: ["x".repeat(51)] }, "labels.0"],
        [{ title: "ok", description: "x".repeat(100_001) }, "description"],
        [{ title: "ok", project_id: "proj_nope" }, "project_id"],
        [{ title: 5 }, "title"]
      ]
      for (const [body, field] of cases) {
        const r = await s.request("POST", "/api/tasks", { key: alice.key, body })
        expectError(r, 400, "BAD_REQUEST")
        const fields = (r.body as Envelope).error.details.fields as Array<{ path: string; message: string }>
        expect(fields.map((f) => f.path)).toContain(field)
      }
      for (const body of [[], "title", 42, null]) {
        expectError(await s.request("POST", "/api/tasks", { key: alice.key, body }), 400, "BAD_REQUEST")
      }
      expectError(
        await s.request("POST", "/api/tasks", {
          key: alice.key,
          raw: "{not json",
          headers: { "content-type": "application/json" }
        }),
        400,
        "BAD_REQUEST"
      )
      expectError(
        await s.request("POST", "/api/tasks", {
          key: alice.key,
          raw: "",
          headers: { "content-type": "application/json" }
        }),
        400,
        "BAD_REQUEST"
      )
      expectError(
        await s.request("POST", "/api/tasks", {
          key: alice.key,
          raw: '{"title":"x"}',
          headers: { "content-type": "text/plain" }
        }),
        400,
        "BAD_REQUEST"
      )
      const after = await s.query<{ n: number }>("SELECT COUNT(*) AS n FROM tasks")
      expect(Number(after[0]?.n)).toBe(Number(before[0]?.n))
    })

    it("refuses an empty PATCH and bad query parameters with 400", async () => {
      const t = await s.request<Task>("POST", "/api/tasks", { key: alice.key, body: { title: "x" } })
      expectError(await s.request("PATCH", `/api/tasks/${t.body.id}`, { key: alice.key, body: {} }), 400, "BAD_REQUEST")
      expectError(
        await s.request("PATCH", `/api/tasks/${t.body.id}`, { key: alice.key, body: { status: "nope" } }),
        400,
        "BAD_REQUEST"
      )
      for (const q of [
        "limit=0",
        "limit=201",
        "limit=abc",
        "offset=-1",
        "offset=1.5",
        "status=nope",
        "priority=x",
        "project_id=zzz",
        "limit=1&limit=2"
      ]) {
        expectError(await s.request("GET", `/api/tasks?${q}`, { key: alice.key }), 400, "BAD_REQUEST")
      }
    })

    it("answers 413 for a body over 1 MiB", async () => {
      const r = await s.request("POST", "/api/tasks", {
        key: alice.key,
        body: { title: "big", description: "x".repeat(1024 * 1024) }
      })
      expectError(r, 413, "PAYLOAD_TOO_LARGE")
    })
  })

  describe("projects", () => {
    it("creates, gets with task_count, lists with totals, deletes", async () => {
      const created = await s.request<{ id: string; path: string }>("POST", "/api/projects", {
        key: alice.key,
        body: { name: "Website", path: projectDir }
      })
      expect(created.status).toBe(201)
      expect(created.body).toMatchObject({ name: "Website", path: projectDir, git_url: null })
      expect(created.body.id).toMatch(/^proj_[0-9A-Za-z]{16}$/)
      await s.request("POST", "/api/tasks", {
        key: alice.key,
        body: { title: "in project", project_id: created.body.id }
      })
      const got = await s.request<{ task_count: number }>("GET", `/api/projects/${created.body.id}`, { key: alice.key })
      expect(got.status).toBe(200)
      expect(got.body.task_count).toBe(1)
      const filtered = await s.request<{ total: number; tasks: Array<Task> }>(
        "GET",
        `/api/tasks?project_id=${created.body.id}`,
        { key: alice.key }
      )
      expect(filtered.body.total).toBe(1)
      const list = await s.request<{ projects: Array<{ id: string }>; total: number; limit: number; offset: number }>(
        "GET",
        "/api/projects",
        { key: alice.key }
      )
      expect(list.body.projects.map((p) => p.id)).toContain(created.body.id)
      expect(list.body).toMatchObject({ limit: 50, offset: 0 })
      expect(list.body.total).toBe(list.body.projects.length)

      const busy = await s.request("DELETE", `/api/projects/${created.body.id}`, { key: alice.key })
      expectError(busy, 409, "CONFLICT")
      const gone = await s.request("DELETE", `/api/projects/${created.body.id}?cascade=true`, { key: alice.key })
      expect(gone.status).toBe(200)
      expect(gone.body).toEqual({ success: true })
      expectError(await s.request("GET", `/api/projects/${created.body.id}`, { key: alice.key }), 404, "NOT_FOUND")
      expect(await s.query("SELECT id FROM tasks WHERE project_id = ?", [created.body.id])).toEqual([])
    })

    it("refuses another user's project: 403 on get, delete and as a task's project", async () => {
      const p = await s.request<{ id: string }>("POST", "/api/projects", {
        key: alice.key,
        body: { name: "Mine", path: projectDir }
      })
      expectError(await s.request("GET", `/api/projects/${p.body.id}`, { key: bob.key }), 403, "FORBIDDEN")
      expectError(await s.request("DELETE", `/api/projects/${p.body.id}`, { key: bob.key }), 403, "FORBIDDEN")
      expectError(
        await s.request("POST", "/api/tasks", { key: bob.key, body: { title: "x", project_id: p.body.id } }),
        403,
        "FORBIDDEN"
      )
      expectError(
        await s.request("POST", "/api/tasks", {
          key: bob.key,
          body: { title: "x", project_id: "proj_0000000000000000" }
        }),
        404,
        "NOT_FOUND"
      )
    })

    it("clones git_url into a new path", async () => {
      const origin = join(projectDir, `origin-${store}`)
      execFileSync("git", ["init", "-q", "-b", "main", origin])
      execFileSync("git", [
        "-C",
        origin,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "init"
      ])
      // Not inside projectDir: that location belongs to alice's project (one owner per path).
      const target = join(await mkdtemp(join(tmpdir(), "tw-clone-")), `clone-${store}`)
      // A file:// clone reads the host's files: an admin's to make.
      expectError(
        await s.request("POST", "/api/projects", {
          key: alice.key,
          body: { name: "Cloned", path: target, git_url: `file://${origin}` }
        }),
        403,
        "FORBIDDEN"
      )
      expect(existsSync(target)).toBe(false)
      const r = await s.request<{ git_url: string; path: string }>("POST", "/api/projects", {
        key: s.adminKey,
        body: { name: "Cloned", path: target, git_url: `file://${origin}` }
      })
      expect(r.status).toBe(201)
      expect(r.body).toMatchObject({ git_url: `file://${origin}`, path: target })
      expect(existsSync(join(target, ".git"))).toBe(true)
      const again = await s.request("POST", "/api/projects", {
        key: s.adminKey,
        body: { name: "Cloned", path: target, git_url: `file://${origin}` }
      })
      expectError(again, 400, "BAD_REQUEST")
      await rm(dirname(target), { recursive: true, force: true })
    })

    it("validates name and path", async () => {
      const bad: Array<[unknown, string]> = [
        [{ path: projectDir }, "name"],
        [{ name: "", path: projectDir }, "name"],
        [{ name: "x" }, "path"],
        [{ name: "x", path: "relative/dir" }, "path"],
        [{ name: "x", path: `${projectDir}/../etc` }, "path"],
        [{ name: "x", path: join(projectDir, "missing") }, "path"],
        [{ name: "x", path: projectDir, git_url: "ftp://example.com/x" }, "git_url"],
        [{ name: "x", path: projectDir, extra: 1 }, "extra"]
      ]
      for (const [body, field] of bad) {
        const r = await s.request("POST", "/api/projects", { key: alice.key, body })
        expectError(r, 400, "BAD_REQUEST")
        const fields = (r.body as Envelope).error.details.fields as Array<{ path: string }>
        expect(fields.map((f) => f.path)).toContain(field)
      }
      expectError(await s.request("GET", "/api/projects/nope", { key: alice.key }), 400, "BAD_REQUEST")
      expectError(await s.request("GET", "/api/projects/proj_0000000000000000", { key: alice.key }), 404, "NOT_FOUND")
    })
  })

  describe("labels", () => {
    it("creates (201), lists with totals, and refuses a duplicate name with 409 case-insensitively", async () => {
      const u = await s.createUser()
      const r = await s.request<{ id: string; name: string; color: string; created_at: string }>(
        "POST",
        "/api/labels",
        {
          key: u.key,
          body: { name: "Urgent", color: "#FF0000" }
        }
      )
      expect(r.status).toBe(201)
      expect(r.body).toMatchObject({ name: "Urgent", color: "#FF0000" })
      expect(r.body.id).toMatch(/^lbl_[0-9A-Za-z]{16}$/)
      expect(r.body.created_at).toMatch(ISO)
      expectError(
        await s.request("POST", "/api/labels", { key: u.key, body: { name: "urgent", color: "#00ff00" } }),
        409,
        "CONFLICT"
      )
      // Another user may use the same name.
      expect(
        (await s.request("POST", "/api/labels", { key: bob.key, body: { name: "Urgent", color: "#00ff00" } })).status
      ).toBe(201)
      const list = await s.request<{ labels: Array<{ name: string }>; total: number }>("GET", "/api/labels", {
        key: u.key
      })
      expect(list.body.labels.map((l) => l.name)).toEqual(["Urgent"])
      expect(list.body.total).toBe(1)
      const rows = await s.query("SELECT name FROM labels WHERE owner_id = ?", [u.id])
      expect(rows).toEqual([{ name: "Urgent" }])
    })

    it("validates name and colour", async () => {
      for (const body of [
        { name: "x" },
        { color: "#000000" },
        { name: "x", color: "red" },
        { name: "x", color: "#12345" },
        { name: "", color: "#000000" },
        { name: "x".repeat(51), color: "#000000" }
      ]) {
        expectError(await s.request("POST", "/api/labels", { key: alice.key, body }), 400, "BAD_REQUEST")
      }
    })
  })
})
