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
  symlinkSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { afterAll } from "vitest"
import { type OutputStream, spawnAgent } from "../../src/runs/AgentProcess.js"
import { createWorktree } from "../../src/runs/GitWorkspace.js"
import {
  type Mount,
  type PreparedSandbox,
  prepareSandbox,
  probeSandbox,
  type SandboxRequest,
  sandboxArgs
} from "../../src/runs/Sandbox.js"

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

/** A data directory and a project with one commit, and the worktree of run `runId` on branch `branch`. */
const makeRun = async (prefix: string, runId: string, branch: string) => {
  const root = tempDir(prefix)
  const dataDir = join(root, "data")
  mkdirSync(dataDir)
  const repo = join(root, "repo")
  mkdirSync(repo)
  git(repo, "init", "-q", "-b", "main")
  writeFileSync(join(repo, "README.md"), "hello\n")
  git(repo, "add", "README.md")
  git(repo, "commit", "-q", "-m", "initial")
  const worktree = join(dataDir, "worktrees", runId)
  await Effect.runPromise(createWorktree({ repoPath: repo, worktreePath: worktree, branch }))
  return { root, dataDir, repo, worktree, runId, branch }
}

/** The sandbox of `run` for `/bin/sh`, with its project hidden; `extra` on top. */
const prepareFor = (
  run: Awaited<ReturnType<typeof makeRun>>,
  bwrap: string | null,
  extra: Partial<SandboxRequest> = {}
) =>
  Effect.runPromise(
    prepareSandbox({
      bwrap: bwrap ?? "bwrap",
      runId: run.runId,
      dataDir: run.dataDir,
      repoPath: run.repo,
      worktreePath: run.worktree,
      branch: run.branch,
      hidden: [run.repo],
      program: "/bin/sh",
      commandFiles: [],
      credentials: [],
      readOnlyPaths: [],
      env: process.env,
      ...extra
    })
  )

/** Runs `/bin/sh args` in the sandbox to its end: its exit and every line it wrote. */
const runToEnd = async (prepared: PreparedSandbox, worktree: string, args: ReadonlyArray<string>) => {
  const lines: Array<string> = []
  const handle = spawnAgent({
    command: "/bin/sh",
    args,
    cwd: worktree,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...prepared.env },
    stdin: null,
    timeoutMs: 20_000,
    maxLogBytes: 1024 * 1024,
    onLine: (_stream, line) => lines.push(line),
    sandbox: prepared.spawn
  })
  return { exit: await handle.exit, lines }
}

