/** The agent configuration service over a real `<data dir>/agents.json`. */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Option } from "effect"
import { Agents } from "../../src/agents/Agents.js"
import { TaskwrightConfig } from "../../src/Config.js"

const withAgents = <A, E>(dataDir: string, self: Effect.Effect<A, E, Agents>) =>
  self.pipe(
    Effect.provide(Agents.Default),
    Effect.provide(
      TaskwrightConfig.layer({ dataDir, databaseUrl: Option.none(), projectsRoot: Option.none(), maxRuns: 4 })
    )
  )

describe("Agents", () => {
  it.live("reads hand edits, keeps the last good configuration over a broken file, and writes with mode 0600", () => {
    const dir = mkdtempSync(join(tmpdir(), "tw-agents-"))
    const file = join(dir, "agents.json")
    return withAgents(
      dir,
      Effect.gen(function* () {
        const agents = yield* Agents
        assert.deepStrictEqual(Object.keys((yield* agents.list).agents).sort(), [
          "claude-code",
          "codex",
          "command",
          "gemini"
        ])

        writeFileSync(
          file,
          JSON.stringify({ codex: { model: "gpt-5-codex", enabled: false }, mine: { command: ["x"], enabled: true } })
        )
        const edited = (yield* agents.list).agents
        assert.deepStrictEqual(edited.codex, {
          enabled: false,
          model: "gpt-5-codex",
          autonomy: "workspace-write",
          timeout_s: 3600
        })
        assert.isTrue(edited.mine?.enabled)
        assert.isTrue(Either.isLeft(yield* Effect.either(agents.resolve("codex"))))
        assert.strictEqual((yield* agents.resolve("mine")).kind, "command")

        // A broken edit is ignored.
        yield* Effect.sleep("20 millis")
        writeFileSync(file, "{ not json")
        assert.deepStrictEqual((yield* agents.list).agents.codex, edited.codex)

        const detail = yield* agents.update("gemini", { model: "gemini-2.5-pro", env: { GEMINI_API_KEY: "secret" } })
        assert.deepStrictEqual(detail.env_keys, ["GEMINI_API_KEY"])
        assert.notInclude(JSON.stringify(detail), "secret")
        assert.strictEqual(statSync(file).mode & 0o777, 0o600)
        const saved = JSON.parse(readFileSync(file, "utf8"))
        assert.deepStrictEqual(saved.gemini, {
          enabled: true,
          model: "gemini-2.5-pro",
          autonomy: "workspace-write",
          env: { GEMINI_API_KEY: "secret" }
        })
        // The write kept the last good configuration, not the broken file.
        assert.deepStrictEqual(saved.codex, { enabled: false, model: "gpt-5-codex", autonomy: "workspace-write" })
      })
    ).pipe(Effect.ensuring(Effect.sync(() => rmSync(dir, { recursive: true, force: true }))))
  })
})
