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

/**
 * The build's own cache (scripts/prime-code-cache.mjs), read beside the bundle until this user has
 * one. Which cache a start ran is seen through a bundle of the same length that prints another
 * version: V8 checks only a source's length, so a start that reads the variant's cache runs the
 * variant's code. That is also why the file must be as trustworthy as the bundle itself.
 */
describe("the build's code cache", () => {
  const packageDir = join(__dirname, "..")
  let copy: string
  let root: string
  let genuineVersion: string
  /** Where a start of the copy looks for the build's cache. */
  let buildCache: string

  /** `taskwright --version` of the copy (its own main.js and cli.cjs), with `env`. */
  const copyVersion = async (env: Record<string, string>) => {
    const { stdout } = await run(process.execPath, [join(copy, "main.js"), "--version"], {
      env: { PATH: process.env.PATH ?? "", ...env }
    })
    return stdout.trim()
  }

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "tw-build-cache-"))
    // Beside the package, so that the copy's bundle resolves its external modules as the build's does.
    copy = await mkdtemp(join(packageDir, ".build-cache-test-"))
    const genuine = await readFile(join(dist, "cli.cjs"), "utf8")
    const variant = genuine.replace('version:"0.1.0"', 'version:"9.9.9"')
    expect(variant).not.toBe(genuine)
    expect(variant.length).toBe(genuine.length)
    await writeFile(join(copy, "main.js"), await readFile(join(dist, "main.js")))
    await writeFile(join(copy, "cli.cjs"), variant)
    // The variant's cache, written at the exit of a command run from it.
    const variantCaches = join(root, "variant")
    expect(await copyVersion({ TASKWRIGHT_CODE_CACHE: variantCaches })).toBe("9.9.9")
    const { file } = await onlyCache(variantCaches)
    await writeFile(join(copy, "cli.cjs"), genuine)
    genuineVersion = await copyVersion({ TASKWRIGHT_CODE_CACHE: "off" })
    expect(genuineVersion).toBe("0.1.0")
    // Named as the build names its cache: the genuine bundle's hash, then Node's version and flags.
    const bundleTag = createHash("sha256").update(genuine).digest("hex").slice(0, 24)
    buildCache = join(copy, (file.split("/").pop() ?? "").replace(/^cli-[0-9a-f]{24}-/, `cli-${bundleTag}-`))
    await writeFile(buildCache, await readFile(file), { mode: 0o644 })
  })
  afterAll(async () => {
    await rm(root, { recursive: true, force: true })
    await rm(copy, { recursive: true, force: true })
  })

  it("is written by `npm run build` beside the bundle: named by the build, owned as the bundle, 0644, and not packed: the install writes its own", async () => {
    const bundle = await readFile(join(dist, "cli.cjs"))
    const buildTag = `cli-${createHash("sha256").update(bundle).digest("hex").slice(0, 24)}-`
    const written = await onlyCache(dist)
    expect(written.file).toContain(buildTag)
    expect(written.stats.mode & 0o777).toBe(0o644)
    expect(written.stats.uid).toBe((await stat(join(dist, "cli.cjs"))).uid)
    expect(written.stats.size).toBeGreaterThan(500_000)
    // Made for one Node version and its flags: most users' Node would ignore it, so it is not shipped.
    const { stdout } = await run("npm", ["pack", "--dry-run", "--json"], { cwd: packageDir })
    const [packed] = JSON.parse(stdout) as ReadonlyArray<{ readonly files: ReadonlyArray<{ readonly path: string }> }>
    const paths = (packed?.files ?? []).map((f) => f.path)
    expect(paths).toContain("dist/cli.cjs")
    expect(paths.filter((p) => p.endsWith(".v8"))).toEqual([])
    // The Node that installs the package writes one instead (scripts/pack-check.mjs installs it).
    expect(paths).toContain("scripts/prime-code-cache.mjs")
    const manifest = JSON.parse(await readFile(join(packageDir, "package.json"), "utf8"))
    expect(manifest.scripts.postinstall).toBe("node scripts/prime-code-cache.mjs")
  })

  it("is not written, and the install not failed, where the package is not built yet (the workspace's npm install)", async () => {
    const unbuilt = await mkdtemp(join(root, "unbuilt-"))
    await mkdir(join(unbuilt, "scripts"))
    const script = join(unbuilt, "scripts", "prime-code-cache.mjs")
    await writeFile(script, await readFile(join(packageDir, "scripts", "prime-code-cache.mjs")))
    const { stdout, stderr } = await run(process.execPath, [script], { env: { PATH: process.env.PATH ?? "" } })
    expect(stdout + stderr).toBe("")
    expect(await readdir(unbuilt)).toEqual(["scripts"])
  })

  it("is read by a first start, which then writes this user's cache, and the next start reads this user's", async () => {
    const mine = join(root, "first")
    expect(await copyVersion({ TASKWRIGHT_CODE_CACHE: mine })).toBe("9.9.9")
    const written = await onlyCache(mine)
    expect(written.stats.mode & 0o777).toBe(0o600)
    // This user's cache comes first: with the build's replaced, a start still runs what it holds.
    await writeFile(buildCache, Buffer.alloc(4096, 7), { mode: 0o644 })
    try {
      expect(await copyVersion({ TASKWRIGHT_CODE_CACHE: mine })).toBe("9.9.9")
      expect((await onlyCache(mine)).stats.ino).toBe(written.stats.ino)
    } finally {
      await rm(buildCache)
      await writeFile(buildCache, await readFile(written.file), { mode: 0o644 })
    }
  })

  it("is not read with the cache off, when others can write it, or behind a symbolic link", async () => {
    expect(await copyVersion({ TASKWRIGHT_CODE_CACHE: "off" })).toBe(genuineVersion)
    const bytes = await readFile(buildCache)
    try {
      await chmod(buildCache, 0o664)
      expect(await copyVersion({ TASKWRIGHT_CODE_CACHE: join(root, "group-writable") })).toBe(genuineVersion)
      await chmod(buildCache, 0o646)
      expect(await copyVersion({ TASKWRIGHT_CODE_CACHE: join(root, "world-writable") })).toBe(genuineVersion)
      await rm(buildCache)
      const elsewhere = join(root, "elsewhere.v8")
      await writeFile(elsewhere, bytes, { mode: 0o644 })
      await symlink(elsewhere, buildCache)
      expect(await copyVersion({ TASKWRIGHT_CODE_CACHE: join(root, "linked") })).toBe(genuineVersion)
    } finally {
      await rm(buildCache, { force: true })
      await writeFile(buildCache, bytes, { mode: 0o644 })
    }
    // Put back as it was, it is read again.
    expect(await copyVersion({ TASKWRIGHT_CODE_CACHE: join(root, "again") })).toBe("9.9.9")
  })

  it.runIf(process.getuid?.() === 0)("is not read when another user than the bundle's owner owns it", async () => {
    await chown(buildCache, 65534, 65534)
    try {
      expect(await copyVersion({ TASKWRIGHT_CODE_CACHE: join(root, "foreign") })).toBe(genuineVersion)
    } finally {
      await chown(buildCache, 0, 0)
    }
    // And when the bundle is that user's too, it is theirs to vouch for.
    await chown(join(copy, "cli.cjs"), 65534, 65534)
    await chown(buildCache, 65534, 65534)
    try {
      expect(await copyVersion({ TASKWRIGHT_CODE_CACHE: join(root, "foreign-bundle") })).toBe("9.9.9")
    } finally {
      await chown(join(copy, "cli.cjs"), 0, 0)
      await chown(buildCache, 0, 0)
    }
  })
})
