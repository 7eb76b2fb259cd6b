/**
 * Supervision of one agent process: spawn with an argument vector in its own process group,
 * deliver its output line by line under a volume cap, stop it (or time it out) by signalling the
 * whole group, and report how it ended. Spawning never throws; failures resolve `exit`.
 */
import { type ChildProcess, spawn } from "node:child_process"
import type { Readable } from "node:stream"
import { Effect } from "effect"

/** Which pipe a line came from. */
export type OutputStream = "stdout" | "stderr"

/** Why the process ended: by itself, by the timeout, by `stop()`, or it never started. */
export type ExitReason = "exit" | "timeout" | "stopped" | "spawn_error"

/** How an agent process ended. */
export interface AgentExit {
  /** Exit code, or null when a signal ended it or it never started. */
  readonly code: number | null
  /** The signal that ended it (`SIGTERM`, `SIGKILL`, ...), or null. */
  readonly signal: string | null
  readonly reason: ExitReason
  /** True when output went past `maxLogBytes` and the rest was dropped. */
  readonly truncated: boolean
  /** Why spawning failed (`spawn_error`), otherwise null. */
  readonly error: string | null
}

/** What to run and how to watch it. */
export interface SpawnAgentOptions {
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly cwd: string
  /** The complete environment of the child; nothing is inherited (see `buildAgentEnv`). */
  readonly env: Readonly<Record<string, string>>
  /** Written to the child's stdin, which is then closed; null leaves stdin at /dev/null. */
  readonly stdin: string | null
  readonly timeoutMs: number
  /** Cap on delivered output (UTF-8 bytes of lines plus newlines, both streams together). */
  readonly maxLogBytes: number
  /** Called once per line, in order per stream; must be cheap and should not throw. */
  readonly onLine: (stream: OutputStream, line: string) => void
  /**
   * Called for lines past the cap instead of `onLine`, so a caller can still read the final
   * usage/result event of a JSON stream without storing it. Optional: without it, output past the
   * cap is drained without even being split.
   */
  readonly onOverflowLine?: (stream: OutputStream, line: string) => void
  /** Grace between SIGTERM and SIGKILL when the timeout fires (default 5 s). */
  readonly graceMs?: number
  /** Output without a newline is delivered as a line once it reaches this length (default 4 MiB chars). */
  readonly maxLineLength?: number
  /**
   * After the process exits, how long to wait for its pipes to close (a grandchild may still hold
   * them) before closing them ourselves (default 2 s).
   */
  readonly drainMs?: number
}

/** A running agent. */
export interface AgentHandle {
  /** The child's pid (also its process group id), or null when spawning failed. */
  readonly pid: number | null
  /** Resolves once the process has exited and its output has been delivered. Never rejects. */
  readonly exit: Promise<AgentExit>
  /** SIGTERM to the process group now, SIGKILL after `graceMs` (default 5 s). Safe to call again, and after the end. */
  stop(graceMs?: number): void
  /**
   * Stops reading the agent's output, for a consumer that cannot keep up: once the pipes are full
   * the agent's writes block. Reading resumes with `resume()`, and by itself when the process exits.
   */
  pause(): void
  resume(): void
}

/** Default grace between SIGTERM and SIGKILL. */
export const DEFAULT_GRACE_MS = 5_000

const DEFAULT_MAX_LINE_LENGTH = 4 * 1024 * 1024
const DEFAULT_DRAIN_MS = 2_000

/** The line delivered (on stderr) once the cap is reached. */
export const truncationNotice = (maxLogBytes: number): string =>
  `[taskwright] output exceeded ${maxLogBytes} bytes; the rest of this run's output is not stored`

// ---------------------------------------------------------------------------------------------
// Environment

const INHERITED = new Set([
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "LANG",
  "TERM",
  "TMPDIR",
  "SHELL",
  "TZ",
  // Agents call remote APIs; corporate proxies and CA bundles must keep working.
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
  // Credentials and config locations of the built-in agent CLIs.
  "ANTHROPIC_API_KEY",
  "OPENAI_API_KEY",
  "GEMINI_API_KEY",
  "GOOGLE_API_KEY",
  "CODEX_HOME",
  "CLAUDE_CONFIG_DIR"
])

const isInherited = (key: string): boolean => INHERITED.has(key) || key.startsWith("LC_")

/** Never handed to an agent, whoever asks: the service's database and its own settings/secrets. */
const isForbiddenInherited = (key: string): boolean => key === "DATABASE_URL" || key.startsWith("TASKWRIGHT_")

