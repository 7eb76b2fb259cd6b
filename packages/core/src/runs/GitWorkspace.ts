/**
 * Git operations for agent runs, hardened against the repositories they work on and the agents
 * that work in them.
 *
 * A project's repository is user-controlled and a run's worktree agent-controlled, so git must
 * never run code from either: every call disables hooks and fsmonitor, neutralises clean/smudge
 * filters configured in the repository's own config, never looks inside nested repositories or
 * submodules, never uses external diff or textconv, signs nothing, and runs without a terminal
 * (no prompts). It reads no configuration but the repository's own: the global and system files
 * are /dev/null, `HOME` and `XDG_CONFIG_HOME` point where nothing can be written, and the
 * environment is an allow-list (PATH, locale, time zone, transport settings) that carries none
 * of the service's secrets. User-supplied names come after `--end-of-options`. Git is always
 * spawned with an argument vector, never a shell.
 */
import { spawn } from "node:child_process"
import { constants as fsConstants } from "node:fs"
import { copyFile, lstat, mkdir, open, readFile, realpath, rm, writeFile } from "node:fs/promises"
import { dirname, isAbsolute, join, resolve } from "node:path"
import { validateBranchName } from "@taskwright/domain"
import { Data, Effect } from "effect"

/** A git command failed or could not be run; `stderr` is git's own explanation. */
export class GitError extends Data.TaggedError("GitError")<{
  readonly message: string
  readonly stderr: string
}> {}

/**
 * The config every git invocation starts with. Child gits (`worktree remove`'s status, ...) get
 * it too, through `GIT_CONFIG_PARAMETERS`.
 */
export const SAFE_GIT_CONFIG: ReadonlyArray<string> = [
  "-c",
  "core.hooksPath=/dev/null",
  "-c",
  "core.fsmonitor=false",
  // The defaults live under XDG_CONFIG_HOME; named here as well, whatever the environment says.
  "-c",
  "core.attributesFile=/dev/null",
  "-c",
  "core.excludesFile=/dev/null",
  // A nested repository in a worktree is the agent's: git must not start a git inside it.
  "-c",
  "diff.ignoreSubmodules=all",
  "-c",
  "submodule.recurse=false",
  "--no-pager",
  "--no-optional-locks"
]

const DEFAULT_TIMEOUT_MS = 120_000
const CLONE_TIMEOUT_MS = 600_000

/**
 * The variables of the service's environment git may see: where programs are, the locale and
 * time zone, and what transports need (ssh, proxies, CA bundles). Everything else stays behind:
 * the service's secrets (`TASKWRIGHT_*`, `DATABASE_URL`, ...), and `GIT_DIR`, `GIT_CONFIG_*` and
 * the like, which would redirect or reconfigure git.
 */
const GIT_ENV_ALLOWED = new Set([
  "PATH",
  "LANG",
  "LANGUAGE",
  "TZ",
  "GIT_SSH",
  "GIT_SSH_COMMAND",
  "GIT_SSH_VARIANT",
  "GIT_SSL_CAINFO",
  "GIT_SSL_CAPATH",
  "SSH_AUTH_SOCK",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "ALL_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
  "all_proxy",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "CURL_CA_BUNDLE"
])

/**
 * Fixed for every call. /dev/null is not a directory: nothing can ever be written below it, so
 * no `~/.gitconfig`, `~/.config/git/attributes` or `~/.config/git/ignore` can appear there (an
 * agent running as the service's user could create any real directory).
 */
const GIT_ENV_FIXED: Readonly<Record<string, string>> = {
  HOME: "/dev/null",
  XDG_CONFIG_HOME: "/dev/null",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_CONFIG_SYSTEM: "/dev/null",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_ATTR_NOSYSTEM: "1",
  GIT_NO_REPLACE_OBJECTS: "1",
  GIT_TERMINAL_PROMPT: "0",
  GIT_OPTIONAL_LOCKS: "0",
  LC_ALL: "C"
}

/** The environment of the service's git: the allow-listed variables of `processEnv`, `extra`, and the fixed settings. */
export const serviceGitEnv = (
  processEnv: Readonly<Record<string, string | undefined>>,
  extra: Readonly<Record<string, string>> = {}
): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(processEnv)) {
    if (value !== undefined && (GIT_ENV_ALLOWED.has(key) || key.startsWith("LC_"))) env[key] = value
  }
  return { ...env, ...extra, ...GIT_ENV_FIXED }
}

interface GitResult {
  readonly stdout: string
  readonly stderr: string
  readonly code: number | null
}

interface RunOptions {
  /** Exit codes that are answers rather than failures (default: only 0). */
  readonly okCodes?: ReadonlyArray<number>
  readonly input?: string
  readonly env?: Readonly<Record<string, string>>
  readonly timeoutMs?: number
}

/** The subcommand of an argument vector, for error messages (`-c x=y`, `-C dir` skipped). */
const subcommand = (args: ReadonlyArray<string>): string => {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? ""
    if (arg === "-c" || arg === "-C") i++
    else if (!arg.startsWith("-")) return arg
  }
  return ""
}

const lastLine = (text: string): string => text.trim().split("\n").pop() ?? ""

