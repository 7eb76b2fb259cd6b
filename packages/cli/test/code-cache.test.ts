/**
 * The `taskwright` command's code cache (src/start.ts), on the built binary: written once and then
 * read, replaced when V8 refuses it, and never read from a place someone else could have written.
 */
import { execFile } from "node:child_process"
import { createHash } from "node:crypto"
import { chmod, chown, lstat, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { bin, startServe } from "./serve-helpers.js"

const dist = join(__dirname, "..", "dist")
const run = promisify(execFile)

/** `taskwright --version` with the cache setting and HOME given; answers what it printed. */
const version = async (env: Record<string, string>) => {
  const { stdout } = await run(process.execPath, [bin, "--version"], {
    env: { PATH: process.env.PATH ?? "", ...env }
  })
  return stdout.trim()
}

const caches = async (dir: string) => (await readdir(dir)).filter((f) => f.endsWith(".v8"))

/** The one cache file in `dir`, with its inode (a rewrite renames a new file over it). */
const onlyCache = async (dir: string) => {
  const files = await caches(dir)
  expect(files).toHaveLength(1)
  const file = join(dir, files[0] ?? "")
  return { file, stats: await stat(file) }
}

describe("the code cache", () => {
  let root: string
  let buildTag: string
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "tw-code-cache-"))
    const bundle = await readFile(join(dist, "cli.cjs"), "utf8")
    buildTag = `cli-${createHash("sha256").update(bundle).digest("hex").slice(0, 24)}-`
  })
  afterAll(async () => {
    await rm(root, { recursive: true, force: true })
  })

  it("is written on the first run (0600 in a 0700 directory, named by the build) and read, not rewritten, after", async () => {
    const dir = join(root, "first")
    const printed = await version({ TASKWRIGHT_CODE_CACHE: dir })
    expect(printed).toMatch(/^\d+\.\d+\.\d+/)
    expect((await stat(dir)).mode & 0o777).toBe(0o700)
    const written = await onlyCache(dir)
    expect(written.file).toContain(buildTag)
    expect(written.stats.mode & 0o777).toBe(0o600)
    expect(written.stats.size).toBeGreaterThan(500_000)

    expect(await version({ TASKWRIGHT_CODE_CACHE: dir })).toBe(printed)
    const after = await onlyCache(dir)
    expect(after.stats.ino).toBe(written.stats.ino)
    expect(after.stats.mtimeMs).toBe(written.stats.mtimeMs)
  })

  it("runs a command that loads a native module on first use from a warm cache (the bundle has no dynamic import)", async () => {
    const bundle = await readFile(join(dist, "cli.cjs"), "utf8")
    // A script from V8's code cache has no module loader: an import() in it would fail at run time.
    expect(bundle).not.toMatch(/\bimport\(/)
    const dir = join(root, "argon2")
    const data = join(root, "argon2-data")
    const create = (email: string) =>
      run(
        process.execPath,
        [
          bin,
          "users",
          "create",
          "--data-dir",
          data,
          "--email",
          email,
          "--name",
          "A",
          "--password",
          "correct horse battery"
        ],
        {
          env: { PATH: process.env.PATH ?? "", TASKWRIGHT_CODE_CACHE: dir }
        }
      )
    await create("cold@example.test")
    await onlyCache(dir)
    const warm = await create("warm@example.test")
    expect(warm.stderr).toBe("")
  })

  it("lives in ~/.cache/taskwright by default, and `off` writes nothing", async () => {
    const home = join(root, "home")
    await mkdir(home)
    await version({ HOME: home, TASKWRIGHT_CODE_CACHE: "off" })
    expect(await readdir(home)).toEqual([])
    await version({ HOME: home })
    await onlyCache(join(home, ".cache", "taskwright"))
  })

  it("replaces a cache V8 refuses, and the command still works", async () => {
    const dir = join(root, "corrupt")
    await version({ TASKWRIGHT_CODE_CACHE: dir })
    const { file } = await onlyCache(dir)
    await writeFile(file, Buffer.alloc(4096, 7), { mode: 0o600 })
    expect(await version({ TASKWRIGHT_CODE_CACHE: dir })).toMatch(/^\d+\.\d+\.\d+/)
    const replaced = await onlyCache(dir)
    expect(replaced.stats.size).toBeGreaterThan(500_000)
  })

  it("neither reads nor writes a directory others can write", async () => {
    const dir = join(root, "shared")
    await mkdir(dir, { mode: 0o777 })
    await chmod(dir, 0o777)
    expect(await version({ TASKWRIGHT_CODE_CACHE: dir })).toMatch(/^\d+\.\d+\.\d+/)
    expect(await readdir(dir)).toEqual([])
  })

  it("does not read a cache file others can write, or one behind a symbolic link: it writes its own", async () => {
    const dir = join(root, "planted")
    await version({ TASKWRIGHT_CODE_CACHE: dir })
    const { file } = await onlyCache(dir)
    const genuine = await readFile(file)

    // Group-writable: replaced by a file of its own, 0600.
    await chmod(file, 0o620)
    const writable = await stat(file)
    await version({ TASKWRIGHT_CODE_CACHE: dir })
    const afterWritable = await onlyCache(dir)
    expect(afterWritable.stats.ino).not.toBe(writable.ino)
    expect(afterWritable.stats.mode & 0o777).toBe(0o600)

    // A link to a cache elsewhere: not followed; the link is replaced, its target left alone.
    const elsewhere = join(root, "elsewhere.v8")
    await writeFile(elsewhere, genuine, { mode: 0o600 })
    await rm(file)
    await symlink(elsewhere, file)
    await version({ TASKWRIGHT_CODE_CACHE: dir })
    expect((await stat(file)).isFile()).toBe(true)
    expect((await readFile(elsewhere)).equals(genuine)).toBe(true)
    expect((await lstat(file)).isSymbolicLink()).toBe(false)
  })

  it.runIf(process.getuid?.() === 0)("does not read a cache file another user owns", async () => {
    const dir = join(root, "foreign")
    await version({ TASKWRIGHT_CODE_CACHE: dir })
    const { file } = await onlyCache(dir)
    await chown(file, 65534, 65534)
    await version({ TASKWRIGHT_CODE_CACHE: dir })
    expect((await stat(file)).uid).toBe(0)
  })

  it("drops the caches of other builds and keeps this build's for other Node flags", async () => {
    const dir = join(root, "builds")
    await mkdir(dir, { mode: 0o700 })
    const otherBuild = join(dir, `cli-${"0".repeat(24)}-${"1".repeat(24)}.v8`)
    const otherFlags = join(dir, `${buildTag}${"2".repeat(24)}.v8`)
    await writeFile(otherBuild, "old", { mode: 0o600 })
    await writeFile(otherFlags, "flags", { mode: 0o600 })
    await version({ TASKWRIGHT_CODE_CACHE: dir })
    const files = await caches(dir)
    expect(files).not.toContain(`cli-${"0".repeat(24)}-${"1".repeat(24)}.v8`)
    expect(files).toContain(`${buildTag}${"2".repeat(24)}.v8`)
    expect(files).toHaveLength(2)
  })

  it("is written by a running server once it has started, and the next start reads it", async () => {
    const dir = join(root, "serve")
    const data = join(root, "serve-data")
    const env = { PATH: process.env.PATH ?? "", HOME: root, TASKWRIGHT_CODE_CACHE: dir, TASKWRIGHT_SANDBOX: "off" }
    const first = startServe(data, env)
    try {
      await first.listening
      // Written some 2 s after start while the server runs (not at its exit).
      await expect.poll(() => caches(dir).catch(() => []), { timeout: 10_000, interval: 200 }).toHaveLength(1)
      expect(first.child.exitCode).toBeNull()
    } finally {
      await first.stop()
    }
    // The server changes V8 flags after it listens, and V8 refuses a cache made under other flags
    // than the reader's; a refused cache would be written again 2 s after this start.
    const written = await onlyCache(dir)
    const second = startServe(data, env)
    try {
      await second.listening
      await new Promise((resolve) => setTimeout(resolve, 3_000))
      const after = await onlyCache(dir)
      expect(after.stats.ino).toBe(written.stats.ino)
      expect(after.stats.mtimeMs).toBe(written.stats.mtimeMs)
    } finally {
      await second.stop()
    }
  })
})
