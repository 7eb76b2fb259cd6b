/**
 * The agent sandbox against the real bubblewrap: what the probe answers, the order of the mounts,
 * and an agent that tries to get out (read the data directory, write outside, hard-link a system
 * file, leave SIGTERM-proof processes behind) while being stopped gracefully.
 */
import { execFileSync } from "node:child_process"
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { afterAll } from "vitest"
import { type OutputStream, spawnAgent } from "../../src/runs/AgentProcess.js"
import { createWorktree } from "../../src/runs/GitWorkspace.js"
import { type Mount, prepareSandbox, probeSandbox, sandboxArgs } from "../../src/runs/Sandbox.js"

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true })
})
const tempDir = (prefix: string): string => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  roots.push(dir)
  return dir
}

const git = (cwd: string, ...args: Array<string>): string =>
  execFileSync("git", ["-c", "user.name=T", "-c", "user.email=t@example.test", ...args], {
    cwd,
    encoding: "utf8",
    env: { PATH: process.env.PATH ?? "", HOME: cwd }
  }).trim()

/** Host pids of live processes whose command line holds `tag` (zombies do not count). */
const tagged = (tag: string): ReadonlyArray<number> =>
  readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .filter((name) => {
      try {
        const stat = readFileSync(`/proc/${name}/stat`, "utf8")
        if (stat.slice(stat.lastIndexOf(")") + 2)[0] === "Z") return false
        return readFileSync(`/proc/${name}/cmdline`, "utf8").includes(tag)
      } catch {
        return false
      }
    })
    .map(Number)

const waitUntil = async (condition: () => boolean, timeoutMs: number): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (condition()) return true
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return condition()
}

describe("sandboxArgs", () => {
  it("mounts from the shallowest target to the deepest, the later of two on one target, hidden directories read-only last", () => {
    const mounts: ReadonlyArray<Mount> = [
      { kind: "hide", source: "", target: "/data" },
      { kind: "bind", source: "/data/wt", target: "/data/wt" },
      { kind: "hide", source: "", target: "/root" },
      { kind: "bind", source: "/data/home", target: "/root" },
      { kind: "ro-bind", source: "/data/wt/.dotgit", target: "/data/wt/.git" },
      { kind: "ro-bind", source: "/root/.local/bin", target: "/root/.local/bin" }
    ]
    const args = sandboxArgs(mounts, "/data/wt")
    const tail = args.slice(args.indexOf("/proc") + 1)
    assert.deepStrictEqual(tail, [
      "--tmpfs",
      "/data",
      "--bind",
      "/data/home",
      "/root",
      "--bind",
      "/data/wt",
      "/data/wt",
      "--ro-bind",
      "/data/wt/.dotgit",
      "/data/wt/.git",
      "--ro-bind",
      "/root/.local/bin",
      "/root/.local/bin",
      "--remount-ro",
      "/data",
      "--chdir",
      "/data/wt"
    ])
    for (const option of ["--unshare-pid", "--die-with-parent", "--new-session", "--ro-bind"]) {
      assert.include(args, option)
    }
  })
})

describe("probeSandbox", () => {
  it.effect("says off when the operator turned the sandbox off, without looking", () =>
    Effect.gen(function* () {
      const status = yield* probeSandbox("off", { PATH: "" })
      assert.strictEqual(status.mode, "off")
      assert.isNull(status.bwrap)
      assert.match(status.detail, /TASKWRIGHT_SANDBOX=off/)
    })
  )

  it.effect("is unavailable, saying how to fix it, when bwrap is missing or cannot make namespaces", () =>
    Effect.gen(function* () {
      const missing = yield* probeSandbox("auto", { PATH: tempDir("tw-nobwrap-") })
      assert.strictEqual(missing.mode, "unavailable")
      assert.match(missing.detail, /bubblewrap \(bwrap\) is not installed/)
      assert.match(missing.detail, /apt-get install bubblewrap/)
      assert.match(missing.detail, /TASKWRIGHT_SANDBOX=off/)

      // A bwrap that cannot do it (as on a kernel without unprivileged user namespaces).
      const bin = tempDir("tw-badbwrap-")
      writeFileSync(
        join(bin, "bwrap"),
        "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'bubblewrap 0.0'; exit 0; }\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
      )
      chmodSync(join(bin, "bwrap"), 0o755)
      const broken = yield* probeSandbox("auto", { PATH: `${bin}:/usr/bin:/bin` })
      assert.strictEqual(broken.mode, "unavailable")
      assert.include(broken.detail, "No permissions to create new namespace")
      assert.match(broken.detail, /TASKWRIGHT_SANDBOX=off/)
    })
  )

  it.effect("finds the real bubblewrap usable on this machine", () =>
    Effect.gen(function* () {
      const status = yield* probeSandbox("auto")
      assert.strictEqual(status.mode, "bwrap", status.detail)
      assert.isString(status.bwrap)
      assert.match(status.detail, /sandboxed by bubblewrap/)
    })
  )
})