/**
 * Runs git with the safe prefix. Own process group with no controlling terminal, so ssh cannot
 * prompt either; a timeout or an interruption kills the whole group.
 */
const runGit = (args: ReadonlyArray<string>, options: RunOptions = {}): Effect.Effect<GitResult, GitError> =>
  Effect.async<GitResult, GitError>((resume) => {
    const fullArgs = [...SAFE_GIT_CONFIG, ...args]
    const child = spawn("git", fullArgs, {
      env: serviceGitEnv(process.env, options.env),
      detached: true,
      stdio: [options.input === undefined ? "ignore" : "pipe", "pipe", "pipe"]
    })
    const stdout: Array<Buffer> = []
    const stderr: Array<Buffer> = []
    child.stdout?.on("data", (chunk: Buffer) => stdout.push(chunk))
    child.stderr?.on("data", (chunk: Buffer) => stderr.push(chunk))
    const kill = (): void => {
      if (child.pid === undefined) return
      try {
        process.kill(-child.pid, "SIGKILL")
      } catch {
        // already gone
      }
    }
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      kill()
    }, options.timeoutMs ?? DEFAULT_TIMEOUT_MS)
    child.on("error", (error) => {
      clearTimeout(timer)
      resume(Effect.fail(new GitError({ message: `cannot run git: ${error.message}`, stderr: "" })))
    })
    child.on("close", (code) => {
      clearTimeout(timer)
      const result = {
        stdout: Buffer.concat(stdout).toString("utf8"),
        stderr: Buffer.concat(stderr).toString("utf8"),
        code
      }
      const ok = code !== null && (options.okCodes ?? [0]).includes(code)
      if (ok) return resume(Effect.succeed(result))
      const why = timedOut ? "timed out" : lastLine(result.stderr) || `exit ${code ?? "by signal"}`
      resume(Effect.fail(new GitError({ message: `git ${subcommand(args)} failed: ${why}`, stderr: result.stderr })))
    })
    if (child.stdin !== null) {
      child.stdin.on("error", () => {})
      child.stdin.end(options.input)
    }
    return Effect.sync(kill)
  })

const gitOut = (args: ReadonlyArray<string>, options?: RunOptions): Effect.Effect<string, GitError> =>
  Effect.map(runGit(args, options), (result) => result.stdout)

const fail = (message: string): Effect.Effect<never, GitError> => Effect.fail(new GitError({ message, stderr: "" }))

// ---------------------------------------------------------------------------------------------
// Validation

const SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/

/**
 * Checks a clone URL: `https://`, `ssh://`, `file://` or scp-like `git@host:path`. Everything
 * else (`http://`, `git://`, `ext::`, local paths, option-like strings) is refused. Returns why,
 * or null when it is fine.
 */
export const validateGitUrl = (url: string): string | null => {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (url.length === 0 || url.length > 2048 || /[\s\u0000-\u001f\u007f]/.test(url)) {
    return "git URL is empty, too long or contains whitespace"
  }
  if (/^git@[A-Za-z0-9][A-Za-z0-9.-]*:[^-]/.test(url)) return null
  const scheme = /^(https|ssh|file):\/\//.exec(url)?.[1]
  if (scheme === undefined) return "git URL must start with https://, ssh://, file:// or git@host:"
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return "git URL is not a valid URL"
  }
  if (scheme !== "file" && (parsed.hostname === "" || parsed.hostname.startsWith("-")))
    return "git URL has no valid host"
  if (scheme === "file" && parsed.pathname.length <= 1) return "file:// URL has no path"
  return null
}

// ---------------------------------------------------------------------------------------------
// Repository config the repository itself controls

const absolute = (path: string): string => resolve(path)

const realOrSelf = (path: string): Effect.Effect<string> =>
  Effect.promise(() => realpath(path).catch(() => resolve(path)))

/**
 * `-c` arguments that disable every clean/smudge/process filter defined in the repository's own
 * config (local or worktree scope): such a filter is a command the repository's owner chose.
 * The global and system config are never read (`GIT_CONFIG_GLOBAL`/`GIT_CONFIG_SYSTEM` are
 * /dev/null), so no filter of the operator's runs either: with git-lfs, files are committed as
 * they are in the worktree, not as LFS pointers.
 */
const filterOverrides = (repoPath: string): Effect.Effect<ReadonlyArray<string>, GitError> =>
  Effect.gen(function* () {
    const out = yield* gitOut(["-C", repoPath, "config", "-z", "--show-scope", "--get-regexp", "^filter\\."], {
      okCodes: [0, 1]
    })
    const drivers = new Set<string>()
    const fields = out.split("\0")
    for (let i = 0; i + 1 < fields.length; i += 2) {
      const scope = fields[i]
      const key = (fields[i + 1] ?? "").split("\n")[0] ?? ""
      if (scope !== "local" && scope !== "worktree") continue
      const name = /^filter\.(.+)\.[^.]+$/.exec(key)?.[1]
      if (name === undefined) continue
      if (name.includes("=")) return yield* fail(`repository config defines a filter git cannot override: ${name}`)
      drivers.add(name)
    }
    return [...drivers].flatMap((name) => [
      "-c",
      `filter.${name}.clean=`,
      "-c",
      `filter.${name}.smudge=`,
      "-c",
      `filter.${name}.process=`,
      "-c",
      `filter.${name}.required=false`
    ])
  })