/**
 * The environment of an agent: the allow-listed variables of `processEnv` (PATH, HOME, USER,
 * LANG, LC_*, TERM, TMPDIR, SHELL, proxies, and the agent CLIs' API keys and config dirs), then
 * `extra` on top (the agent's configured `env` and the run's `TASKWRIGHT_PROMPT`,
 * `TASKWRIGHT_TASK_ID`, `TASKWRIGHT_RUN_ID`). `DATABASE_URL` is dropped even from `extra`.
 */
export const buildAgentEnv = (
  processEnv: Readonly<Record<string, string | undefined>>,
  extra: Readonly<Record<string, string>>
): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(processEnv)) {
    if (value !== undefined && isInherited(key) && !isForbiddenInherited(key)) env[key] = value
  }
  for (const [key, value] of Object.entries(extra)) {
    if (key !== "DATABASE_URL") env[key] = value
  }
  return env
}

// ---------------------------------------------------------------------------------------------
// Line splitting

/** Splits decoded text into lines across chunk boundaries; a trailing `\r` is dropped. */
class LineSplitter {
  private pending = ""

  constructor(
    private readonly emit: (line: string) => void,
    private readonly maxLineLength: number
  ) {}

  push(chunk: string): void {
    let newline = chunk.indexOf("\n")
    if (newline === -1) {
      this.pending += chunk
      if (this.pending.length >= this.maxLineLength) this.end()
      return
    }
    this.emitLine(this.pending + chunk.slice(0, newline))
    let start = newline + 1
    newline = chunk.indexOf("\n", start)
    while (newline !== -1) {
      this.emitLine(chunk.slice(start, newline))
      start = newline + 1
      newline = chunk.indexOf("\n", start)
    }
    this.pending = chunk.slice(start)
    if (this.pending.length >= this.maxLineLength) this.end()
  }

  /** Delivers a last line that had no newline. */
  end(): void {
    if (this.pending.length === 0) return
    const line = this.pending
    this.pending = ""
    this.emitLine(line)
  }

  private emitLine(line: string): void {
    this.emit(line.endsWith("\r") ? line.slice(0, -1) : line)
  }
}

/** Counts delivered bytes and switches to overflow once, with a single notice. */
const makeSink = (options: SpawnAgentOptions) => {
  let stored = 0
  let truncated = false
  const safe = (fn: (stream: OutputStream, line: string) => void, stream: OutputStream, line: string): void => {
    try {
      fn(stream, line)
    } catch {
      // A failing log callback must not take the supervisor (and the service) down.
    }
  }
  const deliver = (stream: OutputStream, line: string): void => {
    if (!truncated) {
      stored += Buffer.byteLength(line, "utf8") + 1
      if (stored <= options.maxLogBytes) return safe(options.onLine, stream, line)
      truncated = true
      safe(options.onLine, "stderr", truncationNotice(options.maxLogBytes))
    }
    if (options.onOverflowLine !== undefined) safe(options.onOverflowLine, stream, line)
  }
  return {
    deliver,
    /** Past the cap and nobody wants the overflow: chunks can be dropped unsplit. */
    discarding: () => truncated && options.onOverflowLine === undefined,
    truncated: () => truncated
  }
}

// ---------------------------------------------------------------------------------------------
// Process groups

/** Signals every process of the group led by `pid`; false when none is left. */
const signalGroup = (pid: number, signal: NodeJS.Signals): boolean => {
  try {
    process.kill(-pid, signal)
    return true
  } catch {
    return false // ESRCH: the whole group is gone already
  }
}

const failedSpawn = (error: unknown): AgentHandle => ({
  pid: null,
  exit: Promise.resolve({
    code: null,
    signal: null,
    reason: "spawn_error",
    truncated: false,
    error: error instanceof Error ? error.message : String(error)
  }),
  stop: () => {},
  pause: () => {},
  resume: () => {}
})

const trySpawn = (options: SpawnAgentOptions): ChildProcess | Error => {
  try {
    return spawn(options.command, [...options.args], {
      cwd: options.cwd,
      env: { ...options.env },
      // Own process group, so a stop reaches whatever the agent started.
      detached: true,
      stdio: [options.stdin === null ? "ignore" : "pipe", "pipe", "pipe"],
      windowsHide: true
    })
  } catch (error) {
    // Invalid arguments (a NUL byte in an argument, ...) throw synchronously.
    return error instanceof Error ? error : new Error(String(error))
  }
}

const watchStream = (
  stream: Readable | null,
  name: OutputStream,
  sink: ReturnType<typeof makeSink>,
  maxLineLength: number
): LineSplitter | null => {
  if (stream === null) return null
  const splitter = new LineSplitter((line) => sink.deliver(name, line), maxLineLength)
  // The decoder keeps multi-byte characters that straddle two chunks intact.
  stream.setEncoding("utf8")
  stream.on("data", (chunk: string) => {
    if (!sink.discarding()) splitter.push(chunk)
  })
  stream.on("error", () => {})
  return splitter
}

