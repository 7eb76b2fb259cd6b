/**
 * A project's repository that keeps its data somewhere else, tried as a hostile user would: a
 * `.git` file (`gitdir:`) naming another user's repository, a `commondir` file in a `.git` of its
 * own, a `.git` symlinked to another user's, `core.worktree`, the project's directory swapped for a
 * symlink, a repository in the data directory or outside the projects root. Refused when the
 * project is created, and again when a run starts (the repository can change after that): the
 * victim's repository then has no new branch, no worktree entry and no new file. A user's own
 * linked worktree of another of their projects still works. On every store.
 */
import { readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { mkdir, mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"
import { git, makeRepo, startTestServer, type TestServer, type TestUser, testStores } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expectError, projectTask, scriptedAgent, startRun, waitForEnd } from "./runs-helpers.js"

/** Every path below `dir` (`.git` included), sorted: what a victim's repository holds. */
const tree = (dir: string): ReadonlyArray<string> => {
  const out: Array<string> = []
  const walk = (at: string) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name)
      out.push(relative(dir, path))
      if (entry.isDirectory()) walk(path)
    }
  }
  walk(dir)
  return out.sort()
}

/** What a run could change in a repository: its files, refs and worktrees. */
const snapshot = (repo: string) => ({
  files: tree(repo),
  refs: git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
  worktrees: git(repo, "worktree", "list", "--porcelain")
})