/** The repository's shared git directory (`.git` of the main checkout), absolute and resolved. */
const commonDir = (dir: string): Effect.Effect<string, GitError> =>
  Effect.flatMap(gitOut(["-C", dir, "rev-parse", "--path-format=absolute", "--git-common-dir"]), (out) =>
    realOrSelf(out.trim())
  )

/**
 * Runs git in `dir` with the repository's own filters disabled, after checking that `dir` is the
 * top of a work tree: if a worktree lost its `.git` file, git would otherwise walk up and act on
 * whatever repository encloses it. With `repoPath`, `dir` must also be a work tree of that
 * repository: a `.git` file rewritten to point at another repository is refused.
 */
const gitIn = (dir: string, repoPath?: string) =>
  Effect.gen(function* () {
    const top = yield* gitOut(["-C", dir, "rev-parse", "--show-toplevel"])
    const [actual, expected] = yield* Effect.all([realOrSelf(top.trim()), realOrSelf(dir)])
    if (actual !== expected) return yield* fail(`${dir} is not the top of a git work tree`)
    if (repoPath !== undefined) {
      const [mine, theirs] = yield* Effect.all([commonDir(dir), commonDir(absolute(repoPath))])
      if (mine !== theirs) return yield* fail(`${dir} is not a work tree of ${repoPath}`)
    }
    const overrides = yield* filterOverrides(dir)
    return {
      run: (args: ReadonlyArray<string>, options?: RunOptions) => runGit([...overrides, "-C", dir, ...args], options),
      out: (args: ReadonlyArray<string>, options?: RunOptions) => gitOut([...overrides, "-C", dir, ...args], options)
    }
  })

// ---------------------------------------------------------------------------------------------
// Queries

/** True when `path` is the top-level directory of a (non-bare) git work tree. Never fails. */
export const isGitRepository = Effect.fn("GitWorkspace.isGitRepository")(function* (path: string) {
  const top = yield* Effect.either(gitOut(["-C", absolute(path), "rev-parse", "--show-toplevel"]))
  if (top._tag === "Left") return false
  const [actual, expected] = yield* Effect.all([realOrSelf(top.right.trim()), realOrSelf(path)])
  return actual === expected
})

/**
 * Where a repository keeps its data, symlinks resolved: its own git directory, the shared one
 * (the same for a main checkout) and the top of its work tree (null when bare).
 */
export interface RepositoryDirs {
  readonly gitDir: string
  readonly commonDir: string
  readonly topLevel: string | null
}

/**
 * The directories of the repository at `path` itself (git does not look above it), or null when
 * `path` is not one. A `.git` file (`gitdir:`), a `commondir` file, a symlinked `.git` or
 * `core.worktree` can put them anywhere on the host, and a worktree or a branch is written in the
 * common one: callers decide whether that place is acceptable before git writes there.
 */
export const repositoryDirs = Effect.fn("GitWorkspace.repositoryDirs")(function* (path: string) {
  const dir = absolute(path)
  const env = { GIT_CEILING_DIRECTORIES: dirname(yield* realOrSelf(dir)) }
  const found = yield* runGit(
    ["-C", dir, "rev-parse", "--path-format=absolute", "--absolute-git-dir", "--git-common-dir"],
    { env, okCodes: [0, 128] }
  )
  const [gitDir = "", commonDir = ""] = found.stdout.trim().split("\n")
  if (found.code !== 0 || gitDir === "" || commonDir === "") return null
  const top = yield* runGit(["-C", dir, "rev-parse", "--show-toplevel"], { env, okCodes: [0, 128] })
  const topLevel = top.code === 0 && top.stdout.trim() !== "" ? yield* realOrSelf(top.stdout.trim()) : null
  return {
    gitDir: yield* realOrSelf(gitDir),
    commonDir: yield* realOrSelf(commonDir),
    topLevel
  } satisfies RepositoryDirs
})

/** The commit HEAD points at; fails when the repository has no commits yet. */
export const headCommit = Effect.fn("GitWorkspace.headCommit")(function* (repoPath: string) {
  const out = yield* Effect.mapError(
    gitOut(["-C", absolute(repoPath), "rev-parse", "--verify", "--quiet", "HEAD^{commit}"]),
    (error) => new GitError({ message: `${repoPath} has no commit at HEAD`, stderr: error.stderr })
  )
  return out.trim()
})

const branchTip = (repoPath: string, branch: string): Effect.Effect<string | null, GitError> =>
  Effect.map(
    runGit(["-C", repoPath, "rev-parse", "--verify", "--quiet", `refs/heads/${branch}^{commit}`], { okCodes: [0, 1] }),
    (result) => (result.code === 0 ? result.stdout.trim() : null)
  )

const mergeBase = (repoPath: string, a: string, b: string): Effect.Effect<string | null, GitError> =>
  Effect.map(runGit(["-C", repoPath, "merge-base", a, b], { okCodes: [0, 1] }), (result) =>
    result.code === 0 ? result.stdout.trim() : null
  )

