import { mkdtemp, readFile, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { isRunning } from "@taskwright/testing"
import { Effect, Fiber } from "effect"
import { afterAll, beforeAll } from "vitest"
import {
  type AgentExit,
  buildAgentEnv,
  type OutputStream,
  runAgent,
  type SpawnAgentOptions,
  spawnAgent,
  truncationNotice
} from "../../src/runs/AgentProcess.js"

const AGENT = fileURLToPath(new URL("../../../testing/bin/scripted-agent.mjs", import.meta.url))

interface Line {
  readonly stream: OutputStream
  readonly line: string
}

let workDir = ""
beforeAll(async () => {
  workDir = await mkdtemp(join(tmpdir(), "tw-agentprocess-"))
})
afterAll(async () => {
  await rm(workDir, { recursive: true, force: true })
})

/** Runs the scripted agent with `script` and collects its lines. */
const start = (script: ReadonlyArray<unknown>, overrides: Partial<SpawnAgentOptions> = {}) => {
  const lines: Array<Line> = []
  const handle = spawnAgent({
    command: process.execPath,
    args: [AGENT],
    cwd: workDir,
    env: { PATH: process.env.PATH ?? "", TASKWRIGHT_SCRIPT: JSON.stringify(script) },
    stdin: null,
    timeoutMs: 30_000,
    maxLogBytes: 10 * 1024 * 1024,
    onLine: (stream, line) => lines.push({ stream, line }),
    ...overrides
  })
  return { handle, lines }
}

const run = async (script: ReadonlyArray<unknown>, overrides: Partial<SpawnAgentOptions> = {}) => {
  const { handle, lines } = start(script, overrides)
  const exit = await handle.exit
  return { exit, lines, handle }
}

const waitUntil = async (condition: () => boolean, timeoutMs: number): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (condition()) return true
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return condition()
}

const childPid = async (lines: ReadonlyArray<Line>): Promise<number> => {
  const found = () => lines.find((l) => l.line.startsWith("child-pid "))
  assert.isTrue(await waitUntil(() => found() !== undefined, 10_000), "the agent never reported its child")
  return Number(found()?.line.split(" ")[1])
}

const stdoutLines = (lines: ReadonlyArray<Line>): Array<string> =>
  lines.filter((l) => l.stream === "stdout").map((l) => l.line)