describe("an agent in its sandbox", () => {
  it("sees only its worktree, writes nowhere else, cannot hard-link out, and leaves nothing behind a graceful stop", async () => {
    const status = await Effect.runPromise(probeSandbox("auto"))
    assert.strictEqual(status.mode, "bwrap", status.detail)
    const root = tempDir("tw-sandbox-")
    const dataDir = join(root, "data")
    mkdirSync(dataDir)
    writeFileSync(join(dataDir, "admin-key.txt"), "tw_admin_secret_key\n")
    writeFileSync(join(dataDir, "agents.json"), '{"secret":"agents-json-secret"}\n')
    const repo = join(root, "repo")
    mkdirSync(repo)
    git(repo, "init", "-q", "-b", "main")
    writeFileSync(join(repo, "README.md"), "hello\n")
    writeFileSync(join(repo, ".env"), "PROJECT_SECRET=in-the-checkout\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "initial")
    const worktree = join(dataDir, "worktrees", "run_sbx")
    await Effect.runPromise(createWorktree({ repoPath: repo, worktreePath: worktree, branch: "sbx" }))
    const projectConfig = readFileSync(join(repo, ".git", "config"), "utf8")
    const id = String(Date.now())
    const tag = `tw-sbx-${id}`
    const hostFile = `/tmp/${tag}-outside`

    const prepared = await Effect.runPromise(
      prepareSandbox({
        bwrap: status.bwrap ?? "bwrap",
        runId: "run_sbx",
        dataDir,
        repoPath: repo,
        worktreePath: worktree,
        branch: "sbx",
        hidden: [repo],
        program: "/bin/sh",
        commandFiles: [],
        credentials: [],
        readOnlyPaths: [],
        env: process.env
      })
    )
    const script = [
      'echo "pid $$"',
      `cat ../../admin-key.txt ../../agents.json ${dataDir}/admin-key.txt ${repo}/.env 2>/dev/null || echo "no secrets"`,
      `ls ${dataDir} | tr '\\n' ' '; echo`,
      `touch /${tag} 2>/dev/null && echo "wrote /" || echo "/ is read-only"`,
      `touch ${dataDir}/${tag} 2>/dev/null && echo "wrote data" || echo "data is read-only"`,
      `touch ${hostFile} && echo "wrote tmp"`,
      'ln /etc/passwd passwd-link 2>/dev/null && echo "linked" || echo "no hard link"',
      `git config core.hooksPath /tmp/hooks && echo "configured $(git rev-parse --git-dir)"`,
      'echo work > work.txt && git add work.txt && git commit -qm mine && echo "committed"',
      // $0 is the tag, and the sleep's argument holds the id: the host finds both.
      `setsid env -i sh -c 'trap "" TERM; sleep 300.${id}' ${tag} &`,
      `setsid env -i /bin/sh -c 'trap "" TERM; while :; do sleep 1; done' ${tag} >/dev/null 2>&1 &`,
      "trap 'echo \"got TERM\"; exit 0' TERM",
      "echo ready",
      "while :; do sleep 0.1; done"
    ].join("\n")
    const lines: Array<{ stream: OutputStream; line: string }> = []
    const handle = spawnAgent({
      command: "/bin/sh",
      args: ["-c", script],
      cwd: worktree,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...prepared.env },
      stdin: null,
      timeoutMs: 60_000,
      maxLogBytes: 1024 * 1024,
      onLine: (stream, line) => lines.push({ stream, line }),
      sandbox: prepared.spawn
    })
    assert.isTrue(await waitUntil(() => lines.some((l) => l.line === "ready"), 10_000), JSON.stringify(lines))
    const out = lines.filter((l) => l.stream === "stdout").map((l) => l.line)
    assert.include(out, "pid 2") // its own PID namespace
    assert.include(out, "no secrets")
    assert.notInclude(out.join("\n"), "tw_admin_secret_key")
    assert.notInclude(out.join("\n"), "agents-json-secret")
    assert.notInclude(out.join("\n"), "in-the-checkout")
    assert.include(out, "/ is read-only")
    assert.include(out, "data is read-only")
    assert.include(out, "wrote tmp")
    assert.include(out, "no hard link")
    assert.include(out, `configured ${join(dataDir, "sandboxes", "run_sbx", "git")}`)
    assert.include(out, "committed")
    // SIGTERM-proof processes in new sessions with no environment, found on the host by the id.
    assert.isTrue(await waitUntil(() => tagged(id).length >= 3, 5_000), "the detached processes never started")

    const stopped = Date.now()
    handle.stop(3_000)
    const exit = await handle.exit
    assert.isTrue(await handle.gone(5_000))
    // Graceful first: the agent had its SIGTERM and ended by itself, well before the SIGKILL.
    assert.include(
      lines.map((l) => l.line),
      "got TERM"
    )
    assert.strictEqual(exit.reason, "stopped")
    assert.isBelow(Date.now() - stopped, 2_500)
    assert.deepStrictEqual(tagged(id), [])

    // Nothing appeared outside; the project's repository is as it was.
    assert.isFalse(existsSync(`/${tag}`))
    assert.isFalse(existsSync(join(dataDir, tag)))
    assert.isFalse(existsSync(hostFile))
    assert.isFalse(existsSync(join(worktree, "passwd-link")))
    assert.strictEqual(readFileSync(join(repo, ".git", "config"), "utf8"), projectConfig)
    assert.strictEqual(git(repo, "rev-parse", "sbx"), git(repo, "rev-parse", "main"))
    assert.strictEqual(readFileSync(join(worktree, "work.txt"), "utf8"), "work\n")
  })
})