// ---------------------------------------------------------------------------------------------
// Worktrees

/** Where a run's worktree goes and on which branch. */
export interface CreateWorktreeOptions {
  readonly repoPath: string
  readonly worktreePath: string
  readonly branch: string
  /**
   * The repository's directories as the caller checked them ({@link repositoryDirs}): they must
   * still be these, and the worktree and branch are written there whatever `.git` says meanwhile.
   */
  readonly dirs?: RepositoryDirs
}

/** The commit diffs are measured against, and whether the branch was new. */
export interface CreatedWorktree {
  readonly baseSha: string
  readonly created: boolean
}

/**
 * Checks `branch` out in a new worktree at `worktreePath` (which must not exist or be empty).
 *
 * A new branch starts at the repository's HEAD, which is then the base. An existing branch is
 * reused as it is, and the base is its merge-base with the repository's HEAD, so a follow-up
 * run's output counts all the work on the branch, not just its own (falling back to the branch
 * tip when the histories are unrelated). Fails if the branch is checked out elsewhere.
 */
export const createWorktree = Effect.fn("GitWorkspace.createWorktree")(function* (options: CreateWorktreeOptions) {
  const invalid = validateBranchName(options.branch)
  if (invalid !== null) return yield* fail(invalid)
  const repoPath = absolute(options.repoPath)
  const worktreePath = absolute(options.worktreePath)
  const git = yield* gitIn(repoPath)
  const checked = options.dirs
  if (checked !== undefined) {
    const current = yield* repositoryDirs(repoPath)
    if (current?.gitDir !== checked.gitDir || current.commonDir !== checked.commonDir) {
      return yield* fail(`the repository at ${repoPath} changed while the run was starting`)
    }
  }
  // Pinned, so a `.git` or `commondir` file rewritten since the check cannot move the writes.
  const pinned: RunOptions =
    checked === undefined
      ? {}
      : {
          env: {
            GIT_DIR: checked.gitDir,
            GIT_COMMON_DIR: checked.commonDir,
            GIT_WORK_TREE: checked.topLevel ?? repoPath
          }
        }
  const head = yield* headCommit(repoPath)
  const existing = yield* branchTip(repoPath, options.branch)
  if (existing === null) {
    yield* git.run(["worktree", "add", "--quiet", "-b", options.branch, "--end-of-options", worktreePath, head], pinned)
    return { baseSha: head, created: true } satisfies CreatedWorktree
  }
  yield* git.run(["worktree", "add", "--quiet", "--end-of-options", worktreePath, options.branch], pinned)
  const base = (yield* mergeBase(repoPath, head, existing)) ?? existing
  return { baseSha: base, created: false } satisfies CreatedWorktree
})

/** What `removeWorktree` did: removed it, kept it because of uncommitted work, or found it gone. */
export type RemoveWorktreeResult = "removed" | "dirty" | "missing"

interface WorktreeEntry {
  readonly path: string
  readonly main: boolean
}

const listWorktrees = (repoPath: string): Effect.Effect<ReadonlyArray<WorktreeEntry>, GitError> =>
  Effect.map(gitOut(["-C", repoPath, "worktree", "list", "--porcelain", "-z"]), (out) =>
    out
      .split("\0")
      .filter((field) => field.startsWith("worktree "))
      .map((field, index) => ({ path: field.slice("worktree ".length), main: index === 0 }))
  )

const exists = (path: string): Effect.Effect<boolean> =>
  Effect.promise(() =>
    lstat(path).then(
      () => true,
      () => false
    )
  )

/** Paths of `git status --porcelain=v1 -z` output (a rename's source skipped, a directory's `/` dropped). */
const statusPaths = (out: string): ReadonlyArray<string> => {
  const fields = out.split("\0")
  const paths: Array<string> = []
  for (let i = 0; i < fields.length; i++) {
    const field = fields[i] ?? ""
    if (field.length < 4) continue
    paths.push(field.slice(3).replace(/\/$/, ""))
    if (field[0] === "R" || field[0] === "C") i++
  }
  return paths
}

/**
 * Removes a run's worktree; the branch, and so every commit made in it, stays. A worktree with
 * uncommitted or untracked (non-ignored) files is kept and reported `dirty` — commit first —
 * unless every such file is in `discard` (what `commitAll` refused to commit: those are removed
 * with the worktree). Refuses paths that are not linked worktrees of `repoPath` (including the
 * main checkout).
 */
