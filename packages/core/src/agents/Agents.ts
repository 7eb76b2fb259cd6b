/**
 * The configured agents: the built-in defaults with `<data dir>/agents.json` on top. The file is
 * read again whenever it changes on disk (an operator may edit it by hand), and written
 * atomically (mode 0600: an agent's `env` may hold API keys) by `PUT /api/agents/:name`.
 */

import { mkdir, readFile, rename, stat, writeFile } from "node:fs/promises"
import { join } from "node:path"
import {
  type AgentDetail,
  type AgentKind,
  type AgentList,
  type AgentSettings,
  AgentsFile,
  AgentUpdate,
  agentKind,
  applyUpdate,
  BadRequest,
  BUILT_IN_AGENTS,
  builtInDefaults,
  decoder,
  InternalError,
  settingsProblem,
  toDetail,
  toFileEntry,
  toView
} from "@taskwright/domain"
import { Effect, Either, ParseResult, Schema } from "effect"
import { TaskwrightConfig } from "../Config.js"
import { fn } from "../domain/Traced.js"

/** An agent ready to run. */
export interface ResolvedAgent {
  readonly name: string
  readonly kind: AgentKind
  readonly settings: AgentSettings
}

const decodeFile = Schema.decodeUnknownEither(Schema.parseJson(AgentsFile), { onExcessProperty: "error" })

type Loaded = { readonly key: string; readonly agents: ReadonlyMap<string, AgentSettings> }

const fileKey = (path: string): Promise<string> =>
  stat(path).then(
    (s) => `${s.mtimeMs}:${s.size}:${s.ino}`,
    () => "absent"
  )

/** The built-in agents with their defaults. */
const defaults = (): Map<string, AgentSettings> => new Map(BUILT_IN_AGENTS.map((name) => [name, builtInDefaults(name)]))

const parse = (text: string, path: string): Either.Either<ReadonlyMap<string, AgentSettings>, string> =>
  Either.map(
    Either.mapLeft(decodeFile(text), (e) => `${path}: ${ParseResult.TreeFormatter.formatErrorSync(e)}`),
    (file) => {
      const agents = defaults()
      for (const [name, entry] of Object.entries(file)) {
        agents.set(name, applyUpdate(agents.get(name) ?? builtInDefaults(name), entry))
      }
      return agents
    }
  )

const decodeUpdate = decoder(AgentUpdate, "body")

export class Agents extends Effect.Service<Agents>()("@taskwright/core/Agents", {
  effect: Effect.gen(function* () {
    const config = yield* TaskwrightConfig
    const path = join(config.dataDir, "agents.json")
    const lock = yield* Effect.makeSemaphore(1)
    let loaded: Loaded = { key: "absent", agents: defaults() }
    let warned = ""

    /** The current configuration: re-read when the file changed; a broken file keeps the last good one. */
    const current = Effect.gen(function* () {
      const key = yield* Effect.promise(() => fileKey(path))
      if (key === loaded.key) return loaded.agents
      if (key === "absent") {
        loaded = { key, agents: defaults() }
        return loaded.agents
      }
      const text = yield* Effect.promise(() => readFile(path, "utf8").catch(() => null))
      const parsed = text === null ? Either.left(`${path}: cannot be read`) : parse(text, path)
      if (Either.isRight(parsed)) {
        loaded = { key, agents: parsed.right }
        return loaded.agents
      }
      if (warned !== key) {
        warned = key
        yield* Effect.logWarning(`ignoring a broken agents.json (keeping the last good one): ${parsed.left}`)
      }
      return loaded.agents
    })

    const write = (agents: ReadonlyMap<string, AgentSettings>) =>
      Effect.tryPromise({
        try: async () => {
          const file: Record<string, unknown> = {}
          for (const [name, settings] of agents) file[name] = toFileEntry(name, settings)
          await mkdir(config.dataDir, { recursive: true })
          const tmp = `${path}.${process.pid}.tmp`
          await writeFile(tmp, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 })
          await rename(tmp, path)
          return fileKey(path)
        },
        catch: (cause) => cause
      }).pipe(
        Effect.tapError((cause) => Effect.logError(`cannot write ${path}: ${String(cause)}`)),
        Effect.mapError(() => new InternalError({ message: "the agent configuration could not be saved", details: {} }))
      )

    return {
      /** `GET /api/agents`. */
      list: Effect.map(current, (agents): AgentList => {
        const out: Record<string, AgentList["agents"][string]> = {}
        for (const [name, settings] of agents) out[name] = toView(settings)
        return { agents: out }
      }),

      /** The agent a run asks for; 400 when it is unknown, disabled or not runnable. */
      resolve: fn("Agents.resolve")(function* (name: string) {
        const settings = (yield* current).get(name)
        if (settings === undefined) return yield* BadRequest.field("agent", `unknown agent ${name}`)
        if (!settings.enabled) return yield* BadRequest.field("agent", `agent ${name} is disabled`)
        const problem = settingsProblem(name, settings, config.dataDir)
        if (problem !== null) return yield* BadRequest.field("agent", problem.message)
        return { name, kind: agentKind(name), settings } satisfies ResolvedAgent
      }),

      /** `PUT /api/agents/:name` (admin): changes one entry, creating a `command` agent for a new name. */
      /** `PUT /api/agents/:name`; `body` as a client sends it ({@link AgentUpdate}). */
      update: fn("Agents.update")(function* (name: string, body: unknown) {
        const update = yield* decodeUpdate(body)
        return yield* lock.withPermits(1)(
          Effect.gen(function* () {
            const agents = new Map(yield* current)
            const next = applyUpdate(agents.get(name) ?? builtInDefaults(name), update)
            const problem = settingsProblem(name, next, config.dataDir)
            if (problem !== null) return yield* BadRequest.field(problem.field, problem.message)
            agents.set(name, next)
            const key = yield* write(agents)
            loaded = { key, agents }
            return toDetail(name, next) satisfies AgentDetail
          })
        )
      })
    }
  })
}) {}
