/**
 * Project paths tried as a hostile user would: system directories, the service's data directory
 * and its own checkout, another user's repository (directly, from inside, from around it, through
 * a symlink), `file://` and ssh clones, a clone into someone else's tree (refused before anything
 * is written), a failed or lost clone (nothing left), and two users racing for one path. With the
 * product's default projects root (`<data dir>/projects`), on every store.
 */
import { execFileSync } from "node:child_process"
import { existsSync } from "node:fs"
import { mkdir, mkdtemp, readdir, rm, symlink } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { startTestServer, type TestServer, type TestUser, testStores } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

interface Envelope {
  readonly error: { readonly code: string; readonly details: Record<string, unknown> }
}

const git = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd, stdio: "pipe" })

describe.each(testStores())("project paths on %s", (store) => {
  let s: TestServer
  let alice: TestUser
  let mallory: TestUser
  let root: string
  let outside: string

  beforeAll(async () => {
    // An empty TASKWRIGHT_PROJECTS_ROOT keeps the product's default: <data dir>/projects.
    s = await startTestServer({ store, env: { TASKWRIGHT_PROJECTS_ROOT: "" } })
    alice = await s.createUser()
    mallory = await s.createUser()
    root = join(s.dataDir, "projects")
    outside = await mkdtemp(join(tmpdir(), "tw-outside-"))
  })
  afterAll(async () => {
    await s.close()
    await rm(outside, { recursive: true, force: true })
  })

  const create = (key: string, body: Record<string, unknown>) =>
    s.request<{ id: string; path: string }>("POST", "/api/projects", { key, body })
  const count = async () =>
    Number((await s.query<{ n: number }>("SELECT COUNT(*) AS n FROM projects"))[0]?.n ?? Number.NaN)
  const expectCode = (r: { status: number; body: unknown }, status: number, code: string) => {
    expect(r.status).toBe(status)
    expect((r.body as Envelope).error.code).toBe(code)
  }

  it("a non-admin may use only paths inside the projects root: system dirs, the data dir and the service's checkout are 400", async () => {
    const before = await count()
    const serviceCheckout = resolve(__dirname, "..", "..", "..")
    for (const path of [
      "/",
      "/etc",
      "/root",
      s.dataDir,
      join(s.dataDir, "worktrees"),
      serviceCheckout,
      outside,
      root
    ]) {
      const r = await create(mallory.key, { name: "grab", path })
      expectCode(r, 400, "BAD_REQUEST")
      expect((r.body as unknown as Envelope).error.details.fields).toEqual([
        { path: "path", message: expect.any(String) }
      ])
    }
    expect(await count()).toBe(before)
  })

  it("a path inside the root is fine; another user then gets 409 for it, inside it, around it, or through a symlink", async () => {
    const repo = join(root, `alice-${store}`)
    await mkdir(join(repo, "src"), { recursive: true })
    expect((await create(alice.key, { name: "Alice", path: repo })).status).toBe(201)
    const link = join(root, `link-to-alice-${store}`)
    await symlink(repo, link)
    const wrapper = join(root, `wrapper-${store}`)
    await mkdir(wrapper)
    const inner = join(wrapper, "alice")
    await symlink(repo, inner)
    for (const path of [repo, join(repo, "src"), link, inner]) {
      const r = await create(mallory.key, { name: "steal", path })
      expectCode(r, 409, "CONFLICT")
      expect((r.body as unknown as Envelope).error.details).toMatchObject({ reason: "path_taken" })
    }
    // Around it: a directory containing alice's project (through the symlink's own parent, resolved).
    const around = join(root, `around-${store}`)
    await mkdir(around)
    await symlink(repo, join(around, "inside"))
    // The symlink inside does not make `around` contain alice's project: only real paths count.
    expect((await create(mallory.key, { name: "mine", path: around })).status).toBe(201)
    // The owner may register the same place again.
    expect((await create(alice.key, { name: "Alice again", path: link })).status).toBe(201)
  })

  it("a project around another user's project is 409", async () => {
    const outer = join(root, `outer-${store}`)
    await mkdir(join(outer, "inner"), { recursive: true })
    expect((await create(alice.key, { name: "inner", path: join(outer, "inner") })).status).toBe(201)
    expectCode(await create(mallory.key, { name: "outer", path: outer }), 409, "CONFLICT")
  })

  it("a symlink inside the root that leads outside it is 400", async () => {
    const toEtc = join(root, `escape-${store}`)
    await symlink("/etc", toEtc)
    expectCode(await create(mallory.key, { name: "etc", path: toEtc }), 400, "BAD_REQUEST")
  })

  it("file:// clones are an admin's: 403 for others, and nothing is cloned", async () => {
    const origin = await mkdtemp(join(tmpdir(), "tw-origin-"))
    git(origin, "init", "-q")
    git(origin, "commit", "-q", "--allow-empty", "-m", "secret history")
    const target = join(root, `clone-${store}`)
    const r = await create(mallory.key, { name: "clone", path: target, git_url: `file://${origin}` })
    expectCode(r, 403, "FORBIDDEN")
    expect(existsSync(target)).toBe(false)
    expect((await create(s.adminKey, { name: "clone", path: target, git_url: `file://${origin}` })).status).toBe(201)
    expect(existsSync(join(target, ".git"))).toBe(true)
    await rm(origin, { recursive: true, force: true })
  })

  it("ssh clones are an admin's too (they use the service's ssh identity): 403 naming the rule, nothing cloned", async () => {
    for (const url of ["ssh://git@github.com/acme/private.git", "git@github.com:acme/private.git"]) {
      const target = join(root, `ssh-${store}`)
      const r = await create(mallory.key, { name: "ssh", path: target, git_url: url })
      expectCode(r, 403, "FORBIDDEN")
      const error = (r.body as unknown as Envelope & { error: { message: string } }).error
      expect(error.details).toMatchObject({ field: "git_url", reason: "ssh_clone_needs_admin" })
      expect(error.message).toMatch(/ssh identity.*only an admin may/)
      expect(existsSync(target)).toBe(false)
    }
  })

  /** Names in `dir`, sorted. */
  const names = async (dir: string) => (await readdir(dir)).sort()

  it("a clone into another user's tree is refused before anything is written there", async () => {
    const origin = await mkdtemp(join(tmpdir(), "tw-origin-"))
    git(origin, "init", "-q")
    git(origin, "commit", "-q", "--allow-empty", "-m", "mallory's history")
    const repo = join(root, `alice-tree-${store}`)
    await mkdir(join(repo, "src"), { recursive: true })
    expect((await create(alice.key, { name: "Alice's tree", path: repo })).status).toBe(201)
    const before = await names(repo)
    const otherAdmin = await s.createUser({ admin: true, scopes: ["admin"] })
    // An admin may clone file:// URLs, but not into another user's project.
    for (const path of [join(repo, "x"), join(repo, "src", "deeper", "x")]) {
      const r = await create(otherAdmin.key, { name: "into alice", path, git_url: `file://${origin}` })
      expectCode(r, 409, "CONFLICT")
      expect((r.body as unknown as Envelope).error.details).toMatchObject({ reason: "path_taken" })
    }
    // A non-admin with an https URL: refused before git is even started.
    const r = await create(mallory.key, {
      name: "into alice",
      path: join(repo, "y"),
      git_url: "https://127.0.0.1:9/x.git"
    })
    expectCode(r, 409, "CONFLICT")
    expect(await names(repo)).toEqual(before)
    expect(await names(join(repo, "src"))).toEqual([])
    await rm(origin, { recursive: true, force: true })
  })

  it("a clone that fails leaves nothing behind: not the clone, not its temporary directory, not the directories made for it", async () => {
    const before = await names(root)
    const path = join(root, `never-${store}`, "deep", "clone")
    const r = await create(s.adminKey, { name: "missing", path, git_url: `file://${join(outside, "missing.git")}` })
    expectCode(r, 400, "BAD_REQUEST")
    expect(await names(root)).toEqual(before)
  })

  it("two users cloning into one free path at once: one gets it, the other's clone is removed", async () => {
    const origin = await mkdtemp(join(tmpdir(), "tw-origin-"))
    git(origin, "init", "-q")
    git(origin, "commit", "-q", "--allow-empty", "-m", "history")
    const otherAdmin = await s.createUser({ admin: true, scopes: ["admin"] })
    const parent = join(root, `clone-race-${store}`)
    await mkdir(parent)
    for (let i = 0; i < 4; i++) {
      const path = join(parent, `c${i}`)
      const answers = await Promise.all(
        [s.adminKey, otherAdmin.key].map((key) => create(key, { name: "race", path, git_url: `file://${origin}` }))
      )
      const statuses = answers.map((a) => a.status).sort()
      expect(statuses[0]).toBe(201)
      expect([400, 409]).toContain(statuses[1])
      expect(git(path, "log", "--format=%s").toString().trim()).toBe("history")
      const rows = await s.query<{ n: number }>("SELECT COUNT(*) AS n FROM projects WHERE path = ?", [path])
      expect(Number(rows[0]?.n)).toBe(1)
    }
    // Only the clones that were recorded: no temporary directory is left.
    expect(await names(parent)).toEqual(["c0", "c1", "c2", "c3"])
    await rm(origin, { recursive: true, force: true })
  })

  it("an admin may use paths outside the root, but never the data directory, inside it, or a directory that contains it", async () => {
    for (const path of ["/", s.dataDir, join(s.dataDir, "worktrees"), resolve(s.dataDir, "..")]) {
      expectCode(await create(s.adminKey, { name: "no", path }), 400, "BAD_REQUEST")
    }
    expect((await create(s.adminKey, { name: "elsewhere", path: outside })).status).toBe(201)
  })

  it("two users racing for one free path: exactly one gets it", async () => {
    for (let i = 0; i < 8; i++) {
      const path = join(root, `race-${store}-${i}`)
      await mkdir(path)
      const [a, m] = await Promise.all([
        create(alice.key, { name: "a", path }),
        create(mallory.key, { name: "m", path })
      ])
      expect([a.status, m.status].sort()).toEqual([201, 409])
    }
  })
})