export const removeWorktree = Effect.fn("GitWorkspace.removeWorktree")(function* (options: {
  readonly repoPath: string
  readonly worktreePath: string
  readonly discard?: ReadonlyArray<string>
}) {
  const repoPath = absolute(options.repoPath)
  const target = yield* realOrSelf(options.worktreePath)
  const worktrees = yield* listWorktrees(repoPath)
  const resolved = yield* Effect.all(worktrees.map((w) => Effect.map(realOrSelf(w.path), (path) => ({ ...w, path }))))
  const match = resolved.find((w) => w.path === target)
  if (match === undefined) {
    if (yield* exists(target)) return yield* fail(`${options.worktreePath} is not a worktree of ${repoPath}`)
    return "missing" satisfies RemoveWorktreeResult
  }
  if (match.main) return yield* fail(`${options.worktreePath} is the repository's main checkout`)
  if (!(yield* exists(target))) {
    yield* runGit(["-C", repoPath, "worktree", "prune"])
    return "missing" satisfies RemoveWorktreeResult
  }
  const git = yield* gitIn(target, repoPath)
  const dirty = statusPaths(
    yield* git.out(["status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=all"])
  )
  const discard = options.discard ?? []
  const discarded = (path: string) => discard.some((d) => path === d || path.startsWith(`${d}/`))
  if (!dirty.every(discarded)) return "dirty" satisfies RemoveWorktreeResult
  // `worktree remove` checks cleanliness itself with a `git status` child, which needs the overrides too.
  const repoGit = yield* gitIn(repoPath)
  yield* repoGit.run(["worktree", "remove", ...(dirty.length > 0 ? ["--force"] : []), "--end-of-options", target])
  return "removed" satisfies RemoveWorktreeResult
})

// ---------------------------------------------------------------------------------------------
// Commits and diffs

/** What to commit and as whom. */
export interface CommitAllOptions {
  /** The repository the worktree must belong to. */
  readonly repoPath: string
  readonly worktreePath: string
  readonly message: string
  readonly authorName: string
  readonly authorEmail: string
}

/** A path of the worktree left out of the commit, and why. */
export interface RefusedPath {
  readonly path: string
  readonly reason: string
}

/** The new commit (null when there was nothing to commit) and what was left out. */
export interface CommitResult {
  readonly sha: string | null
  readonly refused: ReadonlyArray<RefusedPath>
}

const DEFAULT_MESSAGE = "Taskwright run"

type Screened =
  | { readonly kind: "stage" }
  | { readonly kind: "skip" }
  | { readonly kind: "refuse"; readonly reason: string }

/**
 * Decides what happens to one changed path. A hard link's content may be any file of the host
 * the agent could link (`/etc/passwd`, another run's files), so a regular file with more than
 * one name is never staged; neither is a nested repository or a submodule's checkout. Symlinks
 * are staged as links (git stores the target path, never what it points to). A path below a
 * symlink or a file that replaced its directory is skipped: git sees it as gone, and the entry
 * that replaced the directory is staged on its own.
 */
const screen = async (root: string, path: string, directories: Map<string, boolean>): Promise<Screened> => {
  if (path.endsWith("/")) return { kind: "refuse", reason: "a nested git repository" }
  const parts = path.split("/")
  for (let i = 1; i < parts.length; i++) {
    const prefix = parts.slice(0, i).join("/")
    let isDirectory = directories.get(prefix)
    if (isDirectory === undefined) {
      const info = await lstat(join(root, prefix)).catch(() => null)
      // A missing directory is a deletion: what was below it is gone.
      isDirectory = info === null || info.isDirectory()
      directories.set(prefix, isDirectory)
    }
    if (!isDirectory) return { kind: "skip" }
  }
  const info = await lstat(join(root, path)).catch(() => null)
  if (info === null || info.isSymbolicLink()) return { kind: "stage" }
  if (info.isDirectory()) {
    // A tracked file that became a directory: what is inside is listed on its own.
    const nested = await lstat(join(root, path, ".git")).then(
      () => true,
      () => false
    )
    return nested ? { kind: "refuse", reason: "a nested git repository or submodule" } : { kind: "skip" }
  }
  if (!info.isFile()) return { kind: "refuse", reason: "not a regular file, a directory or a symlink" }
  if (info.nlink > 1) {
    return {
      kind: "refuse",
      reason: `a hard link (${info.nlink} names for one file): its content may be a file from outside the worktree`
    }
  }
  return { kind: "stage" }
}

/**
 * Stages what changed in the worktree (new files included, ignored files not) and commits it as
 * the given author and committer, without hooks or signing. Hard links and nested repositories
 * are left out and reported in `refused`. What an agent may have staged itself is not taken on
 * trust: the index is reset to the branch's commit first, and only paths checked here are staged.
 */
