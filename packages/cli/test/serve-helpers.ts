/** `taskwright serve` run from the built binary, as the CLI's tests start it. */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import { join } from "node:path"

export const bin = join(__dirname, "..", "dist", "main.js")

export interface ServeProcess {
  readonly child: ChildProcessWithoutNullStreams
  /** Everything it has written to stdout so far. */
  readonly output: () => string
  /**
   * What it printed to say it listens: the text line, or with `--json` the whole JSON object.
   * Rejects if it exits first. Other lines may come before the text line (`--trace-gc` writes to
   * stdout too).
   */
  readonly listening: Promise<string>
  /** SIGTERM, and its exit awaited. */
  readonly stop: () => Promise<void>
}

/** The announcement in `out` once it is whole: a chunk may end in the middle of it. */
const announcement = (out: string): string | undefined => {
  if (out.trimStart().startsWith("{")) {
    try {
      JSON.parse(out)
      return out.trim()
    } catch {
      return undefined
    }
  }
  return out
    .split("\n")
    .slice(0, -1)
    .find((line) => line.includes("listening on"))
}

/** This process's environment, for a server that should inherit it. */
export const inheritedEnv = (): Record<string, string> =>
  Object.fromEntries(
    Object.entries(process.env).flatMap(([name, value]) => (value === undefined ? [] : [[name, value]]))
  )

/**
 * Serves `--data-dir dataDir` on a free port with `serveArgs` added, with `env` only, node
 * started with `nodeArgs` first.
 */
export const startServe = (
  dataDir: string,
  env: Record<string, string>,
  nodeArgs: ReadonlyArray<string> = [],
  serveArgs: ReadonlyArray<string> = []
): ServeProcess => {
  const child = spawn(
    process.execPath,
    [...nodeArgs, bin, "serve", "--port", "0", "--data-dir", dataDir, ...serveArgs],
    {
      env
    }
  )
  child.stdin.end()
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  let out = ""
  const listening = new Promise<string>((resolve, reject) => {
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      const said = announcement(out)
      if (said !== undefined) resolve(said)
    })
    child.once("exit", (code) => reject(new Error(`the server exited (${code}) before it listened:\n${out}`)))
  })
  return {
    child,
    output: () => out,
    listening,
    stop: async () => {
      child.kill("SIGTERM")
      await exited
    }
  }
}