describe("spawnAgent", () => {
  it("delivers stdout and stderr lines and the exit code", async () => {
    const { exit, lines, handle } = await run([
      { stdout: "out 1" },
      { stderr: "err 1" },
      { stdout: "out 2" },
      { exit: 3 }
    ])
    assert.deepStrictEqual<AgentExit>(exit, { code: 3, signal: null, reason: "exit", truncated: false, error: null })
    assert.isNumber(handle.pid)
    assert.deepStrictEqual(stdoutLines(lines), ["out 1", "out 2"])
    assert.deepStrictEqual(
      lines.filter((l) => l.stream === "stderr").map((l) => l.line),
      ["err 1"]
    )
  })

  it("joins lines split across chunks, drops \\r, and delivers a last line without newline", async () => {
    const euro = Buffer.from("€", "utf8")
    const { exit, lines } = await run([
      { raw: "hel" },
      { sleep_ms: 40 },
      { raw: "lo\nwor" },
      { sleep_ms: 40 },
      { raw: "ld\r\nprice 5" },
      { sleep_ms: 40 },
      // a multi-byte character cut between two writes
      { raw: euro.subarray(0, 1).toString("base64"), encoding: "base64" },
      { sleep_ms: 40 },
      { raw: euro.subarray(1).toString("base64"), encoding: "base64" },
      { raw: "\n\nlast" }
    ])
    assert.strictEqual(exit.code, 0)
    assert.deepStrictEqual(stdoutLines(lines), ["hello", "world", "price 5€", "", "last"])
  })

  it("delivers 100,000 lines in order", async () => {
    const started = Date.now()
    const { exit, lines } = await run([{ lines: 100_000 }])
    const elapsed = Date.now() - started
    assert.strictEqual(exit.code, 0)
    assert.strictEqual(lines.length, 100_000)
    for (let i = 0; i < lines.length; i++) {
      if (lines[i]?.line !== `line ${i + 1}`) assert.fail(`line ${i} is ${lines[i]?.line}`)
    }
    // Includes starting Node twice; the supervisor alone is far faster than 50k lines/s.
    assert.isBelow(elapsed, 10_000)
  })

  it("sustains well over 50,000 lines per second", async () => {
    let count = 0
    const started = process.hrtime.bigint()
    const { exit } = await run([{ lines: 400_000 }], { onLine: () => void count++ })
    const seconds = Number(process.hrtime.bigint() - started) / 1e9
    assert.strictEqual(exit.code, 0)
    assert.strictEqual(count, 400_000)
    assert.isAbove(count / seconds, 50_000)
  })

  it("stores at most maxLogBytes, then one truncation notice, and keeps draining the pipe", async () => {
    const overflow: Array<string> = []
    const { exit, lines } = await run([{ lines: 50_000 }, { stdout: "after" }, { exit: 0 }], {
      maxLogBytes: 1000,
      onOverflowLine: (_stream, line) => overflow.push(line)
    })
    assert.strictEqual(exit.code, 0)
    assert.isTrue(exit.truncated)
    const notices = lines.filter((l) => l.line === truncationNotice(1000))
    assert.strictEqual(notices.length, 1)
    assert.strictEqual(lines[lines.length - 1]?.line, truncationNotice(1000))
    const stored = lines.filter((l) => l.line !== truncationNotice(1000))
    const bytes = stored.reduce((sum, l) => sum + Buffer.byteLength(l.line) + 1, 0)
    assert.isAtMost(bytes, 1000)
    assert.strictEqual(stored.length + overflow.length, 50_001)
    assert.strictEqual(overflow[overflow.length - 1], "after")
  })

  it("drains output past the cap even without an overflow callback", async () => {
    const { exit, lines } = await run([{ lines: 200_000 }, { exit: 4 }], { maxLogBytes: 100 })
    assert.strictEqual(exit.code, 4)
    assert.isTrue(exit.truncated)
    assert.strictEqual(lines.filter((l) => l.line.startsWith("[taskwright]")).length, 1)
  })

  it("writes the prompt to stdin and passes the environment as given", async () => {
    const env = buildAgentEnv(
      {
        PATH: process.env.PATH,
        HOME: "/home/agent",
        LC_ALL: "C.UTF-8",
        ANTHROPIC_API_KEY: "sk-ant",
        DATABASE_URL: "postgres://secret",
        TASKWRIGHT_JWT_SECRET: "jwt-secret",
        TASKWRIGHT_SCRIPT: "from the service's own environment",
        AWS_SECRET_ACCESS_KEY: "aws",
        GIT_DIR: "/elsewhere"
      },
      {
        TASKWRIGHT_SCRIPT: JSON.stringify([{ echo_prompt: true }, { print_env: true }]),
        TASKWRIGHT_PROMPT: "Fix the bug",
        TASKWRIGHT_RUN_ID: "run_x"
      }
    )
    const { exit, lines } = await run([], { env, stdin: "Fix the bug\nplease" })
    assert.strictEqual(exit.code, 0)
    const out = stdoutLines(lines)
    assert.strictEqual(out[0], 'stdin "Fix the bug\\nplease"')
    assert.strictEqual(out[1], 'TASKWRIGHT_PROMPT "Fix the bug"')
    const names = out
      .filter((l) => l.startsWith("env "))
      .map((l) => l.slice(4, l.indexOf("=")))
      // Node may add nothing, but libc-level variables some platforms inject are not ours to list.
      .filter((name) => name !== "LD_LIBRARY_PATH")
    assert.deepStrictEqual(names, [
      "ANTHROPIC_API_KEY",
      "HOME",
      "LC_ALL",
      "PATH",
      "TASKWRIGHT_PROMPT",
      "TASKWRIGHT_RUN_ID",
      "TASKWRIGHT_SCRIPT"
    ])
  })

  it("runs in the given working directory", async () => {
    const { exit } = await run([{ write: "made-here.txt", content: "x" }])
    assert.strictEqual(exit.code, 0)
    assert.strictEqual(await readFile(join(workDir, "made-here.txt"), "utf8"), "x")
  })

  it("stop() terminates the whole process group", async () => {
    const { handle, lines } = start([{ spawn_child_sleep_ms: 60_000 }, { sleep_ms: 60_000 }])
    const grandchild = await childPid(lines)
    assert.isTrue(isRunning(grandchild))
    const started = Date.now()
    handle.stop()
    const exit = await handle.exit
    assert.strictEqual(exit.reason, "stopped")
    assert.strictEqual(exit.signal, "SIGTERM")
    assert.isBelow(Date.now() - started, 3000)
    assert.isTrue(await waitUntil(() => !isRunning(grandchild), 5000), "grandchild still running")
  })

  it("escalates to SIGKILL after the grace period when SIGTERM is ignored", async () => {
    const { handle, lines } = start([
      { trap_sigterm: true },
      { spawn_child_sleep_ms: 60_000, ignore_sigterm: true },
      { sleep_ms: 60_000 }
    ])
    const grandchild = await childPid(lines)
    const started = Date.now()
    handle.stop(300)
    handle.stop(300) // idempotent
    const exit = await handle.exit
    assert.strictEqual(exit.reason, "stopped")
    assert.strictEqual(exit.signal, "SIGKILL")
    assert.isAtLeast(Date.now() - started, 250)
    assert.isTrue(stdoutLines(lines).includes("sigterm ignored"))
    assert.isTrue(await waitUntil(() => !isRunning(grandchild), 5000), "grandchild still running")
  })

  it("times out like a stop, with reason timeout", async () => {
    const started = Date.now()
    const { exit } = await run([{ stdout: "working" }, { sleep_ms: 60_000 }], { timeoutMs: 300 })
    assert.strictEqual(exit.reason, "timeout")
    assert.strictEqual(exit.signal, "SIGTERM")
    assert.isBelow(Date.now() - started, 5000)
  })

  it("does not hang when a leftover grandchild holds the pipes, and cleans it up", async () => {
    const started = Date.now()
    const { exit, lines } = await run([{ spawn_child_sleep_ms: 60_000 }, { stdout: "bye" }, { exit: 0 }], {
      drainMs: 300
    })
    assert.deepStrictEqual(exit, { code: 0, signal: null, reason: "exit", truncated: false, error: null })
    assert.isBelow(Date.now() - started, 5000)
    assert.isTrue(stdoutLines(lines).includes("bye"))
    const grandchild = Number(lines.find((l) => l.line.startsWith("child-pid "))?.line.split(" ")[1])
    assert.isTrue(await waitUntil(() => !isRunning(grandchild), 5000), "leftover grandchild still running")
  })

  it("resolves with spawn_error when the command or directory does not exist", async () => {
    const missing = spawnAgent({
      command: "/nonexistent/agent-cli",
      args: [],
      cwd: workDir,
      env: {},
      stdin: "prompt",
      timeoutMs: 1000,
      maxLogBytes: 1000,
      onLine: () => {}
    })
    const exit = await missing.exit
    assert.strictEqual(exit.reason, "spawn_error")
    assert.isNull(exit.code)
    assert.match(exit.error ?? "", /ENOENT/)
    missing.stop() // harmless

    const badCwd = await run([], { cwd: join(workDir, "does-not-exist") })
    assert.strictEqual(badCwd.exit.reason, "spawn_error")

    const nul = await run([], { args: ["bad\u0000arg"] })
    assert.strictEqual(nul.exit.reason, "spawn_error")
  })

  it("pause() holds the agent back on a full pipe, resume() lets it finish with nothing lost", async () => {
    const { handle, lines } = start([{ lines: 200_000, prefix: "p" }])
    handle.pause()
    await new Promise((resolve) => setTimeout(resolve, 400))
    // Blocked on write: far from done, and still running.
    assert.isBelow(lines.length, 200_000)
    const held = lines.length
    await new Promise((resolve) => setTimeout(resolve, 200))
    assert.strictEqual(lines.length, held)
    handle.resume()
    const exit = await handle.exit
    assert.strictEqual(exit.code, 0)
    assert.strictEqual(lines.length, 200_000)
    assert.strictEqual(lines.at(-1)?.line, "p 200000")
  })

  it("survives an onLine callback that throws", async () => {
    const { exit } = await run([{ stdout: "a" }, { stdout: "b" }], {
      onLine: () => {
        throw new Error("log store down")
      }
    })
    assert.strictEqual(exit.code, 0)
  })
})