describe("sandboxArgs", () => {
  it("mounts from the shallowest target to the deepest, the later of two on one target, hidden directories read-only last", () => {
    const mounts: ReadonlyArray<Mount> = [
      { kind: "hide", source: "", target: "/data" },
      { kind: "bind", source: "/data/wt", target: "/data/wt" },
      { kind: "bind", source: "/data/home", target: "/home/me" },
      { kind: "ro-bind", source: "/data/wt/.dotgit", target: "/data/wt/.git" },
      { kind: "ro-bind", source: "/data/wt/.dotgit2", target: "/data/wt/.git" },
      { kind: "ro-bind", source: "/home/me/.local/bin", target: "/home/me/.local/bin" }
    ]
    const args = sandboxArgs(mounts, "/data/wt")
    const tail = args.slice(args.indexOf("/proc") + 1)
    assert.deepStrictEqual(tail, [
      "--tmpfs",
      "/data",
      "--bind",
      "/data/wt",
      "/data/wt",
      "--bind",
      "/data/home",
      "/home/me",
      "--ro-bind",
      "/data/wt/.dotgit2",
      "/data/wt/.git",
      "--ro-bind",
      "/home/me/.local/bin",
      "/home/me/.local/bin",
      "--remount-ro",
      "/data",
      "--chdir",
      "/data/wt"
    ])
    for (const option of ["--unshare-pid", "--die-with-parent", "--new-session", "--ro-bind"]) {
      assert.include(args, option)
    }
  })

  it("drops every capability, in a user namespace of its own where the kernel allows one", () => {
    const args = sandboxArgs([], "/")
    assert.strictEqual(args[args.indexOf("--cap-drop") + 1], "ALL")
    assert.include(args, "--unshare-user-try")
  })

  it("a hiding mount wins over any other mount on its target, before or after it", () => {
    const args = sandboxArgs(
      [
        { kind: "ro-bind", source: "/data", target: "/data" },
        { kind: "hide", source: "", target: "/data" },
        { kind: "ro-bind", source: "/data", target: "/data" },
        { kind: "bind-try", source: "/data", target: "/data" }
      ],
      "/"
    )
    const tail = args.slice(args.indexOf("/proc") + 1)
    assert.deepStrictEqual(tail, ["--tmpfs", "/data", "--remount-ro", "/data", "--chdir", "/"])
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
    const run = await makeRun("tw-sandbox-", "run_sbx", "sbx")
    const { dataDir, repo, worktree } = run
    writeFileSync(join(dataDir, "admin-key.txt"), "tw_admin_secret_key\n")
    writeFileSync(join(dataDir, "agents.json"), '{"secret":"agents-json-secret"}\n')
    writeFileSync(join(repo, ".env"), "PROJECT_SECRET=in-the-checkout\n")
    const projectConfig = readFileSync(join(repo, ".git", "config"), "utf8")
    const id = String(Date.now())
    const tag = `tw-sbx-${id}`
    const hostFile = `/tmp/${tag}-outside`

    const prepared = await prepareFor(run, status.bwrap)
    const script = [
      'echo "pid $$"',
      `cat ../../admin-key.txt ../../agents.json ${dataDir}/admin-key.txt ${repo}/.env 2>/dev/null || echo "no secrets"`,
      `ls ${dataDir} | tr '\\n' ' '; echo`,
      `touch /${tag} 2>/dev/null && echo "wrote /" || echo "/ is read-only"`,
      `touch ${dataDir}/${tag} 2>/dev/null && echo "wrote data" || echo "data is read-only"`,
      `touch ${hostFile} && echo "wrote tmp"`,
      // As root (the tests' own user), with what root may try: unmount or get under what hides, write the host.
      `umount -l ${dataDir} 2>/dev/null && echo "ESCAPED: unmounted the data directory"`,
      `mount -o remount,bind,rw / 2>/dev/null && echo "ESCAPED: remounted / read-write"`,
      `mount -o remount,rw / 2>/dev/null && echo "ESCAPED: remounted the host's / read-write"`,
      `mkdir -p /tmp/under && mount --bind / /tmp/under 2>/dev/null && echo "ESCAPED: bound /"`,
      `cat /tmp/under${dataDir}/admin-key.txt 2>/dev/null`,
      `unshare -m sh -c 'umount -l ${dataDir} && cat ${dataDir}/admin-key.txt' 2>/dev/null && echo "ESCAPED: unshare -m"`,
      `unshare -Urm sh -c 'umount -l ${dataDir} && cat ${dataDir}/admin-key.txt' 2>/dev/null && echo "ESCAPED: unshare -Urm"`,
      `cat /proc/1/root${dataDir}/admin-key.txt 2>/dev/null && echo "ESCAPED: /proc/1/root"`,
      `cat ${dataDir}/admin-key.txt 2>/dev/null`,
      `touch /${tag}-late 2>/dev/null && echo "ESCAPED: wrote / at last"`,
      'echo "caps $(grep CapEff /proc/self/status | cut -f2)"',
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
    assert.deepStrictEqual(
      out.filter((l) => l.startsWith("ESCAPED")),
      []
    )
    assert.include(out, "caps 0000000000000000")
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
    assert.isFalse(existsSync(`/${tag}-late`))
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
    const run = await makeRun("tw-sandbox-cmd-", "run_cmd", "cmd")
    const { root, worktree } = run
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
    const prepared = await prepareFor(run, status.bwrap, { commandFiles: ["/bin/sh", join(tools, "agent.sh")] })
    const { exit, lines } = await runToEnd(prepared, worktree, [join(tools, "agent.sh"), join(elsewhere, "secret.txt")])
    assert.strictEqual(exit.code, 0, lines.join("\n"))
    assert.deepStrictEqual(lines, ["agent script ran", "argument not visible"])
  })
})

describe("a hostile repository's alternates", () => {
  it("un-hide nothing: object directories in, around or linked to a hidden directory are neither shown nor followed", async () => {
    const status = await Effect.runPromise(probeSandbox("auto"))
    assert.strictEqual(status.mode, "bwrap", status.detail)
    const run = await makeRun("tw-sandbox-alt-", "run_alt", "alt")
    const { root, dataDir, repo, worktree } = run
    writeFileSync(join(dataDir, "admin-key.txt"), "tw_admin_secret_key\n")
    const other = join(root, "other-project")
    mkdirSync(other)
    writeFileSync(join(other, "secret.txt"), "other-project-secret\n")
    // The repository's owner names the data directory, a link to it, another project, and a
    // directory around them all; the host's /root besides.
    symlinkSync(dataDir, join(root, "innocent"))
    writeFileSync(
      join(repo, ".git", "objects", "info", "alternates"),
      [dataDir, join(root, "innocent"), other, root, "/root", `${dataDir}/worktrees`, ""].join("\n")
    )
    const prepared = await prepareFor(run, status.bwrap, { hidden: [repo, other] })
    const mounted = prepared.spawn.args.filter(
      (_, i, all) => all[i - 1] !== undefined && /^--(ro-)?bind/.test(all[i - 1] ?? "")
    )
    for (const path of [dataDir, other, root, "/root", join(dataDir, "worktrees")]) assert.notInclude(mounted, path)
    assert.include(mounted, join(repo, ".git", "objects"))
    assert.strictEqual(
      prepared.notes.filter((n) => n.includes("objects/info/alternates")).length,
      6,
      prepared.notes.join("\n")
    )
    const { exit, lines } = await runToEnd(prepared, worktree, [
      "-c",
      [
        `cat ${dataDir}/admin-key.txt ${join(root, "innocent")}/admin-key.txt ${other}/secret.txt 2>/dev/null || echo "nothing to read"`,
        `ls ${dataDir}/worktrees 2>/dev/null | tr '\\n' ' '; echo`,
        'git log --format=%s -1 && echo "git works"'
      ].join("\n")
    ])
    assert.strictEqual(exit.code, 0, lines.join("\n"))
    assert.include(lines, "nothing to read")
    assert.notInclude(lines.join("\n"), "tw_admin_secret_key")
    assert.notInclude(lines.join("\n"), "other-project-secret")
    // Its own worktree only, and the project's own objects still there.
    assert.include(lines, "run_alt ")
    assert.include(lines, "git works")
  })
})
