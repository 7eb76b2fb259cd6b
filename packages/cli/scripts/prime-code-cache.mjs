/**
 * The build's code cache: starts the built server once on an empty SQLite store in a temporary
 * directory, lets the entry (src/start.ts) write its code cache there two seconds after start, and
 * puts that file beside the bundle under the same name, readable by all and writable by its owner
 * alone. The first start after `npm run build` then reads it instead of compiling the bundle.
 *
 * The published package runs this file as its `postinstall` too: a cache is safe only under the
 * exact Node version that wrote it, so the package cannot ship one, but the Node that installs it
 * can write one, and the first start after an install then reads compiled code as a restart does.
 * In a checkout that is not built yet (the workspace's own `npm install`) there is no bundle to
 * start, and this does nothing.
 *
 * The server gets an environment of its own (no DATABASE_URL, PORT or NODE_OPTIONS of the
 * builder's): it must not touch a real store, and a cache made under other Node flags than a
 * plain start's would be refused by V8 (the cache's name carries the flags, so it would only be
 * unused). A failure leaves the package as it was, without the file, and says so: a start then
 * compiles, as before. It never fails an install.
 */
import { spawn } from "node:child_process"
import { chmodSync, copyFileSync, existsSync, mkdtempSync, readdirSync, renameSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const dist = fileURLToPath(new URL("../dist/", import.meta.url))
const isCache = (name) => name.startsWith("cli-") && name.endsWith(".v8")
/** The entry writes its cache 2 s after start; a slow machine's start can take a few seconds more. */
const TIMEOUT_MS = 30_000

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** The cache files in `dir`; none while the entry has not made the directory yet. */
const cachesIn = (dir) => {
  try {
    return readdirSync(dir, { withFileTypes: true }).filter((f) => f.isFile() && isCache(f.name))
  } catch {
    return []
  }
}

const prime = async (work) => {
  const cache = join(work, "cache")
  const server = spawn(
    process.execPath,
    [join(dist, "main.js"), "serve", "--port", "0", "--data-dir", join(work, "data")],
    { env: { PATH: process.env.PATH ?? "", HOME: work, TASKWRIGHT_CODE_CACHE: cache }, stdio: "ignore" }
  )
  const exited = new Promise((resolve) => server.once("exit", (code) => resolve(code)))
  try {
    for (const deadline = Date.now() + TIMEOUT_MS; Date.now() < deadline; await sleep(100)) {
      if (server.exitCode !== null) throw new Error(`the server exited (${server.exitCode}) before it wrote one`)
      const [written] = cachesIn(cache)
      if (written !== undefined) return written.name
    }
    throw new Error(`none written in ${TIMEOUT_MS / 1000} s`)
  } finally {
    server.kill("SIGTERM")
    await exited
  }
}

if (existsSync(join(dist, "cli.cjs"))) {
  const work = mkdtempSync(join(tmpdir(), "taskwright-prime-"))
  try {
    const name = await prime(work)
    for (const old of cachesIn(dist)) rmSync(join(dist, old.name), { force: true })
    const temporary = join(dist, `${name}.tmp`)
    copyFileSync(join(work, "cache", name), temporary)
    chmodSync(temporary, 0o644)
    renameSync(temporary, join(dist, name))
    console.log(`taskwright: code cache written (dist/${name})`)
  } catch (error) {
    console.warn(`taskwright: no code cache written (${error.message}); a first start will compile`)
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}