describe("runAgent", () => {
  it.effect("succeeds with the exit, and interruption stops the process group", () =>
    Effect.gen(function* () {
      const base = {
        command: process.execPath,
        args: [AGENT],
        cwd: workDir,
        stdin: null,
        timeoutMs: 30_000,
        maxLogBytes: 1_000_000,
        graceMs: 1000
      }
      const done = yield* runAgent({
        ...base,
        env: { TASKWRIGHT_SCRIPT: JSON.stringify([{ exit: 5 }]) },
        onLine: () => {}
      })
      assert.strictEqual(done.code, 5)

      const lines: Array<Line> = []
      const fiber = yield* Effect.fork(
        runAgent({
          ...base,
          env: { TASKWRIGHT_SCRIPT: JSON.stringify([{ spawn_child_sleep_ms: 60_000 }, { sleep_ms: 60_000 }]) },
          onLine: (stream, line) => lines.push({ stream, line })
        })
      )
      const grandchild = yield* Effect.promise(() => childPid(lines))
      yield* Fiber.interrupt(fiber)
      const gone = yield* Effect.promise(() => waitUntil(() => !isRunning(grandchild), 5000))
      assert.isTrue(gone)
    })
  )
})

describe("buildAgentEnv", () => {
  it("keeps the allow-list, adds extra, and never passes the service's secrets", () => {
    const env = buildAgentEnv(
      {
        PATH: "/bin",
        HOME: "/h",
        USER: "u",
        LANG: "en_US.UTF-8",
        LC_CTYPE: "UTF-8",
        TERM: "xterm",
        TMPDIR: "/tmp",
        SHELL: "/bin/sh",
        OPENAI_API_KEY: "o",
        GEMINI_API_KEY: "g",
        GOOGLE_API_KEY: "gg",
        CODEX_HOME: "/c",
        CLAUDE_CONFIG_DIR: "/cc",
        DATABASE_URL: "postgres://x",
        TASKWRIGHT_JWT_SECRET: "s",
        TASKWRIGHT_PROJECTS_ROOT: "/p",
        NODE_OPTIONS: "--require evil.js",
        LD_PRELOAD: "/evil.so",
        UNSET: undefined
      },
      { TASKWRIGHT_TASK_ID: "7", MY_AGENT_SETTING: "on", DATABASE_URL: "postgres://again" }
    )
    assert.deepStrictEqual(Object.keys(env).sort(), [
      "CLAUDE_CONFIG_DIR",
      "CODEX_HOME",
      "GEMINI_API_KEY",
      "GOOGLE_API_KEY",
      "HOME",
      "LANG",
      "LC_CTYPE",
      "MY_AGENT_SETTING",
      "OPENAI_API_KEY",
      "PATH",
      "SHELL",
      "TASKWRIGHT_TASK_ID",
      "TERM",
      "TMPDIR",
      "USER"
    ])
  })
})
