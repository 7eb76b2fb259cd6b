/**
 * Supervision of one agent process: spawn with an argument vector in its own process group
 * (and, sandboxed, in bubblewrap's PID namespace), deliver its output line by line under a
 * volume cap, stop it (or time it out) by signalling all of it, and report how it ended.
 * Spawning never throws; failures resolve `exit`.
 */
import { type ChildProcess, type StdioOptions, spawn } from "node:child_process"
import { accessSync, constants as fsConstants, statSync } from "node:fs"
import { constants as osConstants } from "node:os"
import { delimiter, isAbsolute, join, resolve } from "node:path"
import type { Readable } from "node:stream"
import { Effect } from "effect"
import {
  killNamespace,
  type PidNamespace,
  pidNamespace,
  signalNamespace,
  waitGroupGone,
  waitNamespaceGone
} from "./ProcessGroups.js"

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

/**
 * Runs the agent inside bubblewrap: its program and the options that build the sandbox (see
 * `Sandbox.ts`). The options must include `--unshare-pid` and `--die-with-parent`: the agent and
 * everything it starts live in a PID namespace that ends with bwrap, and bwrap ends with us.
 */
export interface SandboxSpawn {
  readonly bwrap: string
  readonly args: ReadonlyArray<string>
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
  /** Contain the agent in a sandbox; without, it is a plain child in its own process group. */
  readonly sandbox?: SandboxSpawn
}

/** A running agent. */
export interface AgentHandle {
  /**
   * The child's pid (also its process group id), or null when spawning failed. Sandboxed, the
   * child is bwrap; the agent runs below it in its own PID namespace.
   */
  readonly pid: number | null
  /** Resolves once the process has exited and its output has been delivered. Never rejects. */
  readonly exit: Promise<AgentExit>
  /**
   * SIGTERM to every process of the agent now (its process group; sandboxed, every process of
   * its PID namespace, whatever group or session it moved to), SIGKILL after `graceMs` (default
   * 5 s). Safe to call again, and after the end.
   */
  stop(graceMs?: number): void
  /**
   * Resolves once no process of the agent is left (its process group, and sandboxed its PID
   * namespace), killing what is left after `timeoutMs`; answers whether all is gone.
   */
  gone(timeoutMs: number): Promise<boolean>
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
  gone: () => Promise.resolve(true),
  pause: () => {},
  resume: () => {}
})

/** True when `path` is a file this process may execute. */
const isExecutable = (path: string): boolean => {
  try {
    accessSync(path, fsConstants.X_OK)
    return statSync(path).isFile()
  } catch {
    return false
  }
}

/**
 * Where `command` is, as `execvp` would find it (a name with a slash is a path); null when it is
 * nowhere. Checked before a sandbox is made, so a missing program is a failed start, as it is
 * without one, rather than bwrap's own exit code.
 */
export const resolveProgram = (command: string, cwd: string, path: string | undefined): string | null => {
  if (command.includes("/")) {
    const full = isAbsolute(command) ? command : resolve(cwd, command)
    return isExecutable(full) ? full : null
  }
  for (const dir of (path ?? "").split(delimiter)) {
    if (dir === "" || !isAbsolute(dir)) continue
    const full = join(dir, command)
    if (isExecutable(full)) return full
  }
  return null
}

/** Signal names by number, to read bwrap's exit codes (128 + n for a child killed by signal n). */
const SIGNAL_NAMES = new Map<number, string>(Object.entries(osConstants.signals).map(([name, n]) => [n, name]))

/** The file descriptor bwrap writes the sandbox's pids to (`--info-fd`). */
const INFO_FD = 3

const trySpawn = (options: SpawnAgentOptions): ChildProcess | Error => {
  try {
    const stdin = options.stdin === null ? "ignore" : "pipe"
    const sandbox = options.sandbox
    if (sandbox === undefined) {
      return spawn(options.command, [...options.args], {
        cwd: options.cwd,
        env: { ...options.env },
        // Own process group, so a stop reaches whatever the agent started.
        detached: true,
        stdio: [stdin, "pipe", "pipe"],
        windowsHide: true
      })
    }
    if (resolveProgram(options.command, options.cwd, options.env.PATH) === null) {
      return Object.assign(new Error(`spawn ${options.command} ENOENT`), { code: "ENOENT" })
    }
    const stdio: StdioOptions = [stdin, "pipe", "pipe", "pipe"]
    return spawn(
      sandbox.bwrap,
      [...sandbox.args, "--info-fd", String(INFO_FD), "--", options.command, ...options.args],
      { cwd: options.cwd, env: { ...options.env }, detached: true, stdio, windowsHide: true }
    )
  } catch (error) {
    // Invalid arguments (a NUL byte in an argument, ...) throw synchronously.
    return error instanceof Error ? error : new Error(String(error))
  }
}