export const commitAll = Effect.fn("GitWorkspace.commitAll")(function* (options: CommitAllOptions) {
  const root = absolute(options.worktreePath)
  const git = yield* gitIn(root, options.repoPath)
  yield* git.run(["reset", "--quiet", "--no-refresh"])
  const listed = yield* git.out(["ls-files", "-z", "--modified", "--deleted", "--others", "--exclude-standard"])
  const paths = [...new Set(listed.split("\0").filter((path) => path !== ""))]
  const directories = new Map<string, boolean>()
  const stage: Array<string> = []
  const refused: Array<RefusedPath> = []
  for (const path of paths) {
    const verdict = yield* Effect.promise(() => screen(root, path, directories))
    if (verdict.kind === "stage") stage.push(path)
    else if (verdict.kind === "refuse") refused.push({ path: path.replace(/\/$/, ""), reason: verdict.reason })
  }
  if (stage.length > 0) {
    // update-index takes each path as it is (no pathspec matching, linear in the paths).
    yield* git.run(["update-index", "--add", "--remove", "--replace", "-z", "--stdin"], {
      input: `${stage.join("\0")}\0`
    })
  }
  const staged = yield* git.run(["diff", "--cached", "--quiet", "--no-ext-diff"], { okCodes: [0, 1] })
  if (staged.code === 0) return { sha: null, refused } satisfies CommitResult
  // biome-ignore lint/suspicious/noControlCharactersInRegex: NUL cannot be part of a message
  const message = options.message.replace(/\u0000/g, "").trim() || DEFAULT_MESSAGE
  const identity = {
    GIT_AUTHOR_NAME: options.authorName,
    GIT_AUTHOR_EMAIL: options.authorEmail,
    GIT_COMMITTER_NAME: options.authorName,
    GIT_COMMITTER_EMAIL: options.authorEmail
  }
  yield* git.run(
    // `whitespace` cleanup keeps lines starting with '#', which agents use for Markdown headings.
    [
      "-c",
      "gc.auto=0",
      "-c",
      "maintenance.auto=false",
      "-c",
      "status.submoduleSummary=false",
      "commit",
      "--quiet",
      "--no-verify",
      "--no-gpg-sign",
      "--cleanup=whitespace",
      "--file=-"
    ],
    { input: message, env: identity }
  )
  const sha = (yield* git.out(["rev-parse", "--verify", "HEAD^{commit}"])).trim()
  return { sha, refused } satisfies CommitResult
})

/** What a run changed, as the run's `output` reports it. */
export interface DiffStats {
  readonly files_modified: ReadonlyArray<string>
  readonly lines_added: number
  readonly lines_removed: number
}

/** Git's own heuristic: a NUL byte in the first 8000 bytes makes a file binary. */
const BINARY_PROBE_BYTES = 8000

/**
 * Lines of a new file as `git diff --numstat` would count them; 0 for binary files, and for
 * hard links (never committed). Opened without following a link and without blocking, then
 * checked again: an agent may swap the file for a symlink or a FIFO at any moment.
 */
const countFileLines = (path: string): Effect.Effect<number> =>
  Effect.promise(async () => {
    const info = await lstat(path).catch(() => null)
    if (info === null) return 0
    if (info.isSymbolicLink()) return 1 // git stores the target as a one-line blob
    if (!info.isFile() || info.size === 0 || info.nlink > 1) return 0
    const file = await open(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK)
    try {
      const opened = await file.stat()
      if (!opened.isFile() || opened.nlink > 1) return 0
      const buffer = Buffer.alloc(64 * 1024)
      let newlines = 0
      let seen = 0
      let last = 0
      for (;;) {
        const { bytesRead } = await file.read(buffer, 0, buffer.length, null)
        if (bytesRead === 0) break
        const chunk = buffer.subarray(0, bytesRead)
        if (seen < BINARY_PROBE_BYTES && chunk.subarray(0, BINARY_PROBE_BYTES - seen).includes(0)) return 0
        seen += bytesRead
        for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) newlines++
        last = chunk[bytesRead - 1] ?? last
      }
      if (seen === 0) return 0
      return last === 10 ? newlines : newlines + 1
    } finally {
      await file.close()
    }
  }).pipe(Effect.orElseSucceed(() => 0))

const parseNumstat = (out: string): Array<{ path: string; added: number; removed: number }> =>
  out
    .split("\0")
    .filter((record) => record.includes("\t"))
    .map((record) => {
      const [added = "-", removed = "-", ...path] = record.split("\t")
      // Binary files show "-" for both counts.
      return { path: path.join("\t"), added: Number(added) || 0, removed: Number(removed) || 0 }
    })

/**
 * Files and lines changed in the worktree since `baseSha`: commits on the branch, staged and
 * unstaged edits, deletions, and new untracked (non-ignored) files, so it can be called while the
 * agent is still working. Renames count as a deletion plus an addition. Touches neither the
 * worktree's index nor its files.
 */
export const diffStats = Effect.fn("GitWorkspace.diffStats")(function* (options: {
  readonly repoPath: string
  readonly worktreePath: string
  readonly baseSha: string
}) {
  if (!SHA.test(options.baseSha)) return yield* fail(`not a commit sha: ${options.baseSha}`)
  const worktreePath = absolute(options.worktreePath)
  const git = yield* gitIn(worktreePath, options.repoPath)
  const tracked = parseNumstat(
    yield* git.out([
      "diff",
      "--numstat",
      "-z",
      "--no-renames",
      "--no-ext-diff",
      "--no-textconv",
      "--ignore-submodules=all",
      "--end-of-options",
      options.baseSha,
      "--"
    ])
  )
  const untracked = (yield* git.out(["ls-files", "--others", "--exclude-standard", "-z"]))
    .split("\0")
    .filter((path) => path !== "")
  const untrackedLines = yield* Effect.forEach(
    untracked,
    (path) => (path.endsWith("/") ? Effect.succeed(0) : countFileLines(join(worktreePath, path))),
    { concurrency: 8 }
  )
  const files = new Set([...tracked.map((f) => f.path), ...untracked.map((p) => p.replace(/\/$/, ""))])
  return {
    files_modified: [...files].sort(),
    lines_added: tracked.reduce((sum, f) => sum + f.added, 0) + untrackedLines.reduce((sum, n) => sum + n, 0),
    lines_removed: tracked.reduce((sum, f) => sum + f.removed, 0)
  } satisfies DiffStats
})

