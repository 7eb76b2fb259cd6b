/**
 * Git operations for agent runs, hardened against the repositories they work on.
 *
 * A project's repository is user-controlled, so git must never run code from it: every call
 * disables hooks and fsmonitor, neutralises clean/smudge filters configured in the repository's
 * own config, never uses external diff or textconv, signs nothing, runs without a terminal
 * (no prompts) and with an environment free of inherited `GIT_*` variables. User-supplied names
 * come after `--end-of-options`. Git is always spawned with an argument vector, never a shell.
 */
import { spawn } from "node:child_process"
import { createReadStream } from "node:fs"
import { lstat, realpath } from "node:fs/promises"
import { isAbsolute, join, resolve } from "node:path"
import { Data, Effect } from "effect"

/** A git command failed or could not be run; `stderr` is git's own explanation. */
export class GitError extends Data.TaggedError("GitError")<{
  readonly message: string
  readonly stderr: string
}> {}

/** The config every git invocation starts with. */
export const SAFE_GIT_CONFIG: ReadonlyArray<string> = [
  "-c",
  "core.hooksPath=/dev/null",
  "-c",
  "core.fsmonitor=false",
  "--no-pager",
  "--no-optional-locks"
]

const DEFAULT_TIMEOUT_MS = 120_000
const CLONE_TIMEOUT_MS = 600_000

/** Inherited `GIT_*` variables that only tune transport, kept so operators' setups still work. */
const GIT_PASSTHROUGH = new Set(["GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH"])

const gitEnv = (extra: Readonly<Record<string, string>>): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    // GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, GIT_CONFIG_* ... would redirect or reconfigure git.
    if (value !== undefined && (!key.startsWith("GIT_") || GIT_PASSTHROUGH.has(key))) env[key] = value
  }
  return { ...env, GIT_TERMINAL_PROMPT: "0", LC_ALL: "C", ...extra }
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
      env: gitEnv(options.env ?? {}),
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

const BRANCH_CHARS = /^[A-Za-z0-9._/-]+$/
const SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/

/**
 * Checks a branch name: `^[A-Za-z0-9._/-]+$`, no leading `-`, no `@`, at most 200 characters,
 * and `git check-ref-format --branch` rules (no `..`, no `//`, no component starting with `.`
 * or ending with `.lock`, not ending with `/` or `.`, not `HEAD`). Returns why it is refused,
 * or null when it is fine.
 */
export const validateBranchName = (name: string): string | null => {
  if (name.length === 0) return "branch name is empty"
  if (name.length > 200) return "branch name is longer than 200 characters"
  if (!BRANCH_CHARS.test(name)) return "branch name may only contain letters, digits, '.', '_', '/' and '-'"
  if (name.startsWith("-")) return "branch name may not start with '-'"
  if (name.includes("..")) return "branch name may not contain '..'"
  if (name.startsWith("/") || name.endsWith("/")) return "branch name may not start or end with '/'"
  if (name.includes("//")) return "branch name may not contain '//'"
  if (name.endsWith(".")) return "branch name may not end with '.'"
  if (name === "HEAD") return "branch name may not be HEAD"
  for (const component of name.split("/")) {
    if (component.startsWith(".")) return "a branch name component may not start with '.'"
    if (component.endsWith(".lock")) return "a branch name component may not end with '.lock'"
  }
  return null
}

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
 * Filters from the operator's global/system config (git-lfs, ...) keep working.
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

/**
 * Runs git in `dir` with the repository's own filters disabled, after checking that `dir` is the
 * top of a work tree: if a worktree lost its `.git` file, git would otherwise walk up and act on
 * whatever repository encloses it.
 */