describe.each(testStores())("a project's repository elsewhere, on %s", (store) => {
  let s: TestServer
  let alice: TestUser
  let mallory: TestUser
  let root: string
  let outside: string
  let victim: string
  let agent: string

  beforeAll(async () => {
    // An empty TASKWRIGHT_PROJECTS_ROOT keeps the product's default: <data dir>/projects.
    s = await startTestServer({ store, env: { TASKWRIGHT_PROJECTS_ROOT: "", TASKWRIGHT_SANDBOX: "off" } })
    alice = await s.createUser()
    mallory = await s.createUser()
    root = join(s.dataDir, "projects")
    await mkdir(root, { recursive: true })
    outside = await mkdtemp(join(tmpdir(), "tw-outside-"))
    victim = await makeRepo({ "secret.txt": "alice's work\n" }, root)
    const p = await s.request("POST", "/api/projects", { key: alice.key, body: { name: "Alice", path: victim } })
    expect(p.status, p.text).toBe(201)
    agent = `quiet-${store}`
    await scriptedAgent(s, agent, [{ write: "done.txt", content: "done\n" }])
  })
  afterAll(async () => {
    await s.close()
    await rm(outside, { recursive: true, force: true })
  })

  const create = (key: string, path: string) =>
    s.request<{ id: string }>("POST", "/api/projects", { key, body: { name: "p", path } })
  const projectCount = async () =>
    Number((await s.query<{ n: number }>("SELECT COUNT(*) AS n FROM projects"))[0]?.n ?? Number.NaN)

  /** Ways to make `dir`'s `.git` lead to the repository whose `.git` is `target`. */
  const redirects: ReadonlyArray<readonly [string, (dir: string, target: string) => void]> = [
    [
      "a .git file",
      (dir, target) => {
        rmSync(join(dir, ".git"), { recursive: true, force: true })
        writeFileSync(join(dir, ".git"), `gitdir: ${target}\n`)
      }
    ],
    [
      "a commondir file",
      (dir, target) => {
        // A `.git` of its own, whose shared data is the target's (as a linked worktree's is).
        rmSync(join(dir, ".git"), { recursive: true, force: true })
        git(dir, "init", "-q", "-b", "main")
        writeFileSync(join(dir, ".git", "commondir"), `${target}\n`)
      }
    ],
    [
      "a symlinked .git",
      (dir, target) => {
        rmSync(join(dir, ".git"), { recursive: true, force: true })
        symlinkSync(target, join(dir, ".git"))
      }
    ]
  ]

  it.each(redirects)("%s to another user's repository is 409 when the project is created", async (_, redirect) => {
    const before = snapshot(victim)
    const count = await projectCount()
    const dir = await mkdtemp(join(root, "mallory-"))
    redirect(dir, join(victim, ".git"))
    for (const key of [mallory.key, s.adminKey]) {
      const error = expectError(await create(key, dir), 409, "CONFLICT")
      expect(error.details).toMatchObject({ field: "path", reason: "repository_taken" })
      expect(error.details.fields).toEqual([
        { path: "path", message: expect.stringContaining("another user's project") }
      ])
    }
    expect(await projectCount()).toBe(count)
    expect(snapshot(victim)).toEqual(before)
  })

  it("a repository outside the projects root, or in the data directory, is 400 for a non-admin; an admin may use one outside", async () => {
    const elsewhere = await makeRepo({ "a.txt": "a\n" }, outside)
    const inData = await makeRepo({ "a.txt": "a\n" }, s.dataDir)
    for (const target of [elsewhere, inData]) {
      const dir = await mkdtemp(join(root, "mallory-"))
      writeFileSync(join(dir, ".git"), `gitdir: ${join(target, ".git")}\n`)
      const error = expectError(await create(mallory.key, dir), 400, "BAD_REQUEST")
      expect(error.details).toMatchObject({ field: "path", reason: "repository_outside_project" })
      expect(error.details.fields).toEqual([{ path: "path", message: expect.stringContaining(join(target, ".git")) }])
    }
    const adminDir = await mkdtemp(join(root, "admin-"))
    writeFileSync(join(adminDir, ".git"), `gitdir: ${join(inData, ".git")}\n`)
    expectError(await create(s.adminKey, adminDir), 400, "BAD_REQUEST")
    writeFileSync(join(adminDir, ".git"), `gitdir: ${join(elsewhere, ".git")}\n`)
    expect((await create(s.adminKey, adminDir)).status).toBe(201)
  })

  it("core.worktree naming another directory is 400 when the project is created", async () => {
    const dir = await makeRepo({ "a.txt": "a\n" }, root)
    git(dir, "config", "core.worktree", victim)
    const error = expectError(await create(mallory.key, dir), 400, "BAD_REQUEST")
    expect(error.message).toMatch(/core\.worktree/)
  })

  it.each([
    ...redirects,
    ["core.worktree", (dir: string) => git(dir, "config", "core.worktree", victim)] as const,
    [
      "the project's directory swapped for a symlink",
      (dir: string) => {
        rmSync(dir, { recursive: true, force: true })
        symlinkSync(victim, dir)
      }
    ] as const
  ])(
    "%s made after the project was created: the run is refused and nothing is written in the victim's repository",
    async (_, redirect) => {
      const own = await makeRepo({ "mine.txt": "mine\n" }, root)
      const { projectId, taskId } = await projectTask(s, mallory.key, own)
      const before = snapshot(victim)
      redirect(own, join(victim, ".git"))
      const r = await s.request("POST", `/api/tasks/${taskId}/run`, { key: mallory.key, body: { agent } })
      expect([400, 409]).toContain(r.status)
      const error = (r.body as { error: { message: string; details: Record<string, unknown> } }).error
      expect(error.details.reason).toMatch(/repository_taken|path_taken|not_a_git_repository/)
      if (error.details.reason !== "not_a_git_repository") {
        expect(error.details.project_id).toBe(projectId)
        expect(error.message).toMatch(/no worktree or branch was made/)
      }
      expect(snapshot(victim)).toEqual(before)
      expect(readdirSync(join(victim, ".git"))).not.toContain("worktrees")
      expect(git(victim, "branch", "--list").trim()).toBe("* main")
      const runs = await s.query<{ n: number }>("SELECT COUNT(*) AS n FROM runs WHERE task_id = ?", [taskId])
      expect(Number(runs[0]?.n)).toBe(0)
      // The task did not move either.
      const task = await s.request<{ status: string }>("GET", `/api/tasks/${taskId}`, { key: mallory.key })
      expect(task.body.status).toBe("backlog")
    }
  )

  it("a user's own linked worktree of another of their projects is fine, and its runs work", async () => {
    const main = await makeRepo({ "a.txt": "a\n" }, root)
    expect((await create(alice.key, main)).status).toBe(201)
    const linked = join(root, `alice-linked-${store}`)
    git(main, "worktree", "add", "-q", "-b", "feature", linked)
    const { taskId } = await projectTask(s, alice.key, linked)
    // Another user may not use it: its data is in alice's project.
    expectError(await create(mallory.key, linked), 409, "CONFLICT")
    const run = await startRun(s, alice.key, taskId, { agent })
    const ended = await waitForEnd(s, alice.key, run.run_id)
    expect(ended.status, JSON.stringify(ended)).toBe("completed")
    expect(git(main, "log", "-1", "--format=%s", run.branch).trim()).not.toBe("")
    expect(readFileSync(join(linked, "a.txt"), "utf8")).toBe("a\n")
  })
})
