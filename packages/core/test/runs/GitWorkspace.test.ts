import { execFileSync } from "node:child_process"
import {
  chmodSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { validateBranchName } from "@taskwright/domain"
import { Effect } from "effect"
import { afterAll } from "vitest"
import {
  cloneRepository,
  commitAll,
  createWorktree,
  diffStats,
  GitError,
  headCommit,
  isGitRepository,
  prepareAgentGitDir,
  removeWorktree,
  repositoryDirs,
  serviceGitEnv,
  validateGitUrl
} from "../../src/runs/GitWorkspace.js"

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true })
})

const tempDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), "tw-git-"))
  roots.push(dir)
  return dir
}

/**
 * The test's own git calls, made as harmless as the module's so they never set off the traps
 * the hardening tests arm (and so they prove nothing on the module's behalf).
 */
const git = (cwd: string, ...args: Array<string>): string =>
  execFileSync(
    "git",
    [
      "-c",
      "core.hooksPath=/dev/null",
      "-c",
      "core.fsmonitor=false",
      "-c",
      "filter.evil.clean=",
      "-c",
      "filter.evil.smudge=",
      "-c",
      "filter.evil.required=false",
      ...args
    ],
    {
      cwd,
      encoding: "utf8",
      env: {
        PATH: process.env.PATH ?? "",
        HOME: cwd,
        GIT_AUTHOR_NAME: "T",
        GIT_AUTHOR_EMAIL: "t@example.com",
        GIT_COMMITTER_NAME: "T",
        GIT_COMMITTER_EMAIL: "t@example.com"
      }
    }
  ).trim()

const write = (path: string, content: string | Buffer): void => {
  mkdirSync(join(path, ".."), { recursive: true })
  writeFileSync(path, content)
}

/** A repository on `main` with one commit of a few files. */
const makeRepo = (): { repo: string; root: string; head: string } => {
  const root = tempDir()
  const repo = join(root, "repo")
  mkdirSync(repo)
  git(repo, "init", "-q", "-b", "main")
  write(join(repo, "README.md"), "# Demo\n\nA project.\n")
  write(join(repo, "src/a.ts"), "one\ntwo\nthree\nfour\nfive\n")
  write(join(repo, "old.txt"), "1\n2\n3\n4\n")
  write(join(repo, ".gitignore"), "ignored/\n*.log\n")
  git(repo, "add", "-A")
  git(repo, "commit", "-q", "-m", "initial")
  return { repo, root, head: git(repo, "rev-parse", "HEAD") }
}

const author = { authorName: "Taskwright Agent", authorEmail: "agent@taskwright.local" }

/** The changes every diff test makes in a worktree, and what they amount to. */
const makeChanges = (wt: string): void => {
  write(join(wt, "src/a.ts"), "one\nTWO\nthree\nfour\nfive\nsix\nseven\n") // +3 -1
  rmSync(join(wt, "old.txt")) // -4
  write(join(wt, "new/file.txt"), "x\ny\nz") // +3, no final newline
  write(join(wt, "bin.dat"), Buffer.from([0, 1, 2, 10, 10, 10])) // binary: no lines
  write(join(wt, "empty.txt"), "")
  write(join(wt, "ignored/big.txt"), "not\ncounted\n")
  write(join(wt, "debug.log"), "not counted\n")
}

const expectedStats = {
  files_modified: ["bin.dat", "empty.txt", "new/file.txt", "old.txt", "src/a.ts"],
  lines_added: 6,
  lines_removed: 5
}

describe("validateBranchName", () => {
  const rejected = [
    "",
    "--upload-pack=x",
    "-b",
    "a..b",
    "@",
    "a@{1}",
    "x.lock",
    "feature/x.lock",
    "$(id)",
    "`id`",
    "a b",
    "a~1",
    "a^",
    "a:b",
    "a?",
    "a*",
    "a[b",
    "a\\b",
    "/a",
    "a/",
    "a//b",
    "a.",
    ".hidden",
    "a/.b",
    "HEAD",
    "é",
    "a\nb",
    "x".repeat(201)
  ]
  const accepted = ["taskwright/task-12", "feature/foo-bar", "v1.2.3", "a_b", "A-Z/0.9", "a.b/c.d", "x".repeat(200)]

  it("rejects unsafe or invalid names", () => {
    for (const name of rejected) assert.isString(validateBranchName(name), `accepted ${JSON.stringify(name)}`)
  })

  it("accepts ordinary names, and agrees with git on them", () => {
    for (const name of accepted) {
      assert.isNull(validateBranchName(name), name)
      execFileSync("git", ["check-ref-format", "--branch", name])
    }
  })
})