// ---------------------------------------------------------------------------------------------
// The agent's own repository

/** An agent's private git directory and the object directories it reads from. */
export interface AgentGitDir {
  readonly gitDir: string
  /**
   * The project's object directory and those it borrows from in turn (symlinks resolved), each
   * one `mayBorrow` accepted: the sandbox shows them read-only.
   */
  readonly objectDirs: ReadonlyArray<string>
  /** Object directories the repository names that `mayBorrow` refused: neither shown nor followed. */
  readonly refused: ReadonlyArray<string>
}

/** `objects/info/alternates` of `objectsDir`, absolute; relative entries are relative to `objectsDir`. */
const alternatesOf = async (objectsDir: string): Promise<ReadonlyArray<string>> => {
  const text = await readFile(join(objectsDir, "info", "alternates"), "utf8").catch(() => "")
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"))
    .map((line) => resolve(objectsDir, line))
}

/**
 * `dir` and the object directories it borrows from, transitively (git follows at most 5 levels),
 * with symlinks resolved. The repository chooses its alternates: one `mayBorrow` refuses is
 * neither kept nor followed (its own alternates could name anything).
 */
const objectChain = async (
  dir: string,
  mayBorrow: (objectsDir: string, own: boolean) => boolean
): Promise<Pick<AgentGitDir, "objectDirs" | "refused">> => {
  const chain: Array<string> = []
  const refused: Array<string> = []
  const consider = async (path: string, own: boolean) => {
    const resolved = await realpath(path).catch(() => null)
    if (resolved === null || chain.includes(resolved) || refused.includes(path)) return
    if (mayBorrow(resolved, own)) chain.push(resolved)
    else refused.push(path)
  }
  await consider(dir, true)
  for (let i = 0; i < chain.length && chain.length < 64; i++) {
    const current = chain[i]
    if (current === undefined) break
    for (const next of await alternatesOf(current)) await consider(next, false)
  }
  return { objectDirs: chain, refused }
}

const copyIfPresent = (from: string, to: string): Promise<void> =>
  copyFile(from, to).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== "ENOENT") throw error
  })

/**
 * Makes `gitDir` a repository of its own for the agent of a run, over the files of the run's
 * worktree: HEAD on the run's branch, the project's branches and tags, an index matching the
 * checkout, and the project's objects borrowed read-only (`objects/info/alternates`). The agent
 * may commit, branch and configure it as it likes: nothing it writes there reaches the project,
 * whose own git directory it never sees. Its identity is a placeholder; the service commits the
 * files of the worktree on the run's branch at the end.
 */
export const prepareAgentGitDir = Effect.fn("GitWorkspace.prepareAgentGitDir")(function* (options: {
  readonly repoPath: string
  readonly worktreePath: string
  readonly gitDir: string
  readonly branch: string
  /**
   * Whether the agent may read an object directory (symlinks resolved): `own` for the project's,
   * the others are its alternates. Default: every one.
   */
  readonly mayBorrow?: (objectsDir: string, own: boolean) => boolean
}) {
  const invalid = validateBranchName(options.branch)
  if (invalid !== null) return yield* fail(invalid)
  const git = yield* gitIn(absolute(options.worktreePath), options.repoPath)
  const [linked = "", common = "", format = "sha1"] = (yield* git.out([
    "rev-parse",
    "--path-format=absolute",
    "--git-dir",
    "--git-common-dir",
    "--show-object-format"
  ]))
    .trim()
    .split("\n")
  const tip = (yield* git.out(["rev-parse", "--verify", "HEAD^{commit}"])).trim()
  const refs = (yield* git.out(["for-each-ref", "--format=%(objectname) %(refname)", "refs/heads", "refs/tags"]))
    .split("\n")
    .filter((line) => line !== "" && !line.endsWith(` refs/heads/${options.branch}`))
  const gitDir = absolute(options.gitDir)
  const borrowed = yield* Effect.tryPromise({
    try: async () => {
      for (const dir of ["objects/info", "objects/pack", "refs/heads", "refs/tags", "info"]) {
        await mkdir(join(gitDir, dir), { recursive: true, mode: 0o700 })
      }
      const sha256 = format === "sha256"
      await writeFile(
        join(gitDir, "config"),
        [
          "[core]",
          `\trepositoryformatversion = ${sha256 ? 1 : 0}`,
          "\tfilemode = true",
          "\tbare = false",
          "\tlogallrefupdates = true",
          ...(sha256 ? ["[extensions]", "\tobjectformat = sha256"] : []),
          "[user]",
          "\tname = Taskwright agent",
          "\temail = agent@taskwright.invalid",
          ""
        ].join("\n")
      )
      await writeFile(join(gitDir, "HEAD"), `ref: refs/heads/${options.branch}\n`)
      const branchRef = join(gitDir, "refs", "heads", options.branch)
      await mkdir(dirname(branchRef), { recursive: true })
      await writeFile(branchRef, `${tip}\n`)
      await writeFile(join(gitDir, "packed-refs"), refs.map((line) => `${line}\n`).join(""))
      const objects = join(common, "objects")
      await writeFile(join(gitDir, "objects", "info", "alternates"), `${objects}\n`)
      await copyIfPresent(join(linked, "index"), join(gitDir, "index"))
      await copyIfPresent(join(common, "info", "exclude"), join(gitDir, "info", "exclude"))
      await copyIfPresent(join(common, "shallow"), join(gitDir, "shallow"))
      return objectChain(objects, options.mayBorrow ?? (() => true))
    },
    catch: (cause) =>
      new GitError({ message: `cannot prepare the agent's git directory: ${String(cause)}`, stderr: "" })
  })
  return { gitDir, ...borrowed } satisfies AgentGitDir
})

