/** How each kind of agent is launched: argument vectors, autonomy mappings, where the prompt goes. */

import { assert, describe, it } from "@effect/vitest"
import {
  AgentsFile,
  AgentUpdate,
  type Autonomy,
  applyUpdate,
  builtInDefaults,
  settingsProblem,
  toFileEntry
} from "@taskwright/domain"
import { Either, Schema } from "effect"
import { executorFor, MAX_PROMPT_ARG_BYTES } from "../../src/agents/Executors.js"

const settings = (name: string, patch: Parameters<typeof applyUpdate>[1] = {}) =>
  applyUpdate(builtInDefaults(name), patch)

const autonomies: ReadonlyArray<Autonomy> = ["read-only", "workspace-write", "danger-full-access"]

describe("executors", () => {
  it("claude-code: -p stream-json with the permission mode of the autonomy, the prompt on stdin", () => {
    const modes = autonomies.map((autonomy) => {
      const launch = executorFor("claude-code").launch({ settings: settings("claude-code"), autonomy, prompt: "do it" })
      assert.deepStrictEqual(launch.argv.slice(0, 5), ["claude", "-p", "--output-format", "stream-json", "--verbose"])
      assert.strictEqual(launch.stdin, "do it")
      assert.notInclude(launch.argv, "--model")
      return launch.argv.at(-1)
    })
    assert.deepStrictEqual(modes, ["plan", "acceptEdits", "bypassPermissions"])
    const withModel = executorFor("claude-code").launch({
      settings: settings("claude-code", { model: "opus", command: ["/opt/claude", "--debug"] }),
      autonomy: "workspace-write",
      prompt: "p"
    })
    assert.deepStrictEqual(withModel.argv, [
      "/opt/claude",
      "--debug",
      "-p",
      "--output-format",
      "stream-json",
      "--verbose",
      "--model",
      "opus",
      "--permission-mode",
      "acceptEdits"
    ])
  })

  it("codex: exec --json --sandbox <autonomy>, the prompt on stdin via '-'", () => {
    for (const autonomy of autonomies) {
      const launch = executorFor("codex").launch({
        settings: settings("codex", { model: "gpt-5-codex" }),
        autonomy,
        prompt: "p"
      })
      assert.deepStrictEqual(launch.argv, [
        "codex",
        "exec",
        "--json",
        "--sandbox",
        autonomy,
        "--model",
        "gpt-5-codex",
        "-"
      ])
      assert.strictEqual(launch.stdin, "p")
    }
  })

  it("gemini: -p <prompt> with the approval mode of the autonomy; a prompt too long for argv goes on stdin", () => {
    const modes = autonomies.map((autonomy) => {
      const launch = executorFor("gemini").launch({ settings: settings("gemini"), autonomy, prompt: "short" })
      assert.deepStrictEqual(launch.argv.slice(0, 5), ["gemini", "-p", "short", "--output-format", "stream-json"])
      assert.isNull(launch.stdin)
      return launch.argv.at(-1)
    })
    assert.deepStrictEqual(modes, ["plan", "auto_edit", "yolo"])
    const long = "é".repeat(MAX_PROMPT_ARG_BYTES)
    const launch = executorFor("gemini").launch({ settings: settings("gemini"), autonomy: "read-only", prompt: long })
    assert.strictEqual(launch.stdin, long)
    assert.isBelow(launch.argv.join(" ").length, 200)
  })

  it("command: the configured argument vector as is, the prompt on stdin, model and autonomy in the environment", () => {
    const launch = executorFor("command").launch({
      settings: settings("command", { command: ["./agent.sh", "--flag", "$(not a shell)"], enabled: true }),
      autonomy: "read-only",
      prompt: "p"
    })
    assert.deepStrictEqual(launch.argv, ["./agent.sh", "--flag", "$(not a shell)"])
    assert.strictEqual(launch.stdin, "p")
    assert.deepStrictEqual(launch.env, { TASKWRIGHT_MODEL: "default", TASKWRIGHT_AUTONOMY: "read-only" })
  })
})

describe("agent configuration", () => {
  it("built-in defaults: the CLIs enabled, command disabled until it has a command line", () => {
    for (const name of ["claude-code", "codex", "gemini"]) {
      assert.deepStrictEqual(builtInDefaults(name), {
        enabled: true,
        model: "default",
        autonomy: "workspace-write",
        command: null,
        env: {},
        timeout_s: 3600,
        max_log_bytes: 10 * 1024 * 1024,
        credentials: [],
        read_only_paths: []
      })
    }
    assert.isFalse(builtInDefaults("command").enabled)
    assert.strictEqual(settingsProblem("command", settings("command", { enabled: true }))?.field, "command")
    assert.isNull(settingsProblem("command", settings("command", { enabled: true, command: ["x"] })))
    // Any other name is a command agent.
    assert.strictEqual(settingsProblem("my-agent", settings("my-agent", { enabled: true }))?.field, "command")
  })

  it("updates merge; null puts a field back to its default; the file keeps only what differs", () => {
    const a = settings("codex", { model: "m", env: { A: "1" }, timeout_s: 60, command: ["/bin/codex"] })
    assert.deepStrictEqual(
      applyUpdate(a, { env: null, timeout_s: null, command: null }),
      settings("codex", { model: "m" })
    )
    assert.deepStrictEqual(toFileEntry("codex", a), {
      enabled: true,
      model: "m",
      autonomy: "workspace-write",
      command: ["/bin/codex"],
      env: { A: "1" },
      timeout_s: 60
    })
  })

  it("refuses bad updates and files", () => {
    const update = Schema.decodeUnknownEither(AgentUpdate, { onExcessProperty: "error" })
    for (const bad of [
      {},
      { enabled: 1 },
      { autonomy: "all" },
      { command: [] },
      { command: [""] },
      { env: { DATABASE_URL: "x" } },
      { env: { "A-B": "x" } },
      { timeout_s: 0 },
      { max_log_bytes: 10 },
      { other: true }
    ]) {
      assert.isTrue(Either.isLeft(update(bad)), JSON.stringify(bad))
    }
    assert.isTrue(Either.isRight(update({ enabled: false })))
    const file = Schema.decodeUnknownEither(AgentsFile, { onExcessProperty: "error" })
    assert.isTrue(Either.isLeft(file({ "Bad Name": {} })))
    assert.isTrue(Either.isRight(file({ "claude-code": { model: "opus" }, custom: { command: ["x"], enabled: true } })))
  })
})