const watchStream = (
  stream: Readable | null,
  deliver: (line: string) => void,
  sink: ReturnType<typeof makeSink>,
  maxLineLength: number
): LineSplitter | null => {
  if (stream === null) return null
  const splitter = new LineSplitter(deliver, maxLineLength)
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

  let stopReason: "timeout" | "stopped" | null = null
  let exited: { readonly code: number | null; readonly signal: string | null } | null = null
  let settled = false
  const killTimers: Array<NodeJS.Timeout> = []
  let timeoutTimer: NodeJS.Timeout | null = null
  let resolveExit: (exit: AgentExit) => void = () => {}
  const exit = new Promise<AgentExit>((resolve) => {
    resolveExit = resolve
  })

  const sandboxed = options.sandbox !== undefined
  // Sandboxed: the agent's PID namespace, once bwrap has said where it is.
  let namespace: PidNamespace | null = null
  let pendingGrace: number | null = null
  let lastBwrapError: string | null = null

  const later = (fn: () => void, ms: number): void => {
    const timer = setTimeout(fn, ms)
    // Once the run is over, a pending SIGKILL must not keep the service alive on shutdown.
    if (settled) timer.unref()
    killTimers.push(timer)
  }

  /** SIGTERM to all of the agent now and, if anyone was there, SIGKILL after `grace`. */
  const terminate = (grace: number): void => {
    if (pid === null) return
    if (!sandboxed) {
      if (signalGroup(pid, "SIGTERM")) later(() => signalGroup(pid, "SIGKILL"), grace)
      return
    }
    const ns = namespace
    if (ns === null) {
      // bwrap has not said yet where the agent is: terminate once it does, and in any case
      // SIGKILL bwrap after the grace period (its namespace dies with it).
      pendingGrace = Math.min(pendingGrace ?? grace, grace)
      later(() => signalGroup(pid, "SIGKILL"), grace)
      return
    }
    // bwrap itself is spared the SIGTERM: its death would SIGKILL the namespace at once.
    signalNamespace(ns, "SIGTERM")
    later(() => {
      killNamespace(ns)
      signalGroup(pid, "SIGKILL")
    }, grace)
  }

  const info = sandboxed ? (child.stdio[INFO_FD] as Readable | null | undefined) : null
  if (info !== null && info !== undefined) {
    let text = ""
    info.setEncoding("utf8")
    info.on("data", (chunk: string) => {
      if (namespace !== null) return
      text += chunk
      try {
        const parsed = JSON.parse(text) as { readonly "child-pid"?: unknown; readonly "pid-namespace"?: unknown }
        const childPid = parsed["child-pid"]
        const nsId = parsed["pid-namespace"]
        if (typeof childPid === "number" && typeof nsId === "number") namespace = pidNamespace(childPid, nsId)
      } catch {
        return // not all of it yet
      }
      if (namespace !== null && pendingGrace !== null) terminate(pendingGrace)
    })
    info.on("error", () => {})
  }

  const splitters = [
    watchStream(child.stdout, (line) => sink.deliver("stdout", line), sink, maxLineLength),
    watchStream(
      child.stderr,
      (line) => {
        if (sandboxed && namespace === null && line.startsWith("bwrap: ")) lastBwrapError = line.slice(7)
        sink.deliver("stderr", line)
      },
      sink,
      maxLineLength
    )
  ]

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
    let { code, signal } = exited
    if (sandboxed && namespace === null) {
      // bwrap exited without starting the agent: its own error is on stderr.
      const why = lastBwrapError ?? `the sandbox could not be set up (bwrap exited with ${code ?? signal})`
      settle({ code: null, signal: null, reason: "spawn_error", truncated: sink.truncated(), error: why })
      return
    }
    // bwrap reports an agent killed by signal n as exit code 128 + n.
    if (sandboxed && code !== null && code > 128 && SIGNAL_NAMES.has(code - 128)) {
      signal = SIGNAL_NAMES.get(code - 128) ?? null
      code = null
    }
    const reason = stopReason ?? "exit"
    settle({ code, signal, reason, truncated: sink.truncated(), error: null })
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

  const gone = async (timeoutMs: number): Promise<boolean> => {
    if (pid === null) return true
    const deadline = Date.now() + timeoutMs
    const groupGone = await waitGroupGone(pid, timeoutMs)
    const ns = namespace
    if (ns === null) return groupGone
    return (await waitNamespaceGone(ns, Math.max(0, deadline - Date.now()))) && groupGone
  }

  return { pid, exit, stop, gone, pause, resume }
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