describe("validateGitUrl", () => {
  it("accepts https, ssh, file and git@host: URLs only", () => {
    for (const url of [
      "https://github.com/acme/app.git",
      "ssh://git@github.com/acme/app.git",
      "ssh://git@host:2222/app.git",
      "git@github.com:acme/app.git",
      "file:///srv/git/app.git"
    ]) {
      assert.isNull(validateGitUrl(url), url)
    }
    for (const url of [
      "",
      "http://github.com/acme/app.git",
      "git://github.com/acme/app.git",
      "ext::sh -c touch% /tmp/pwned",
      "--upload-pack=touch /tmp/pwned",
      "-u",
      "/srv/git/app.git",
      "../app",
      "file://",
      "https://",
      "https://-oProxyCommand=x/app",
      "git@-oProxyCommand=x:app",
      "git@host:-x",
      "https://github.com/acme/app.git\n--upload-pack=x",
      "fd::17",
      "https::github.com/x"
    ]) {
      assert.isString(validateGitUrl(url), `accepted ${JSON.stringify(url)}`)
    }
  })
})

describe("queries", () => {
  it.effect("isGitRepository is true only for the top of a work tree", () =>
    Effect.gen(function* () {
      const { repo, root } = makeRepo()
      assert.isTrue(yield* isGitRepository(repo))
      assert.isFalse(yield* isGitRepository(join(repo, "src")))
      assert.isFalse(yield* isGitRepository(root))
      assert.isFalse(yield* isGitRepository(join(root, "missing")))
    })
  )

  it.effect("headCommit reads HEAD and fails on a repository without commits", () =>
    Effect.gen(function* () {
      const { repo, head } = makeRepo()
      assert.strictEqual(yield* headCommit(repo), head)
      const empty = join(tempDir(), "empty")
      mkdirSync(empty)
      git(empty, "init", "-q")
      const error = yield* Effect.flip(headCommit(empty))
      assert.instanceOf(error, GitError)
    })
  )
})

describe("repositoryDirs", () => {
  it.effect(
    "names where a repository keeps its data, wherever a .git file, a commondir file, a symlink or core.worktree puts it",
    () =>
      Effect.gen(function* () {
        const { repo, root } = makeRepo()
        const victim = makeRepo().repo
        const own = join(repo, ".git")
        assert.deepStrictEqual(yield* repositoryDirs(repo), { gitDir: own, commonDir: own, topLevel: repo })
        // Not a repository of its own: git does not look above the path.
        assert.isNull(yield* repositoryDirs(join(repo, "src")))
        assert.isNull(yield* repositoryDirs(join(root, "missing")))
        const theirs = join(victim, ".git")
        const file = join(root, "file")
        write(join(file, ".git"), `gitdir: ${theirs}\n`)
        assert.deepStrictEqual(yield* repositoryDirs(file), { gitDir: theirs, commonDir: theirs, topLevel: file })
        const common = join(root, "common")
        mkdirSync(common)
        git(common, "init", "-q")
        write(join(common, ".git", "commondir"), `${theirs}\n`)
        assert.deepStrictEqual(yield* repositoryDirs(common), {
          gitDir: join(common, ".git"),
          commonDir: theirs,
          topLevel: common
        })
        const linked = join(root, "linked")
        mkdirSync(linked)
        symlinkSync(theirs, join(linked, ".git"))
        assert.deepStrictEqual(yield* repositoryDirs(linked), { gitDir: theirs, commonDir: theirs, topLevel: linked })
        git(repo, "config", "core.worktree", victim)
        assert.deepStrictEqual(yield* repositoryDirs(repo), { gitDir: own, commonDir: own, topLevel: victim })
      })
  )
})

