/** Checks on the processes an agent run leaves behind, and polling. */
import { readFileSync } from "node:fs"

/** True while `pid` runs. Zombies count as gone: a sandbox's init does not reap orphans. */
export const isRunning = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return false
    throw error
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z"
  } catch {
    return false
  }
}

/**
 * Polls `probe` every `intervalMs` until `done` holds and answers the last value; rejects after
 * `timeoutMs` with the last value in the message.
 */
export const waitFor = async <T>(
  probe: () => Promise<T> | T,
  done: (value: T) => boolean,
  options: { readonly timeoutMs?: number; readonly intervalMs?: number; readonly what?: string } = {}
): Promise<T> => {
  const deadline = Date.now() + (options.timeoutMs ?? 20_000)
  let value = await probe()
  while (!done(value)) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${options.what ?? "a condition"}: ${JSON.stringify(value)}`)
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 20))
    value = await probe()
  }
  return value
}
