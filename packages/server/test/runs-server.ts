/**
 * Real server processes for the run suites that kill or restart them: the CLI's build
 * (`node packages/cli/dist/main.js serve`, rebuilt when the sources are newer), its store (a
 * SQLite file in the data directory, or a fresh PostgreSQL database), and a small HTTP client.
 */
import { type ChildProcess, execFile, spawn, spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { promisify } from "node:util"
import { createPgDatabase, type TestStore } from "@taskwright/testing"
import { expect } from "vitest"
import type { LogView } from "./runs-helpers.js"

const run = promisify(execFile)

export const ROOT = resolve(__dirname, "..", "..", "..")
export const MAIN = join(ROOT, "packages/cli/dist/main.js")

const newestSource = (dir: string): number => {
  let newest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    newest = Math.max(newest, entry.isDirectory() ? newestSource(path) : statSync(path).mtimeMs)
  }
  return newest
}

const fresh = (): boolean => {
  const sources = Math.max(
    ...["core", "api", "server", "cli"].map((p) => newestSource(join(ROOT, "packages", p, "src")))
  )
  return existsSync(MAIN) && statSync(MAIN).mtimeMs >= sources
}

/** Held by the one test worker that builds; the others wait for it, then find the build fresh. */
const BUILD_LOCK = join(tmpdir(), `taskwright-build-${createHash("sha1").update(ROOT).digest("hex").slice(0, 12)}.lock`)

/**
 * `npm run build` unless packages/cli/dist/main.js is newer than every source it bundles (as after
 * `npm test`'s pretest). One worker builds at a time, without blocking its event loop (vitest's
 * own messages must get through).
 */
export const ensureBuilt = async (): Promise<void> => {
  while (!fresh()) {
    try {
      mkdirSync(BUILD_LOCK)
    } catch {
      // Another worker builds; a lock older than the build's timeout was left by a dead one.
      const since = statSync(BUILD_LOCK, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()
      if (Date.now() - since > 300_000) {
        rmSync(BUILD_LOCK, { recursive: true, force: true })
      }
      await sleep(500)
      continue
    }
    try {
      if (!fresh()) await run("npm", ["run", "build"], { cwd: ROOT, timeout: 280_000 })
    } finally {
      rmSync(BUILD_LOCK, { recursive: true, force: true })
    }
  }
}

export interface ServerProcess {
  readonly url: string
  readonly child: ChildProcess
  readonly output: () => string
  readonly exited: Promise<{ code: number | null; signal: string | null }>
}

export interface ServerOptions {
  readonly dataDir: string
  readonly databaseUrl: string | undefined
  /** The server's whole environment besides DATABASE_URL (PATH, HOME, secrets, settings). */
  readonly env: Record<string, string>
  /** Run it as this user (the test runs as root). */
  readonly user?: { readonly uid: number; readonly gid: number }
}

/**
 * Can `user` start the built CLI from this checkout? Not when the checkout sits under a directory
 * only its owner may enter (a clone in a `mktemp -d` directory, mode 0700).
 */
export const checkoutReachableBy = (user: { readonly uid: number; readonly gid: number }): boolean =>
  spawnSync("/bin/sh", ["-c", 'cd "$1"', "sh", ROOT], { uid: user.uid, gid: user.gid }).status === 0

/** A test server's environment: PATH and HOME, no rate limit to speak of (the tests poll), and `extra`. */
export const serverEnv = (extra: Record<string, string> = {}): Record<string, string> => ({
  PATH: process.env.PATH ?? "",
  HOME: process.env.HOME ?? "/tmp",
  TASKWRIGHT_RATE_LIMIT: "1000000",
  ...extra
})

/** Starts `taskwright serve` on a free port and waits until it listens. */
export const startServer = async (options: ServerOptions): Promise<ServerProcess> => {
  const env: Record<string, string> = { ...options.env }
  if (options.databaseUrl !== undefined) env.DATABASE_URL = options.databaseUrl
  const child = spawn(process.execPath, [MAIN, "serve", "--port", "0", "--data-dir", options.dataDir, "--json"], {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    ...(options.user === undefined ? {} : { uid: options.user.uid, gid: options.user.gid })
  })
  let output = ""
  child.stdout?.on("data", (c: Buffer) => {
    output += c.toString()
  })
  child.stderr?.on("data", (c: Buffer) => {
    output += c.toString()
  })
  const exited = new Promise<{ code: number | null; signal: string | null }>((done) =>
    child.once("exit", (code, signal) => done({ code, signal }))
  )
  const url = await new Promise<string>((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`server did not start:\n${output}`)), 30_000)
    const onData = () => {
      // `--json` prints one (pretty-printed) object once the server listens.
      const block = /^\{[\s\S]*?^\}$/m.exec(output)?.[0]
      if (block === undefined) return
      clearTimeout(timer)
      child.stdout?.off("data", onData)
      done((JSON.parse(block) as { url: string }).url)
    }
    child.stdout?.on("data", onData)
    void exited.then(({ code }) => {
      clearTimeout(timer)
      fail(new Error(`server exited with ${code}:\n${output}`))
    })
  })
  return { url, child, output: () => output, exited }
}

/** SIGKILLs a server that is still running and waits for it. */
export const killServer = async (server: ServerProcess | undefined): Promise<void> => {
  if (server === undefined || server.child.exitCode !== null || server.child.signalCode !== null) return
  server.child.kill("SIGKILL")
  await server.exited
}

/** A store for a server process: a fresh PostgreSQL database, or none (the data directory's SQLite file). */
export const makeStore = async (store: TestStore) => {
  if (store !== "postgres") return { databaseUrl: undefined, drop: async () => {} }
  const { url, drop } = await createPgDatabase()
  return { databaseUrl: url, drop }
}

/** JSON over HTTP to a server process (the current one: tests restart it) with one credential. */
export const client = (server: () => ServerProcess | undefined, key: () => string) => {
  const call = async <T>(method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server()?.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key()}`,
        ...(body === undefined ? {} : { "content-type": "application/json" })
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const text = await res.text()
    return { status: res.status, body: (text === "" ? undefined : JSON.parse(text)) as T, text }
  }
  const ok = async <T>(method: string, path: string, body?: unknown) => {
    const r = await call<T>(method, path, body)
    expect(r.status, `${method} ${path}: ${r.text}`).toBeLessThan(300)
    return r.body
  }
  const allLogs = async (runId: string) => {
    const out: Array<LogView> = []
    for (;;) {
      const page = await ok<{ logs: Array<LogView> }>(
        "GET",
        `/api/runs/${runId}/logs?after=${out.at(-1)?.seq ?? 0}&limit=1000`
      )
      out.push(...page.logs)
      if (page.logs.length < 1000) return out
    }
  }
  return { call, ok, allLogs }
}

/** The process group the run's log says its agent was started in. */
export const groupOf = (logs: ReadonlyArray<LogView>) =>
  Number(/process group (\d+)/.exec(logs.find((l) => l.message.startsWith("Started "))?.message ?? "")?.[1])
