/**
 * A real `taskwright serve` process for tests that measure or stop a server as a user runs it:
 * its own process (its own event loop and core, not the test runner's), the CLI's build, a data
 * directory of its own, and the same CLI for what only the CLI does (users with passwords).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { mkdtemp, readFile, rm } from "node:fs/promises"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { type RequestOptions, sendTestRequest, type TestResponse } from "./Exchange.js"

export interface CliResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

export interface ServerProcess {
  readonly url: string
  readonly dataDir: string
  /** The bootstrap admin key the first start wrote to the data directory. */
  readonly adminKey: string
  readonly child: ChildProcess
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string
  request<T = unknown>(method: string, path: string, options?: RequestOptions): Promise<TestResponse<T>>
  /** Runs the same CLI once on this server's store (`--data-dir`, `--database` added). */
  cli(args: ReadonlyArray<string>): Promise<CliResult>
  /** SIGTERM (SIGKILL after 10 s), then the data directory removed (when this helper made it). */
  stop(): Promise<void>
}

export interface ServerProcessOptions {
  /** The CLI's bundle (default: the installed `taskwright` package's `dist/main.js`). */
  readonly main?: string
  /** Default: a fresh temporary directory, removed by `stop`. */
  readonly dataDir?: string
  /** PostgreSQL; the data directory's SQLite file otherwise. */
  readonly databaseUrl?: string
  /** The server's environment besides PATH, HOME and a projects root in the temporary directory. */
  readonly env?: Record<string, string>
}

/** The installed `taskwright` package's bundle (in this repository, `npm run build` makes it). */
export const cliMain = (): string => {
  let pkg: string
  try {
    pkg = createRequire(import.meta.url).resolve("taskwright/package.json")
  } catch {
    throw new Error("the taskwright package is not installed: pass the CLI's bundle as `main`")
  }
  const main = join(dirname(pkg), "dist", "main.js")
  if (!existsSync(main)) throw new Error(`${main} is missing: run \`npm run build\` first`)
  return main
}

/**
 * Runs the CLI's bundle `main` once with `args` (an argument vector, no shell) and answers its exit
 * code and everything it printed, once its output has closed.
 */
export const runCli = (
  main: string,
  args: ReadonlyArray<string>,
  options: { readonly env: Record<string, string>; readonly cwd?: string }
): Promise<CliResult> =>
  new Promise((done) => {
    const run = spawn(process.execPath, [main, ...args], {
      env: options.env,
      cwd: options.cwd,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    run.stdout.on("data", (c: Buffer) => {
      stdout += c.toString()
    })
    run.stderr.on("data", (c: Buffer) => {
      stderr += c.toString()
    })
    run.once("close", (code) => done({ code, stdout, stderr }))
  })

const exitOf = (child: ChildProcess) =>
  new Promise<{ code: number | null }>((done) => {
    if (child.exitCode !== null || child.signalCode !== null) done({ code: child.exitCode })
    else child.once("exit", (code) => done({ code }))
  })

/** Starts `taskwright serve` on a free loopback port and waits until it listens. */
export const startServerProcess = async (options: ServerProcessOptions = {}): Promise<ServerProcess> => {
  const main = options.main ?? cliMain()
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), "taskwright-proc-")))
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? tmpdir(),
    // Tests keep their projects in the temporary directory, as startTestServer allows.
    TASKWRIGHT_PROJECTS_ROOT: tmpdir(),
    ...options.env
  }
  const store = [
    "--data-dir",
    dataDir,
    ...(options.databaseUrl === undefined ? [] : ["--database", options.databaseUrl])
  ]
  const child = spawn(process.execPath, [main, "serve", "--port", "0", "--host", "127.0.0.1", "--json", ...store], {
    env,
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout.on("data", (c: Buffer) => {
    output += c.toString()
  })
  child.stderr.on("data", (c: Buffer) => {
    output += c.toString()
  })
  const exited = exitOf(child)
  const url = await new Promise<string>((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`taskwright serve did not start in 30 s:\n${output}`)), 30_000)
    const onData = () => {
      // `--json` prints one (pretty-printed) object once the server listens.
      const block = /^\{[\s\S]*?^\}$/m.exec(output)?.[0]
      if (block === undefined) return
      clearTimeout(timer)
      child.stdout.off("data", onData)
      done((JSON.parse(block) as { url: string }).url)
    }
    child.stdout.on("data", onData)
    void exited.then(({ code }) => {
      clearTimeout(timer)
      fail(new Error(`taskwright serve exited with ${code}:\n${output}`))
    })
  }).catch(async (error: unknown) => {
    child.kill("SIGKILL")
    if (options.dataDir === undefined) await rm(dataDir, { recursive: true, force: true })
    throw error
  })
  const adminKey = (await readFile(join(dataDir, "admin-key.txt"), "utf8").catch(() => "")).trim()

  return {
    url,
    dataDir,
    adminKey,
    child,
    output: () => output,
    request: <T>(method: string, path: string, o: RequestOptions = {}) =>
      sendTestRequest<T>((p, init) => fetch(url + p, init), method, path, o),
    cli: (args) => runCli(main, [...args, ...store], { env }),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
      // A server that does not finish its shutdown in time is killed.
      const kill = setTimeout(() => child.kill("SIGKILL"), 10_000)
      await exited
      clearTimeout(kill)
      if (options.dataDir === undefined) await rm(dataDir, { recursive: true, force: true })
    }
  }
}
