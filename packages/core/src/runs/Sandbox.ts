/**
 * The sandbox of an agent run, made with bubblewrap (`bwrap`, Debian's `bubblewrap`).
 *
 * Each run gets its own PID namespace (with IPC and UTS namespaces), ended with bwrap, which ends
 * with the service (`--die-with-parent`): whatever the agent forks, detaches or `setsid`s, and
 * whatever signals it ignores, nothing of it outlives a stop, a timeout or the service. The host's
 * filesystem is visible read-only, less what the agent has no business seeing: the service's data
 * directory (its keys, `agents.json`, the SQLite store, other runs' worktrees), the projects root
 * and every project's directory, `/home`, `/root`, `/run` and the temporary directories. Writable
 * are only the run's worktree, a private git directory, a private `HOME` and a private `/tmp`,
 * plus the credential paths the agent's configuration names. Hard links out of the worktree fail
 * (`EXDEV`: every writable path is a mount of its own). The network is the host's: agents call
 * their APIs.
 *
 * The worktree's own `.git` file, which points into the project's git directory, is covered by
 * one pointing at the private git directory. That one borrows the project's objects read-only
 * and has its own refs, index and config: the agent may commit, branch and configure as it
 * likes, and none of it reaches the project. The service commits the worktree's files on the
 * run's branch at the end, with its own git directory.
 */
import { spawn } from "node:child_process"
import { lstatSync, realpathSync, statSync } from "node:fs"
import { mkdir, rm, writeFile } from "node:fs/promises"
import { delimiter, dirname, isAbsolute, join, resolve, sep } from "node:path"
import { Effect } from "effect"
import type { SandboxMode } from "../Config.js"
import { resolveProgram, type SandboxSpawn } from "./AgentProcess.js"
import { prepareAgentGitDir } from "./GitWorkspace.js"

/** How agent runs are contained on this host: sandboxed, unsandboxed by choice, or refused. */
export type SandboxKind = "bwrap" | "off" | "unavailable"

/** What a host is told at start: which of the three, and a sentence saying why (and, if refused, how to fix it). */
export interface SandboxStatus {
  readonly mode: SandboxKind
  readonly detail: string
}

/** The status, and the bwrap program runs use when they are sandboxed. */
export interface SandboxProbe extends SandboxStatus {
  readonly bwrap: string | null
}

/**
 * What every sandbox is made of, and exactly what the probe tries: its own PID, IPC and UTS
 * (and, where possible, user and cgroup) namespaces, no capabilities, a new session (no terminal
 * to inject into), death with the service, the host read-only, and fresh `/dev` and `/proc` (the
 * host's processes, the service included, are not in it).
 *
 * No capabilities matters when the service runs as root: bwrap then keeps root's capabilities
 * unless told otherwise, and an agent with them could `umount` what hides the data directory or
 * remount `/` read-write. Without them (and with no new privileges, which bwrap always sets) it
 * cannot mount, unmount or gain any back. Its own user namespace, where the kernel allows one,
 * also locks every mount it inherits: not even a namespace it makes itself can undo them.
 */
const BASE_OPTIONS: ReadonlyArray<string> = [
  "--unshare-user-try",
  "--cap-drop",
  "ALL",
  "--die-with-parent",
  "--new-session",
  "--unshare-pid",
  "--unshare-ipc",
  "--unshare-uts",
  "--unshare-cgroup-try",
  "--ro-bind",
  "/",
  "/",
  "--dev",
  "/dev",
  "--proc",
  "/proc"
]

/** Host directories never shown to an agent (when they exist and are real directories). */
const HIDDEN_SYSTEM_DIRS: ReadonlyArray<string> = ["/home", "/root", "/run", "/var/run", "/var/tmp"]

const PROBE_TIMEOUT_MS = 10_000

const OFF_DETAIL =
  "TASKWRIGHT_SANDBOX=off: agents run unsandboxed, with every right of the service's own user " +
  "(its data directory, keys and store included)"

const unavailable = (why: string): SandboxProbe => ({
  mode: "unavailable",
  bwrap: null,
  detail:
    `no sandbox can be made on this host: ${why}. Agent runs are refused until one can: install ` +
    "bubblewrap (Debian and Ubuntu: apt-get install bubblewrap) on a kernel that allows " +
    "unprivileged user namespaces, or set TASKWRIGHT_SANDBOX=off to run agents unsandboxed"
})

interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  readonly error: string | null
}