describe("what a sandboxed agent may run", () => {
  it("the files its configured command line names, wherever they are; nothing the run's arguments name", async () => {
    const status = await Effect.runPromise(probeSandbox("auto"))
    assert.strictEqual(status.mode, "bwrap", status.detail)
    const root = tempDir("tw-sandbox-cmd-")
    const dataDir = join(root, "data")
    mkdirSync(dataDir)
    const repo = join(root, "repo")
    mkdirSync(repo)
    git(repo, "init", "-q", "-b", "main")
    writeFileSync(join(repo, "README.md"), "hello\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "initial")
    const worktree = join(dataDir, "worktrees", "run_cmd")
    await Effect.runPromise(createWorktree({ repoPath: repo, worktreePath: worktree, branch: "cmd" }))
    // Both in the host's /tmp, which the sandbox replaces with a private one.
    const tools = join(root, "tools")
    mkdirSync(tools)
    writeFileSync(
      join(tools, "agent.sh"),
      'echo "agent script ran"\ncat "$1" 2>/dev/null || echo "argument not visible"\n'
    )
    const elsewhere = join(root, "elsewhere")
    mkdirSync(elsewhere)
    writeFileSync(join(elsewhere, "secret.txt"), "not for the agent\n")
    const prepared = await Effect.runPromise(
      prepareSandbox({
        bwrap: status.bwrap ?? "bwrap",
        runId: "run_cmd",
        dataDir,
        repoPath: repo,
        worktreePath: worktree,
        branch: "cmd",
        hidden: [repo],
        program: "/bin/sh",
        commandFiles: ["/bin/sh", join(tools, "agent.sh")],
        credentials: [],
        readOnlyPaths: [],
        env: process.env
      })
    )
    const lines: Array<string> = []
    const handle = spawnAgent({
      command: "/bin/sh",
      args: [join(tools, "agent.sh"), join(elsewhere, "secret.txt")],
      cwd: worktree,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...prepared.env },
      stdin: null,
      timeoutMs: 20_000,
      maxLogBytes: 1024 * 1024,
      onLine: (_stream, line) => lines.push(line),
      sandbox: prepared.spawn
    })
    const exit = await handle.exit
    assert.strictEqual(exit.code, 0, lines.join("\n"))
    assert.deepStrictEqual(lines, ["agent script ran", "argument not visible"])
  })
})