// ---------------------------------------------------------------------------------------------
// Clone

/** Transports a clone or fetch may use, also for redirects: https, ssh and file. */
const CLONE_PROTOCOLS: ReadonlyArray<string> = [
  "protocol.allow=never",
  "protocol.https.allow=always",
  "protocol.ssh.allow=always",
  "protocol.file.allow=always"
].flatMap((p) => ["-c", p])

/**
 * Clones `url` (checked with `validateGitUrl`) into `path` (absolute; must not exist or be
 * empty). Only the https, ssh and file transports are allowed, also for redirects; submodules
 * are not fetched; the clone's checkout runs no hooks or filters. With `noCheckout`, no files are
 * checked out (the clone is only a source of worktrees).
 */
export const cloneRepository = Effect.fn("GitWorkspace.cloneRepository")(function* (options: {
  readonly url: string
  readonly path: string
  readonly timeoutMs?: number
  readonly noCheckout?: boolean
}) {
  const invalid = validateGitUrl(options.url)
  if (invalid !== null) return yield* fail(invalid)
  if (!isAbsolute(options.path)) return yield* fail(`clone path must be absolute: ${options.path}`)
  yield* runGit(
    [
      ...CLONE_PROTOCOLS,
      "clone",
      "--quiet",
      "--no-recurse-submodules",
      ...(options.noCheckout === true ? ["--no-checkout"] : []),
      "--end-of-options",
      options.url,
      options.path
    ],
    { timeoutMs: options.timeoutMs ?? CLONE_TIMEOUT_MS }
  )
})

/** What {@link cloneAtCommit} made. */
export interface ClonedCommit {
  /** The clone (no files checked out): the repository the worktree belongs to. */
  readonly clonePath: string
  /** The worktree, with the commit checked out (detached). */
  readonly worktreePath: string
}

/**
 * Clones `url` into `clonePath` without checking anything out, then checks `commit` out,
 * detached, in a new worktree at `worktreePath`: what a pull-request review reads. When no branch
 * or tag of the clone holds the commit (a head that was force-pushed away), it is fetched by its
 * id. Both paths are absolute and must not exist yet; on failure whatever was made is removed.
 */
export const cloneAtCommit = Effect.fn("GitWorkspace.cloneAtCommit")(function* (options: {
  readonly url: string
  readonly clonePath: string
  readonly worktreePath: string
  readonly commit: string
  readonly timeoutMs?: number
}) {
  if (!SHA.test(options.commit)) return yield* fail(`not a commit sha: ${options.commit}`)
  const made = { clonePath: absolute(options.clonePath), worktreePath: absolute(options.worktreePath) }
  const timeoutMs = options.timeoutMs ?? CLONE_TIMEOUT_MS
  return yield* Effect.gen(function* () {
    yield* cloneRepository({ url: options.url, path: made.clonePath, timeoutMs, noCheckout: true })
    const git = yield* gitIn(made.clonePath)
    const present = () =>
      Effect.map(
        git.run(["rev-parse", "--verify", "--quiet", `${options.commit}^{commit}`], {
          okCodes: [0, 1, 128]
        }),
        (result) => result.code === 0
      )
    if (!(yield* present())) {
      yield* git.run(
        [
          ...CLONE_PROTOCOLS,
          "fetch",
          "--quiet",
          "--no-tags",
          "--no-recurse-submodules",
          "--end-of-options",
          "origin",
          options.commit
        ],
        { timeoutMs, okCodes: [0, 1, 128] }
      )
      if (!(yield* present())) return yield* fail(`commit ${options.commit} is not in ${options.url}`)
    }
    yield* git.run(["worktree", "add", "--quiet", "--detach", "--end-of-options", made.worktreePath, options.commit])
    return made satisfies ClonedCommit
  }).pipe(Effect.tapError(() => removeClone(made)))
})

/**
 * Removes what {@link cloneAtCommit} made, the worktree and the clone, without following any link
 * inside them. Call it once nothing runs in the worktree any more. Never fails.
 */
export const removeClone = (cloned: ClonedCommit): Effect.Effect<void> =>
  Effect.promise(() =>
    Promise.all(
      [cloned.worktreePath, cloned.clonePath].map((path) =>
        rm(path, { recursive: true, force: true }).catch(() => undefined)
      )
    )
  )