/** Runs a short command to its end (killed past `timeoutMs`); never rejects. */
const runShort = (file: string, args: ReadonlyArray<string>, env: Record<string, string>): Promise<Ran> =>
  new Promise((done) => {
    let stdout = ""
    let stderr = ""
    const child = spawn(file, [...args], { env, stdio: ["ignore", "pipe", "pipe"], timeout: PROBE_TIMEOUT_MS })
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8")
    })
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8")
    })
    child.on("error", (error) => done({ code: null, stdout, stderr, error: error.message }))
    child.on("close", (code) => done({ code, stdout, stderr, error: null }))
  })

const firstLine = (text: string): string => text.trim().split("\n")[0]?.trim() ?? ""

/**
 * Finds out how agent runs are contained here: `off` when the operator said so, otherwise
 * `bwrap` when bubblewrap is on the service's PATH and can make the namespaces and mounts every
 * run needs (tried once, with a trivial command), `unavailable` with the reason when not.
 * Never fails.
 */
export const probeSandbox = (mode: SandboxMode, env: Readonly<Record<string, string | undefined>> = process.env) =>
  Effect.promise(async (): Promise<SandboxProbe> => {
    if (mode === "off") return { mode: "off", bwrap: null, detail: OFF_DETAIL }
    const bwrap = resolveProgram("bwrap", "/", env.PATH)
    if (bwrap === null) return unavailable("bubblewrap (bwrap) is not installed, or not on the service's PATH")
    const path = { PATH: env.PATH ?? "" }
    const version = firstLine((await runShort(bwrap, ["--version"], path)).stdout) || "bubblewrap"
    const inner = resolveProgram("true", "/", env.PATH)
    const command = inner === null ? [process.execPath, "-e", ""] : [inner]
    const tried = await runShort(bwrap, [...BASE_OPTIONS, "--tmpfs", "/tmp", "--", ...command], path)
    if (tried.code !== 0) {
      const why = firstLine(tried.stderr) || tried.error || `it exited with ${tried.code ?? "a signal"}`
      return unavailable(`${bwrap} cannot make a sandbox here (${why})`)
    }
    const root =
      process.getuid?.() === 0
        ? "; the service runs as root, so its agents run as root without capabilities: they cannot mount, " +
          "unmount or write the read-only host, but files root owns stay readable to them outside the " +
          "directories the sandbox hides (/etc/shadow, ...): run Taskwright as an unprivileged user"
        : ""
    return { mode: "bwrap", bwrap, detail: `agent runs are sandboxed by ${version} (${bwrap})${root}` }
  })

// ---------------------------------------------------------------------------------------------
// The mounts of one run

/** One mount of a sandbox; `hide` is an empty read-only directory over `target`. */
export interface Mount {
  readonly kind: "hide" | "bind" | "ro-bind" | "bind-try" | "ro-bind-try"
  readonly source: string
  readonly target: string
}

const depth = (path: string): number => path.split(sep).filter((part) => part !== "").length

/** True when `a` is `b` or inside it. */
const within = (a: string, b: string): boolean => a === b || b === sep || a.startsWith(`${b}${sep}`)

/** True when one of the two paths is the other or inside it. */
export const overlaps = (a: string, b: string): boolean => within(a, b) || within(b, a)

/**
 * bwrap's options for `mounts` after the base ones. A mount hides everything below its target,
 * so mounts are made from the shallowest target to the deepest (what is exposed inside a hidden
 * directory is mounted after the hiding), in the given order at equal depth. Of two mounts on one
 * target a hiding one wins, whatever comes after it; otherwise the later. Hidden directories are
 * made read-only last, once every mount point inside them exists.
 */
export const sandboxArgs = (mounts: ReadonlyArray<Mount>, cwd: string): ReadonlyArray<string> => {
  const ordered = mounts
    .map((mount, index) => ({ mount, index }))
    .sort((a, b) => depth(a.mount.target) - depth(b.mount.target) || a.index - b.index)
    .map(({ mount }) => mount)
  const winner = new Map<string, Mount>()
  for (const mount of ordered) {
    if (winner.get(mount.target)?.kind !== "hide") winner.set(mount.target, mount)
  }
  const kept = ordered.filter((mount) => winner.get(mount.target) === mount)
  const args: Array<string> = [...BASE_OPTIONS]
  for (const mount of kept) {
    if (mount.kind === "hide") args.push("--tmpfs", mount.target)
    else args.push(`--${mount.kind}`, mount.source, mount.target)
  }
  for (const mount of kept) if (mount.kind === "hide") args.push("--remount-ro", mount.target)
  args.push("--chdir", cwd)
  return args
}