describe("worktrees", () => {
  it.effect("creates a worktree on a new branch from HEAD, leaving the checkout untouched", () =>
    Effect.gen(function* () {
      const { repo, root, head } = makeRepo()
      write(join(repo, "src/a.ts"), "uncommitted edit in the user's checkout\n")
      const before = git(repo, "status", "--porcelain")
      const wt = join(root, "worktrees", "run_1")
      const created = yield* createWorktree({ repoPath: repo, worktreePath: wt, branch: "taskwright/task-1" })
      assert.deepStrictEqual(created, { baseSha: head, created: true })
      assert.strictEqual(readFileSync(join(wt, "src/a.ts"), "utf8"), "one\ntwo\nthree\nfour\nfive\n")
      assert.strictEqual(git(wt, "rev-parse", "--abbrev-ref", "HEAD"), "taskwright/task-1")
      assert.strictEqual(git(repo, "rev-parse", "--abbrev-ref", "HEAD"), "main")
      assert.strictEqual(git(repo, "rev-parse", "HEAD"), head)
      assert.strictEqual(git(repo, "status", "--porcelain"), before)
      assert.strictEqual(readFileSync(join(repo, "src/a.ts"), "utf8"), "uncommitted edit in the user's checkout\n")
    })
  )

  it.effect("with the checked directories, writes there or nowhere: a .git rewritten since the check is refused", () =>
    Effect.gen(function* () {
      const { repo, root, head } = makeRepo()
      const victim = makeRepo()
      const dirs = yield* repositoryDirs(repo)
      assert.isNotNull(dirs)
      if (dirs === null) return
      const wt = join(root, "worktrees", "run_c")
      assert.deepStrictEqual(yield* createWorktree({ repoPath: repo, worktreePath: wt, branch: "checked", dirs }), {
        baseSha: head,
        created: true
      })
      assert.strictEqual(
        readFileSync(join(wt, ".git"), "utf8").trim(),
        `gitdir: ${join(repo, ".git", "worktrees", "run_c")}`
      )
      // The project's .git now leads to another repository: nothing is made anywhere.
      rmSync(join(repo, ".git"), { recursive: true, force: true })
      writeFileSync(join(repo, ".git"), `gitdir: ${join(victim.repo, ".git")}\n`)
      const other = join(root, "worktrees", "run_v")
      const error = yield* Effect.flip(createWorktree({ repoPath: repo, worktreePath: other, branch: "stolen", dirs }))
      assert.match(error.message, /changed while the run was starting/)
      assert.isFalse(existsSync(other))
      assert.strictEqual(git(victim.repo, "branch", "--list"), "* main")
      assert.isFalse(existsSync(join(victim.repo, ".git", "worktrees")))
    })
  )

  it.effect("refuses invalid branch names before running git", () =>
    Effect.gen(function* () {
      const { repo, root } = makeRepo()
      for (const branch of ["--upload-pack=x", "a..b", "@", "x.lock", "$(id)"]) {
        const error = yield* Effect.flip(createWorktree({ repoPath: repo, worktreePath: join(root, "wt"), branch }))
        assert.instanceOf(error, GitError)
      }
      assert.isFalse(existsSync(join(root, "wt")))
      assert.strictEqual(git(repo, "branch", "--list"), "* main")
    })
  )

  it.effect("measures, commits and removes a run's work without losing it", () =>
    Effect.gen(function* () {
      const { repo, root, head } = makeRepo()
      const wt = join(root, "worktrees", "run_2")
      const { baseSha } = yield* createWorktree({ repoPath: repo, worktreePath: wt, branch: "taskwright/task-2" })
      assert.deepStrictEqual(yield* diffStats({ repoPath: repo, worktreePath: wt, baseSha }), {
        files_modified: [],
        lines_added: 0,
        lines_removed: 0
      })

      makeChanges(wt)
      git(wt, "add", "src/a.ts") // staged and unstaged changes count alike
      const statusBefore = git(wt, "status", "--porcelain")
      assert.deepStrictEqual(yield* diffStats({ repoPath: repo, worktreePath: wt, baseSha }), expectedStats)
      assert.strictEqual(git(wt, "status", "--porcelain"), statusBefore, "diffStats changed the worktree's index")

      assert.strictEqual(yield* removeWorktree({ repoPath: repo, worktreePath: wt }), "dirty")
      assert.isTrue(existsSync(join(wt, "new/file.txt")))

      const { sha, refused } = yield* commitAll({
        repoPath: repo,
        worktreePath: wt,
        message: "# Summary\n\nFixed the bug.\n",
        ...author
      })
      assert.isString(sha)
      assert.deepStrictEqual(refused, [])
      assert.strictEqual(
        git(wt, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%B"),
        "Taskwright Agent <agent@taskwright.local>|Taskwright Agent <agent@taskwright.local>|# Summary\n\nFixed the bug."
      )
      assert.strictEqual(git(wt, "rev-parse", "HEAD^"), head)
      assert.deepStrictEqual(
        git(wt, "show", "--name-only", "--format=", "HEAD").split("\n").sort(),
        expectedStats.files_modified
      )
      assert.deepStrictEqual(yield* diffStats({ repoPath: repo, worktreePath: wt, baseSha }), expectedStats)
      assert.isNull((yield* commitAll({ repoPath: repo, worktreePath: wt, message: "nothing", ...author })).sha)

      assert.strictEqual(yield* removeWorktree({ repoPath: repo, worktreePath: wt }), "removed")
      assert.isFalse(existsSync(wt))
      assert.strictEqual(git(repo, "rev-parse", "taskwright/task-2"), sha)
      assert.notInclude(git(repo, "worktree", "list"), "run_2")
      assert.strictEqual(yield* removeWorktree({ repoPath: repo, worktreePath: wt }), "missing")
      assert.strictEqual(git(repo, "status", "--porcelain"), "")
    })
  )

  it.effect("reuses an existing branch, measuring from its merge-base with HEAD", () =>
    Effect.gen(function* () {
      const { repo, root, head } = makeRepo()
      const first = join(root, "worktrees", "run_a")
      yield* createWorktree({ repoPath: repo, worktreePath: first, branch: "feature/x" })
      makeChanges(first)
      yield* commitAll({ repoPath: repo, worktreePath: first, message: "first run", ...author })
      assert.strictEqual(yield* removeWorktree({ repoPath: repo, worktreePath: first }), "removed")

      // Meanwhile the user's main line moves on.
      write(join(repo, "README.md"), "# Demo\n\nA project.\nMore.\n")
      git(repo, "commit", "-q", "-am", "main moves")

      const second = join(root, "worktrees", "run_b")
      const reused = yield* createWorktree({ repoPath: repo, worktreePath: second, branch: "feature/x" })
      assert.deepStrictEqual(reused, { baseSha: head, created: false })
      assert.strictEqual(readFileSync(join(second, "new/file.txt"), "utf8"), "x\ny\nz")
      write(join(second, "more.txt"), "a\nb\n")
      assert.deepStrictEqual(yield* diffStats({ repoPath: repo, worktreePath: second, baseSha: reused.baseSha }), {
        files_modified: [...expectedStats.files_modified, "more.txt"].sort(),
        lines_added: expectedStats.lines_added + 2,
        lines_removed: expectedStats.lines_removed
      })

      // A branch can only be checked out once.
      const busy = yield* Effect.flip(
        createWorktree({ repoPath: repo, worktreePath: join(root, "worktrees", "run_c"), branch: "feature/x" })
      )
      assert.instanceOf(busy, GitError)
      assert.match(busy.stderr, /already checked out|is already used by worktree/)
    })
  )

  it.effect("refuses to remove what is not a linked worktree of the repository", () =>
    Effect.gen(function* () {
      const { repo, root } = makeRepo()
      const stranger = join(root, "not-a-worktree")
      mkdirSync(stranger)
      writeFileSync(join(stranger, "precious.txt"), "keep")
      assert.instanceOf(yield* Effect.flip(removeWorktree({ repoPath: repo, worktreePath: stranger })), GitError)
      assert.instanceOf(yield* Effect.flip(removeWorktree({ repoPath: repo, worktreePath: repo })), GitError)
      assert.isTrue(existsSync(join(stranger, "precious.txt")))
      assert.isTrue(existsSync(join(repo, "README.md")))
    })
  )

  it.effect("never acts on an enclosing repository when a worktree lost its .git file", () =>
    Effect.gen(function* () {
      const { repo, head } = makeRepo()
      const wt = join(repo, "nested", "wt")
      const { baseSha } = yield* createWorktree({ repoPath: repo, worktreePath: wt, branch: "nested" })
      rmSync(join(wt, ".git"))
      write(join(wt, "agent.txt"), "work\n")
      assert.instanceOf(
        yield* Effect.flip(commitAll({ repoPath: repo, worktreePath: wt, message: "x", ...author })),
        GitError
      )
      assert.instanceOf(yield* Effect.flip(diffStats({ repoPath: repo, worktreePath: wt, baseSha })), GitError)
      assert.strictEqual(git(repo, "rev-parse", "HEAD"), head)
    })
  )

  it.effect("diffStats refuses a base that is not a sha", () =>
    Effect.gen(function* () {
      const { repo, root } = makeRepo()
      const wt = join(root, "wt")
      yield* createWorktree({ repoPath: repo, worktreePath: wt, branch: "b" })
      for (const baseSha of ["HEAD", "--output=/tmp/tw-pwned", "main", ""]) {
        assert.instanceOf(yield* Effect.flip(diffStats({ repoPath: repo, worktreePath: wt, baseSha })), GitError)
      }
      assert.isFalse(existsSync("/tmp/tw-pwned"))
    })
  )

  it.effect("ignores GIT_* variables inherited from the service's environment", () =>
    Effect.gen(function* () {
      const { repo, root, head } = makeRepo()
      const decoy = makeRepo()
      const saved = { GIT_DIR: process.env.GIT_DIR, GIT_WORK_TREE: process.env.GIT_WORK_TREE }
      process.env.GIT_DIR = join(decoy.repo, ".git")
      process.env.GIT_WORK_TREE = decoy.repo
      const created = yield* createWorktree({ repoPath: repo, worktreePath: join(root, "wt"), branch: "env" }).pipe(
        Effect.ensuring(
          Effect.sync(() => {
            for (const [key, value] of Object.entries(saved)) {
              if (value === undefined) delete process.env[key]
              else process.env[key] = value
            }
          })
        )
      )
      assert.strictEqual(created.baseSha, head)
      assert.strictEqual(git(decoy.repo, "branch", "--list"), "* main")
    })
  )
})

describe("hardening", () => {
  it.effect("runs no hooks, no fsmonitor and no repository-defined filters", () =>
    Effect.gen(function* () {
      const { repo, root } = makeRepo()
      const markers = join(root, "markers")
      mkdirSync(markers)
      const trap = (name: string) => `#!/bin/sh\ntouch '${join(markers, name)}'\n`
      for (const hook of [
        "post-checkout",
        "pre-commit",
        "prepare-commit-msg",
        "commit-msg",
        "post-commit",
        "reference-transaction",
        "post-index-change",
        "pre-auto-gc"
      ]) {
        write(join(repo, ".git/hooks", hook), trap(`hook-${hook}`))
        chmodSync(join(repo, ".git/hooks", hook), 0o755)
      }
      const fsmonitor = join(root, "fsmonitor.sh")
      write(fsmonitor, `${trap("fsmonitor")}exit 1\n`)
      chmodSync(fsmonitor, 0o755)
      git(repo, "config", "core.fsmonitor", fsmonitor)
      git(repo, "config", "filter.evil.smudge", `sh -c "touch '${join(markers, "smudge")}'; cat"`)
      git(repo, "config", "filter.evil.clean", `sh -c "touch '${join(markers, "clean")}'; cat"`)
      git(repo, "config", "filter.evil.required", "true")
      write(join(repo, ".gitattributes"), "*.txt filter=evil\n")
      git(repo, "add", ".gitattributes")
      git(repo, "commit", "-q", "-m", "attributes")
      assert.deepStrictEqual(readdirSync(markers), [])

      const wt = join(root, "worktrees", "run_h")
      const { baseSha } = yield* createWorktree({ repoPath: repo, worktreePath: wt, branch: "taskwright/task-9" })
      makeChanges(wt)
      yield* diffStats({ repoPath: repo, worktreePath: wt, baseSha })
      yield* commitAll({ repoPath: repo, worktreePath: wt, message: "work", ...author })
      yield* diffStats({ repoPath: repo, worktreePath: wt, baseSha })
      assert.strictEqual(yield* removeWorktree({ repoPath: repo, worktreePath: wt }), "removed")
      yield* cloneRepository({ url: `file://${repo}`, path: join(root, "clone") })
      assert.isTrue(yield* isGitRepository(repo))
      yield* headCommit(repo)
      assert.deepStrictEqual(readdirSync(markers), [])

      // The traps are real: plain git sets them off.
      execFileSync("git", ["status"], { cwd: repo, env: { PATH: process.env.PATH ?? "", HOME: root } })
      assert.include(readdirSync(markers), "fsmonitor")
    })
  )
})

/** Runs `body` with `vars` set in the service's environment (undefined: unset), and puts them back. */
const withEnv = <A, E>(vars: Record<string, string | undefined>, body: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.suspend(() => {
    const saved = Object.fromEntries(Object.keys(vars).map((key) => [key, process.env[key]]))
    const apply = (values: Record<string, string | undefined>) => {
      for (const [key, value] of Object.entries(values)) {
        if (value === undefined) delete process.env[key]
        else process.env[key] = value
      }
    }
    apply(vars)
    return body.pipe(Effect.ensuring(Effect.sync(() => apply(saved))))
  })

describe("the service's git environment", () => {
  it("keeps PATH, locale, time zone and transport settings, and none of the service's secrets", () => {
    const env = serviceGitEnv(
      {
        PATH: "/usr/bin:/bin",
        LANG: "en_GB.UTF-8",
        LC_TIME: "C",
        TZ: "UTC",
        HTTPS_PROXY: "http://proxy:3128",
        GIT_SSH_COMMAND: "ssh -i key",
        SSH_AUTH_SOCK: "/run/agent.sock",
        TASKWRIGHT_JWT_SECRET: "jwt-secret",
        TASKWRIGHT_DATA_DIR: "/srv/data",
        DATABASE_URL: "postgres://u:p@h/d",
        AWS_SECRET_ACCESS_KEY: "aws",
        HOME: "/root",
        XDG_CONFIG_HOME: "/root/.config",
        GIT_DIR: "/elsewhere/.git",
        GIT_CONFIG_GLOBAL: "/root/.evil-gitconfig",
        GIT_CONFIG_PARAMETERS: "'core.hooksPath'='/tmp/hooks'",
        GIT_EXEC_PATH: "/tmp/evil"
      },
      { GIT_AUTHOR_NAME: "Taskwright", HOME: "/tmp/not-this-either" }
    )
    assert.deepStrictEqual(env, {
      PATH: "/usr/bin:/bin",
      LANG: "en_GB.UTF-8",
      LC_TIME: "C",
      TZ: "UTC",
      HTTPS_PROXY: "http://proxy:3128",
      GIT_SSH_COMMAND: "ssh -i key",
      SSH_AUTH_SOCK: "/run/agent.sock",
      GIT_AUTHOR_NAME: "Taskwright",
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
    })
  })

  it.effect(
    "ignores the global and XDG configuration an agent wrote, and its filters never see the service's secrets",
    () =>
      Effect.gen(function* () {
        const { repo, root } = makeRepo()
        const home = join(root, "agent-home")
        const leak = join(root, "leak.txt")
        // What a hostile agent leaves in $HOME: a global filter that dumps the environment, the
        // same through XDG, a global attributes file applying it, hooks and fsmonitor.
        const dump = join(root, "dump.sh")
        write(dump, `#!/bin/sh\nenv > '${leak}'\ncat\n`)
        chmodSync(dump, 0o755)
        const evil = `[filter "evil"]\n\tclean = ${dump}\n\tsmudge = ${dump}\n\trequired = true\n[core]\n\thooksPath = ${root}/hooks\n\tfsmonitor = ${dump}\n\tattributesFile = ${home}/attributes\n`
        write(join(home, ".gitconfig"), evil)
        write(join(home, ".config/git/config"), evil)
        write(join(home, "attributes"), "* filter=evil\n")
        write(join(home, ".config/git/attributes"), "* filter=evil\n")
        write(join(home, ".config/git/ignore"), "*.txt\n")
        const wt = join(root, "worktrees", "run_g")
        const vars = {
          HOME: home,
          XDG_CONFIG_HOME: join(home, ".config"),
          GIT_CONFIG_GLOBAL: join(home, ".gitconfig"),
          TASKWRIGHT_JWT_SECRET: "jwt-secret-that-must-not-leak"
        }
        const { sha, baseSha } = yield* withEnv(
          vars,
          Effect.gen(function* () {
            const { baseSha } = yield* createWorktree({ repoPath: repo, worktreePath: wt, branch: "global" })
            write(join(wt, "notes.txt"), "written by the agent\n")
            yield* diffStats({ repoPath: repo, worktreePath: wt, baseSha })
            const { sha } = yield* commitAll({ repoPath: repo, worktreePath: wt, message: "work", ...author })
            return { sha, baseSha }
          })
        )
        assert.isFalse(existsSync(leak), "the service's git ran a filter from the agent's HOME")
        // The ignore file was not read either: notes.txt is committed, as it is.
        assert.isString(sha)
        assert.strictEqual(git(repo, "show", "global:notes.txt"), "written by the agent")
        assert.deepStrictEqual(yield* diffStats({ repoPath: repo, worktreePath: wt, baseSha }), {
          files_modified: ["notes.txt"],
          lines_added: 1,
          lines_removed: 0
        })

        // The trap is real: a git that reads that HOME runs the filter, with the environment it is given.
        write(join(wt, "more.txt"), "more\n")
        execFileSync("git", ["add", "-f", "more.txt"], {
          cwd: wt,
          env: { PATH: process.env.PATH ?? "", HOME: home, TASKWRIGHT_JWT_SECRET: "jwt-secret-that-must-not-leak" }
        })
        assert.include(readFileSync(leak, "utf8"), "jwt-secret-that-must-not-leak")
      })
  )
})

describe("what is committed", () => {
  it.effect("never a hard link's content, nor a nested repository; symlinks as links", () =>
    Effect.gen(function* () {
      const { repo, root, head } = makeRepo()
      const wt = join(root, "worktrees", "run_l")
      yield* createWorktree({ repoPath: repo, worktreePath: wt, branch: "links" })
      // Outside the worktree: what a hostile agent would like committed.
      const secret = join(root, "secret.txt")
      writeFileSync(secret, "the host's secret\n")
      const outside = join(root, "outside")
      write(join(outside, "private.txt"), "outside the worktree\n")

      linkSync(secret, join(wt, "leak.txt")) // a new file that is the secret
      rmSync(join(wt, "README.md"))
      linkSync(secret, join(wt, "README.md")) // a tracked file replaced by the secret
      write(join(wt, "pair-a.txt"), "shared\n")
      linkSync(join(wt, "pair-a.txt"), join(wt, "pair-b.txt")) // linked within the worktree
      symlinkSync("/etc/passwd", join(wt, "passwd-link")) // a symlink: committed as a link
      rmSync(join(wt, "src"), { recursive: true })
      symlinkSync(outside, join(wt, "src")) // a directory replaced by a link out
      mkdirSync(join(wt, "nested"))
      git(join(wt, "nested"), "init", "-q")
      write(join(wt, "nested/inner.txt"), "in a nested repository\n")
      write(join(wt, "ok.txt"), "fine\n")

      const { sha, refused } = yield* commitAll({ repoPath: repo, worktreePath: wt, message: "links", ...author })
      assert.isString(sha)
      assert.deepStrictEqual(refused.map((r) => r.path).sort(), [
        "README.md",
        "leak.txt",
        "nested",
        "pair-a.txt",
        "pair-b.txt"
      ])
      assert.match(refused.find((r) => r.path === "leak.txt")?.reason ?? "", /hard link/)
      assert.match(refused.find((r) => r.path === "nested")?.reason ?? "", /nested git repository/)

      const tree = git(repo, "ls-tree", "-r", "links").split("\n")
      const entry = (path: string) => tree.find((line) => line.endsWith(`\t${path}`))
      assert.isUndefined(entry("leak.txt"))
      assert.isUndefined(entry("pair-a.txt"))
      assert.isUndefined(entry("nested/inner.txt"))
      assert.isUndefined(entry("nested"))
      assert.isUndefined(entry("src/a.ts"))
      assert.match(entry("passwd-link") ?? "", /^120000 blob /)
      assert.match(entry("src") ?? "", /^120000 blob /)
      assert.strictEqual(git(repo, "show", "links:passwd-link"), "/etc/passwd")
      assert.strictEqual(git(repo, "show", "links:src"), outside)
      assert.strictEqual(git(repo, "show", "links:ok.txt"), "fine")
      // The tracked file keeps its committed content, not the secret's.
      assert.strictEqual(git(repo, "show", "links:README.md"), git(repo, "show", `${head}:README.md`))
      // No object anywhere holds the secret: it was never even hashed into the store.
      const objects = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split("\n")
      for (const object of objects) assert.notInclude(git(repo, "cat-file", "-p", object), "the host's secret")

      // What was refused goes with the worktree; the secret itself stays where it was.
      assert.strictEqual(
        yield* removeWorktree({ repoPath: repo, worktreePath: wt, discard: refused.map((r) => r.path) }),
        "removed"
      )
      assert.isFalse(existsSync(wt))
      assert.strictEqual(readFileSync(secret, "utf8"), "the host's secret\n")
    })
  )

  it.effect("a tracked file turned into a FIFO or a directory does not fail the commit", () =>
    Effect.gen(function* () {
      const { repo, root, head } = makeRepo()
      const wt = join(root, "worktrees", "run_f")
      yield* createWorktree({ repoPath: repo, worktreePath: wt, branch: "odd" })
      rmSync(join(wt, "old.txt"))
      execFileSync("mkfifo", [join(wt, "old.txt")])
      rmSync(join(wt, "README.md"))
      write(join(wt, "README.md/inside.txt"), "now a directory\n")
      const { sha, refused } = yield* commitAll({ repoPath: repo, worktreePath: wt, message: "odd", ...author })
      assert.isString(sha)
      assert.deepStrictEqual(refused, [{ path: "old.txt", reason: "not a regular file, a directory or a symlink" }])
      assert.strictEqual(git(repo, "show", "odd:old.txt"), git(repo, "show", `${head}:old.txt`))
      assert.strictEqual(git(repo, "show", "odd:README.md/inside.txt"), "now a directory")
      assert.strictEqual(
        yield* removeWorktree({ repoPath: repo, worktreePath: wt, discard: refused.map((r) => r.path) }),
        "removed"
      )
    })
  )

  it.effect("never starts a git inside a nested repository the agent made", () =>
    Effect.gen(function* () {
      const { repo, root } = makeRepo()
      const markers = join(root, "markers")
      mkdirSync(markers)
      const trap = join(root, "trap.sh")
      write(trap, `#!/bin/sh\ntouch '${markers}/'"$(basename "$0")-$$"\ncat\n`)
      chmodSync(trap, 0o755)
      const wt = join(root, "worktrees", "run_n")
      const { baseSha } = yield* createWorktree({ repoPath: repo, worktreePath: wt, branch: "nested" })
      // A nested repository whose own config runs a command for anything git does in it.
      const nested = join(wt, "sub")
      mkdirSync(nested)
      git(nested, "init", "-q")
      write(join(nested, "file.txt"), "x\n")
      write(join(nested, ".gitattributes"), "* filter=evil\n")
      git(nested, "add", "-A")
      git(nested, "commit", "-q", "-m", "nested")
      for (const [key, value] of [
        ["core.fsmonitor", trap],
        ["core.hooksPath", root],
        ["filter.evil.clean", trap],
        ["filter.evil.smudge", trap],
        ["filter.evil.required", "true"]
      ] as const) {
        execFileSync("git", ["config", key, value], { cwd: nested })
      }
      write(join(nested, "file.txt"), "changed\n")
      yield* diffStats({ repoPath: repo, worktreePath: wt, baseSha })
      const { refused } = yield* commitAll({ repoPath: repo, worktreePath: wt, message: "x", ...author })
      assert.deepStrictEqual(
        refused.map((r) => r.path),
        ["sub"]
      )
      assert.strictEqual(yield* removeWorktree({ repoPath: repo, worktreePath: wt, discard: ["sub"] }), "removed")
      assert.deepStrictEqual(readdirSync(markers), [])
    })
  )

  it.effect("refuses a worktree whose .git file points at another repository", () =>
    Effect.gen(function* () {
      const { repo, root } = makeRepo()
      const decoy = makeRepo()
      const wt = join(root, "worktrees", "run_d")
      const { baseSha } = yield* createWorktree({ repoPath: repo, worktreePath: wt, branch: "redirected" })
      writeFileSync(join(wt, ".git"), `gitdir: ${join(decoy.repo, ".git")}\n`)
      write(join(wt, "agent.txt"), "work\n")
      const error = yield* Effect.flip(commitAll({ repoPath: repo, worktreePath: wt, message: "x", ...author }))
      assert.instanceOf(error, GitError)
      assert.match(error.message, /is not a work tree of/)
      assert.instanceOf(yield* Effect.flip(diffStats({ repoPath: repo, worktreePath: wt, baseSha })), GitError)
      assert.strictEqual(git(decoy.repo, "rev-parse", "HEAD"), decoy.head)
      assert.strictEqual(git(decoy.repo, "status", "--porcelain"), "")
    })
  )
})

describe("the agent's own git directory", () => {
  it.effect("lets the agent commit and configure without touching the project's repository", () =>
    Effect.gen(function* () {
      const { repo, root, head } = makeRepo()
      git(repo, "tag", "v1")
      const wt = join(root, "worktrees", "run_p")
      yield* createWorktree({ repoPath: repo, worktreePath: wt, branch: "taskwright/task-7" })
      const gitDir = join(root, "sandboxes", "run_p", "git")
      const prepared = yield* prepareAgentGitDir({
        repoPath: repo,
        worktreePath: wt,
        gitDir,
        branch: "taskwright/task-7"
      })
      assert.deepStrictEqual(prepared.objectDirs, [join(repo, ".git", "objects")])
      const projectConfig = readFileSync(join(repo, ".git", "config"), "utf8")
      const projectObjects = git(repo, "count-objects")
      // The agent's view: the worktree's files over the private git directory.
      const agent = (...args: Array<string>) =>
        execFileSync("git", args, {
          cwd: wt,
          encoding: "utf8",
          env: { PATH: process.env.PATH ?? "", HOME: root, GIT_DIR: gitDir, GIT_WORK_TREE: wt }
        }).trim()
      assert.strictEqual(agent("status", "--porcelain"), "")
      assert.strictEqual(agent("rev-parse", "--abbrev-ref", "HEAD"), "taskwright/task-7")
      assert.strictEqual(agent("rev-parse", "HEAD"), head)
      assert.strictEqual(agent("rev-parse", "main"), head)
      assert.strictEqual(agent("rev-parse", "v1"), head)
      write(join(wt, "agent.txt"), "committed by the agent\n")
      agent("add", "agent.txt")
      agent("commit", "-q", "-m", "agent's own commit")
      agent("config", "core.hooksPath", join(root, "evil-hooks"))
      assert.strictEqual(agent("log", "-1", "--format=%an %s"), "Taskwright agent agent's own commit")
      // Nothing of it reached the project.
      assert.strictEqual(readFileSync(join(repo, ".git", "config"), "utf8"), projectConfig)
      assert.strictEqual(git(repo, "count-objects"), projectObjects)
      assert.strictEqual(git(repo, "rev-parse", "taskwright/task-7"), head)
      // The service commits the files, with its own view of the worktree.
      const { sha } = yield* commitAll({ repoPath: repo, worktreePath: wt, message: "run", ...author })
      assert.isString(sha)
      assert.strictEqual(git(repo, "show", "taskwright/task-7:agent.txt"), "committed by the agent")
    })
  )
})

describe("the object directories an agent may borrow", () => {
  it.effect("are the ones mayBorrow accepts, symlinks resolved; a refused one is not followed", () =>
    Effect.gen(function* () {
      const { repo, root } = makeRepo()
      const wt = join(root, "worktrees", "run_b")
      yield* createWorktree({ repoPath: repo, worktreePath: wt, branch: "b" })
      // repo -> shared (through a link) -> hidden -> beyond: only the first two may be read.
      const shared = join(root, "shared", "objects")
      const hidden = join(root, "hidden", "objects")
      const beyond = join(root, "beyond", "objects")
      for (const dir of [shared, hidden, beyond]) mkdirSync(join(dir, "info"), { recursive: true })
      symlinkSync(shared, join(root, "link"))
      write(join(repo, ".git", "objects", "info", "alternates"), `${join(root, "link")}\n# a comment\n`)
      write(join(shared, "info", "alternates"), `../../hidden/objects\n${join(root, "missing")}\n`)
      write(join(hidden, "info", "alternates"), `${beyond}\n`)
      const asked: Array<[string, boolean]> = []
      const prepared = yield* prepareAgentGitDir({
        repoPath: repo,
        worktreePath: wt,
        gitDir: join(root, "sandboxes", "run_b", "git"),
        branch: "b",
        mayBorrow: (dir, own) => {
          asked.push([dir, own])
          return !dir.startsWith(join(root, "hidden"))
        }
      })
      assert.deepStrictEqual(prepared.objectDirs, [join(repo, ".git", "objects"), shared])
      assert.deepStrictEqual(prepared.refused, [hidden])
      assert.deepStrictEqual(asked, [
        [join(repo, ".git", "objects"), true],
        [shared, false],
        [hidden, false]
      ])
    })
  )
})

describe("cloneRepository", () => {
  it.effect("clones a file:// repository", () =>
    Effect.gen(function* () {
      const { repo, root, head } = makeRepo()
      const target = join(root, "projects", "clone")
      yield* cloneRepository({ url: `file://${repo}`, path: target })
      assert.isTrue(yield* isGitRepository(target))
      assert.strictEqual(yield* headCommit(target), head)
    })
  )

  it.effect("refuses unsafe URLs and relative paths without running git", () =>
    Effect.gen(function* () {
      const root = tempDir()
      const marker = join(root, "pwned")
      for (const url of [
        `--upload-pack=touch ${marker}`,
        `ext::sh -c touch% ${marker}`,
        "http://example.com/x.git",
        root
      ]) {
        const error = yield* Effect.flip(cloneRepository({ url, path: join(root, "c") }))
        assert.instanceOf(error, GitError)
      }
      assert.instanceOf(yield* Effect.flip(cloneRepository({ url: `file://${root}`, path: "relative/dir" })), GitError)
      assert.isFalse(existsSync(marker))
      assert.isFalse(existsSync(join(root, "c")))
    })
  )

  it.effect("reports a failing clone as a GitError with git's message", () =>
    Effect.gen(function* () {
      const root = tempDir()
      const error = yield* Effect.flip(cloneRepository({ url: `file://${root}/missing.git`, path: join(root, "c") }))
      assert.instanceOf(error, GitError)
      assert.match(error.message, /^git clone failed: /)
      assert.isNotEmpty(error.stderr)
    })
  )
})
