/** `taskwright serve` run from the built binary, as the CLI's tests start it. */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import { join } from "node:path"

export const bin = join(__dirname, "..", "dist", "main.js")

export interface ServeProcess {
  readonly child: ChildProcessWithoutNullStreams
  /** Everything it has written to stdout so far. */
  readonly output: () => string
  /** Settles once it says it is listening; rejects if it exits first. */
  readonly listening: Promise<void>
  /** SIGTERM, and its exit awaited. */
  readonly stop: () => Promise<void>
}

/** Serves `--data-dir dataDir` on a free port, with `env` only, node started with `nodeArgs` first. */
export const startServe = (
  dataDir: string,
  env: Record<string, string>,
  nodeArgs: ReadonlyArray<string> = []
): ServeProcess => {
  const child = spawn(process.execPath, [...nodeArgs, bin, "serve", "--port", "0", "--data-dir", dataDir], { env })
  child.stdin.end()
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  let out = ""
  const listening = new Promise<void>((resolve, reject) => {
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      if (out.includes("listening on")) resolve()
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
