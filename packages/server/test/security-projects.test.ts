/**
 * Project paths tried as a hostile user would: system directories, the service's data directory
 * and its own checkout, another user's repository (directly, from inside, from around it, through
 * a symlink), `file://` clones of someone else's code, and two users racing for one path. With the
 * product's default projects root (`<data dir>/projects`), on every store.
 */
import { execFileSync } from "node:child_process"
import { existsSync } from "node:fs"
import { mkdir, mkdtemp, rm, symlink } from "node:fs/promises"
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