/**
 * Starts an agent process. The returned handle's `exit` resolves when the process has exited and
 * both pipes are closed (or `drainMs` after the exit, if a leftover grandchild keeps them open).
 * Whatever is left of the process group after the agent exits is sent SIGTERM, then SIGKILL
 * after the grace period: a finished run leaves no processes behind.
 */
export const spawnAgent = (options: SpawnAgentOptions): AgentHandle => {
  const spawned = trySpawn(options)
  if (spawned instanceof Error) return failedSpawn(spawned)
  const child = spawned
  const pid = child.pid ?? null
  const graceMs = options.graceMs ?? DEFAULT_GRACE_MS
  const maxLineLength = options.maxLineLength ?? DEFAULT_MAX_LINE_LENGTH
  const sink = makeSink(options)
  const splitters = [
    watchStream(child.stdout, "stdout", sink, maxLineLength),
    watchStream(child.stderr, "stderr", sink, maxLineLength)
  ]

  let stopReason: "timeout" | "stopped" | null = null
  let exited: { readonly code: number | null; readonly signal: string | null } | null = null
  let settled = false
  const killTimers: Array<NodeJS.Timeout> = []
  let timeoutTimer: NodeJS.Timeout | null = null
  let resolveExit: (exit: AgentExit) => void = () => {}
  const exit = new Promise<AgentExit>((resolve) => {
    resolveExit = resolve
  })

  /** SIGTERM to the group now and, if anyone was there, SIGKILL after `grace`. */
  const terminate = (grace: number): void => {
    if (pid === null || !signalGroup(pid, "SIGTERM")) return
    const timer = setTimeout(() => signalGroup(pid, "SIGKILL"), grace)
    // Once the run is over, a pending SIGKILL must not keep the service alive on shutdown.
    if (settled) timer.unref()
    killTimers.push(timer)
  }

  const settle = (result: AgentExit): void => {
    if (settled) return
    settled = true
    if (timeoutTimer !== null) clearTimeout(timeoutTimer)
    for (const timer of killTimers) timer.unref()
    resolveExit(result)
  }

  const finish = (): void => {
    if (exited === null || settled) return
    for (const splitter of splitters) splitter?.end()
    const reason = stopReason ?? "exit"
    settle({ code: exited.code, signal: exited.signal, reason, truncated: sink.truncated(), error: null })
    terminate(graceMs) // leftovers of a finished run
  }

  const stop = (grace: number = DEFAULT_GRACE_MS): void => {
    if (settled) return
    // Once the agent itself has exited, stopping only cleans up; it does not change the reason.
    if (exited === null && stopReason === null) stopReason = "stopped"
    terminate(grace)
  }

  child.on("error", (error) => {
    // Only a failed spawn leaves us without an exit event to wait for.
    if (pid === null)
      settle({ code: null, signal: null, reason: "spawn_error", truncated: false, error: error.message })
  })
  const pipes = [child.stdout, child.stderr].filter((stream): stream is Readable => stream !== null)
  const pause = (): void => {
    if (exited === null) for (const pipe of pipes) pipe.pause()
  }
  // What is left in the pipes once the process is gone is bounded: always read it.
  const resume = (): void => {
    for (const pipe of pipes) pipe.resume()
  }

  child.on("exit", (code, signal) => {
    exited = { code, signal }
    resume()
    if (timeoutTimer !== null) clearTimeout(timeoutTimer)
    setTimeout(() => {
      child.stdout?.destroy()
      child.stderr?.destroy()
      finish()
    }, options.drainMs ?? DEFAULT_DRAIN_MS).unref()
  })
  child.on("close", () => finish())

  if (pid !== null) {
    timeoutTimer = setTimeout(() => {
      if (exited !== null || stopReason !== null) return
      stopReason = "timeout"
      terminate(graceMs)
    }, options.timeoutMs)
  }

  if (child.stdin !== null && options.stdin !== null) {
    child.stdin.on("error", () => {}) // EPIPE when the agent never reads its prompt
    child.stdin.end(options.stdin)
  }

  return { pid, exit, stop, pause, resume }
}

/**
 * `spawnAgent` as an Effect: succeeds with how the process ended; interrupting the fiber stops
 * the process group (SIGTERM, SIGKILL after the grace period) and waits for it.
 */
export const runAgent = (options: SpawnAgentOptions): Effect.Effect<AgentExit> =>
  Effect.async<AgentExit>((resume) => {
    const handle = spawnAgent(options)
    void handle.exit.then((result) => resume(Effect.succeed(result)))
    return Effect.promise(() => {
      handle.stop(options.graceMs)
      return handle.exit
    })
  })