/** `path` with symlinks resolved, or null when it does not exist. */
const real = (path: string): string | null => {
  try {
    return realpathSync(path)
  } catch {
    return null
  }
}

/** The path with symlinks resolved, when it is a directory; else null. */
const realDirectory = (path: string): string | null => {
  const resolved = real(path)
  try {
    return resolved !== null && lstatSync(resolved).isDirectory() ? resolved : null
  } catch {
    return null
  }
}

/** Where a run's private directories live on the host: `<data dir>/sandboxes/<run id>`. */
export const sandboxDir = (dataDir: string, runId: string): string => join(dataDir, "sandboxes", runId)

/** What a run's sandbox is made from. */
export interface SandboxRequest {
  readonly bwrap: string
  readonly runId: string
  readonly dataDir: string
  readonly repoPath: string
  readonly worktreePath: string
  readonly branch: string
  /** More directories the agent must not see: the projects root, every project's directory. */
  readonly hidden: ReadonlyArray<string>
  /** The agent's program (`argv[0]`): if it lives in a hidden directory, its directory is shown read-only. */
  readonly program: string
  /**
   * Files the agent's configured command line names (a script run by an interpreter): their
   * directories are shown read-only too. Only the operator's configuration, never the run's
   * arguments, which carry the task's text.
   */
  readonly commandFiles: ReadonlyArray<string>
  /** Files or directories shown read-write at their own path (an agent CLI's login and settings). */
  readonly credentials: ReadonlyArray<string>
  /** Files or directories shown read-only at their own path. */
  readonly readOnlyPaths: ReadonlyArray<string>
  /** The service's environment: its PATH (whose directories stay visible) and HOME (where the private home goes). */
  readonly env: Readonly<Record<string, string | undefined>>
  /**
   * Show the worktree read-only (a review run reads a pull request and changes nothing); its
   * private git directory, HOME and /tmp stay writable, so git and the agent's CLI still work.
   */
  readonly readOnlyWorktree?: boolean
}

/** A sandbox ready for `spawnAgent`, the variables the agent gets inside it, and remarks for the run's log. */
export interface PreparedSandbox {
  readonly spawn: SandboxSpawn
  readonly env: { readonly HOME: string; readonly TMPDIR: string }
  readonly notes: ReadonlyArray<string>
}

/**
 * The home directory the agent sees: the service's own path, so tools find their files where
 * they expect them; or, when that is not a directory (`/nonexistent` of system users), one the
 * sandbox can create its mount point for.
 */
const homeTarget = (home: string | undefined): string => {
  const existing = home !== undefined && isAbsolute(home) ? realDirectory(home) : null
  if (existing !== null && existing !== sep) return existing
  return realDirectory("/home") === null ? "/tmp/home" : "/home/agent"
}

/**
 * Prepares the sandbox of a run: its private directories under {@link sandboxDir} (home, tmp,
 * and the agent's git directory, see `prepareAgentGitDir`), and the bwrap options that show the
 * agent what it may see and nothing more.
 */