const gitIn = (dir: string) =>
  Effect.gen(function* () {
    const top = yield* gitOut(["-C", dir, "rev-parse", "--show-toplevel"])
    const [actual, expected] = yield* Effect.all([realOrSelf(top.trim()), realOrSelf(dir)])
    if (actual !== expected) return yield* fail(`${dir} is not the top of a git work tree`)
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
  const head = yield* headCommit(repoPath)
  const existing = yield* branchTip(repoPath, options.branch)
  if (existing === null) {
    yield* git.run(["worktree", "add", "--quiet", "-b", options.branch, "--end-of-options", worktreePath, head])
    return { baseSha: head, created: true } satisfies CreatedWorktree
  }
  yield* git.run(["worktree", "add", "--quiet", "--end-of-options", worktreePath, options.branch])
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

/**
 * Removes a run's worktree; the branch, and so every commit made in it, stays. A worktree with
 * uncommitted or untracked (non-ignored) files is kept and reported `dirty` — commit first.
 * Refuses paths that are not linked worktrees of `repoPath` (including the main checkout).
 */
export const removeWorktree = Effect.fn("GitWorkspace.removeWorktree")(function* (options: {
  readonly repoPath: string
  readonly worktreePath: string
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
  const git = yield* gitIn(target)
  const status = yield* git.out(["status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=none"])
  if (status !== "") return "dirty" satisfies RemoveWorktreeResult
  // `worktree remove` checks cleanliness itself with a `git status` child, which needs the overrides too.
  const repoGit = yield* gitIn(repoPath)
  yield* repoGit.run(["worktree", "remove", "--end-of-options", target])
  return "removed" satisfies RemoveWorktreeResult
})

// ---------------------------------------------------------------------------------------------
// Commits and diffs

/** What to commit and as whom. */
export interface CommitAllOptions {
  readonly worktreePath: string
  readonly message: string
  readonly authorName: string
  readonly authorEmail: string
}

const DEFAULT_MESSAGE = "Taskwright run"

/**
 * Stages everything in the worktree (new files included, ignored files not) and commits it as
 * the given author and committer, without hooks or signing. Returns the new commit's sha, or
 * null when there was nothing to commit.
 */
export const commitAll = Effect.fn("GitWorkspace.commitAll")(function* (options: CommitAllOptions) {
  const git = yield* gitIn(absolute(options.worktreePath))
  yield* git.run(["add", "--all"])
  const staged = yield* git.run(["diff", "--cached", "--quiet", "--no-ext-diff"], { okCodes: [0, 1] })
  if (staged.code === 0) return null
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
      "commit",
      "--quiet",
      "--no-verify",
      "--no-gpg-sign",
      "--cleanup=whitespace",
      "--file=-"
    ],
    { input: message, env: identity }
  )
  return (yield* git.out(["rev-parse", "--verify", "HEAD^{commit}"])).trim()
})

/** What a run changed, as the run's `output` reports it. */
export interface DiffStats {
  readonly files_modified: ReadonlyArray<string>
  readonly lines_added: number
  readonly lines_removed: number
}

/** Git's own heuristic: a NUL byte in the first 8000 bytes makes a file binary. */
const BINARY_PROBE_BYTES = 8000

/** Lines of a new file as `git diff --numstat` would count them; 0 for binary files. */
const countFileLines = (path: string): Effect.Effect<number> =>
  Effect.promise(async () => {
    const info = await lstat(path).catch(() => null)
    if (info === null) return 0
    if (info.isSymbolicLink()) return 1 // git stores the target as a one-line blob
    if (!info.isFile() || info.size === 0) return 0
    let newlines = 0
    let seen = 0
    let last = 0
    for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) {
      if (seen < BINARY_PROBE_BYTES && chunk.subarray(0, BINARY_PROBE_BYTES - seen).includes(0)) return 0
      seen += chunk.length
      for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) newlines++
      last = chunk[chunk.length - 1] ?? last
    }
    return last === 10 ? newlines : newlines + 1
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
  readonly worktreePath: string
  readonly baseSha: string
}) {
  if (!SHA.test(options.baseSha)) return yield* fail(`not a commit sha: ${options.baseSha}`)
  const worktreePath = absolute(options.worktreePath)
  const git = yield* gitIn(worktreePath)
  const tracked = parseNumstat(
    yield* git.out([
      "diff",
      "--numstat",
      "-z",
      "--no-renames",
      "--no-ext-diff",
      "--no-textconv",
      "--ignore-submodules=none",
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
// Clone

/**
 * Clones `url` (checked with `validateGitUrl`) into `path` (absolute; must not exist or be
 * empty). Only the https, ssh and file transports are allowed, also for redirects; submodules
 * are not fetched; the clone's checkout runs no hooks or filters.
 */
export const cloneRepository = Effect.fn("GitWorkspace.cloneRepository")(function* (options: {
  readonly url: string
  readonly path: string
  readonly timeoutMs?: number
}) {
  const invalid = validateGitUrl(options.url)
  if (invalid !== null) return yield* fail(invalid)
  if (!isAbsolute(options.path)) return yield* fail(`clone path must be absolute: ${options.path}`)
  const protocols = [
    "protocol.allow=never",
    "protocol.https.allow=always",
    "protocol.ssh.allow=always",
    "protocol.file.allow=always"
  ]
  yield* runGit(
    [
      ...protocols.flatMap((p) => ["-c", p]),
      "clone",
      "--quiet",
      "--no-recurse-submodules",
      "--end-of-options",
      options.url,
      options.path
    ],
    { timeoutMs: options.timeoutMs ?? CLONE_TIMEOUT_MS }
  )
})