export const prepareSandbox = Effect.fn("Sandbox.prepare")(function* (request: SandboxRequest) {
  const notes: Array<string> = []
  const dir = sandboxDir(request.dataDir, request.runId)
  const hostHome = join(dir, "home")
  const hostTmp = join(dir, "tmp")
  const gitDir = join(dir, "git")
  const dotGit = join(dir, "dotgit")
  yield* Effect.promise(async () => {
    for (const path of [hostHome, hostTmp]) await mkdir(path, { recursive: true, mode: 0o700 })
  })
  const dataDir = real(request.dataDir) ?? resolve(request.dataDir)
  const home = homeTarget(request.env.HOME)
  // What no agent may see: these are never shown again, whatever else asks for it.
  const sensitive = [dataDir, ...request.hidden.flatMap((path) => [resolve(path), real(path) ?? resolve(path)])]
  // Hidden: an empty read-only directory stands in. The home and /tmp are replaced by private ones instead.
  const hides = [
    ...HIDDEN_SYSTEM_DIRS,
    ...(request.env.HOME === undefined ? [] : [request.env.HOME]),
    ...sensitive
  ].flatMap((path) => {
    const dir = realDirectory(path)
    return dir === null || dir === home || dir === "/tmp" ? [] : [dir]
  })
  // Areas the agent does not see as the host has them: hidden, or replaced by private directories.
  const covered = [...hides, home, "/tmp"]
  const showable = (path: string): boolean =>
    covered.some((area) => within(path, area) && path !== area) && !sensitive.some((s) => overlaps(path, s))

  // The repository names the object directories its agent reads (`objects/info/alternates`): any
  // path on the host. Only the project's own, inside its directory, may be in a hidden area; no
  // other may be in one, contain one or be the same.
  const project = real(request.repoPath) ?? resolve(request.repoPath)
  const mayBorrow = (dir: string, own: boolean): boolean =>
    (own && within(dir, project)) || ![...covered, ...sensitive].some((area) => overlaps(dir, area))
  const agentGit = yield* prepareAgentGitDir({
    repoPath: request.repoPath,
    worktreePath: request.worktreePath,
    gitDir,
    branch: request.branch,
    mayBorrow
  })
  for (const dir of agentGit.refused) {
    notes.push(
      `The repository borrows objects from ${dir} (objects/info/alternates): not shown, it is or overlaps a directory the sandbox hides`
    )
  }
  const worktree = real(request.worktreePath) ?? resolve(request.worktreePath)
  const privateGit = real(agentGit.gitDir) ?? agentGit.gitDir
  yield* Effect.promise(() => writeFile(dotGit, `gitdir: ${privateGit}\n`))

  const exposed: Array<string> = []
  const expose = (path: string | null) => {
    if (path !== null && showable(path) && !exposed.includes(path)) exposed.push(path)
  }
  // Programs on the PATH stay runnable even where they live in a hidden directory (~/.local/bin, ...).
  for (const entry of (request.env.PATH ?? "").split(delimiter)) {
    if (isAbsolute(entry)) expose(realDirectory(entry))
  }
  const program = resolveProgram(request.program, worktree, request.env.PATH)
  for (const file of [...(program === null ? [] : [program]), ...request.commandFiles.filter(isAbsolute)]) {
    const resolved = real(file)
    if (resolved !== null && !resolved.endsWith(sep) && statSync(resolved, { throwIfNoEntry: false })?.isFile()) {
      expose(dirname(resolved))
    }
  }
  // Name resolution: /etc/resolv.conf is often a link into /run.
  const resolvConf = real("/etc/resolv.conf")

  const pathMounts = (paths: ReadonlyArray<string>, kind: "bind-try" | "ro-bind-try", what: string) =>
    paths.flatMap((path): ReadonlyArray<Mount> => {
      const target = resolve(path)
      if (sensitive.some((s) => overlaps(target, s))) {
        notes.push(`${what} ${path} is not shown: it overlaps the data directory or a project's directory`)
        return []
      }
      if (real(target) === null) {
        notes.push(`${what} ${path} does not exist: not shown`)
        return []
      }
      return [{ kind, source: target, target }]
    })

  const mounts: Array<Mount> = [
    ...hides.map((target): Mount => ({ kind: "hide", source: "", target })),
    { kind: "bind", source: hostTmp, target: "/tmp" },
    { kind: "bind", source: hostHome, target: home },
    ...exposed.map((target): Mount => ({ kind: "ro-bind", source: target, target })),
    ...(resolvConf !== null && covered.some((area) => within(resolvConf, area))
      ? [{ kind: "ro-bind-try", source: resolvConf, target: resolvConf } satisfies Mount]
      : []),
    ...pathMounts(request.readOnlyPaths, "ro-bind-try", "Read-only path"),
    ...pathMounts(request.credentials, "bind-try", "Credentials path"),
    { kind: request.readOnlyWorktree === true ? "ro-bind" : "bind", source: worktree, target: worktree },
    { kind: "bind", source: privateGit, target: privateGit },
    ...agentGit.objectDirs.map((target): Mount => ({ kind: "ro-bind", source: target, target })),
    { kind: "ro-bind", source: dotGit, target: join(worktree, ".git") }
  ]
  return {
    spawn: { bwrap: request.bwrap, args: sandboxArgs(mounts, worktree) },
    env: { HOME: home, TMPDIR: "/tmp" },
    notes
  } satisfies PreparedSandbox
})

/** Removes a run's private directories (its home, tmp and git directory). Never fails. */
export const removeSandbox = (dataDir: string, runId: string): Effect.Effect<void> =>
  Effect.promise(() => rm(sandboxDir(dataDir, runId), { recursive: true, force: true }).catch(() => undefined))
