/**
 * Agent configuration: the settings of each agent as kept in `<data dir>/agents.json` and
 * changed with `PUT /api/agents/:name`, the built-in agents' defaults, and the API shapes.
 *
 * The built-in agents are `claude-code`, `codex`, `gemini` and `command`. Any other name an
 * admin configures is a further `command` agent (an argument vector of its own).
 */
import { Schema } from "effect"
import { AgentName, Autonomy } from "../runs/Run.js"
import type { AgentKind } from "./AgentStreams.js"

export const BUILT_IN_AGENTS = ["claude-code", "codex", "gemini", "command"] as const

/** Which executor runs an agent: its own for the built-in CLIs, `command` for every other name. */
export const agentKind = (name: string): AgentKind =>
  (BUILT_IN_AGENTS as ReadonlyArray<string>).includes(name) ? (name as AgentKind) : "command"

/** `model` value that leaves the choice to the CLI (no `--model` flag is passed). */
export const DEFAULT_MODEL = "default"
/** Run timeout when none is configured: 60 minutes (DECISIONS). */
export const DEFAULT_TIMEOUT_S = 3600
/** Stored log volume per run when none is configured: 10 MiB (DECISIONS). */
export const DEFAULT_MAX_LOG_BYTES = 10 * 1024 * 1024

/** The complete settings of one agent. */
export interface AgentSettings {
  readonly enabled: boolean
  readonly model: string
  readonly autonomy: Autonomy
  /**
   * Argument vector: the whole command line of a `command` agent; for a built-in CLI the program
   * (and leading arguments) used instead of `claude` / `codex` / `gemini`. Null: the CLI itself.
   */
  readonly command: ReadonlyArray<string> | null
  /** Extra environment of the agent's process. */
  readonly env: Readonly<Record<string, string>>
  readonly timeout_s: number
  readonly max_log_bytes: number
}

/** Defaults of the built-in agents; `command` needs a command line before it can be enabled. */
export const builtInDefaults = (name: string): AgentSettings => ({
  enabled: agentKind(name) !== "command",
  model: DEFAULT_MODEL,
  autonomy: "workspace-write",
  command: null,
  env: {},
  timeout_s: DEFAULT_TIMEOUT_S,
  max_log_bytes: DEFAULT_MAX_LOG_BYTES
})

// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL cannot reach a process
const NO_NUL = /^[^\u0000]*$/

const Argv = Schema.Array(
  Schema.String.pipe(
    Schema.maxLength(100_000),
    Schema.pattern(NO_NUL, { message: () => "arguments may not contain NUL" })
  )
).pipe(
  Schema.minItems(1, { message: () => "command needs at least the program" }),
  Schema.maxItems(200, { message: () => "command has at most 200 arguments" }),
  Schema.filter((argv) => (argv[0] ?? "") !== "" || "the program may not be empty")
)

const EnvKey = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, { message: () => "environment names are letters, digits and _" }),
  Schema.filter((key) => key !== "DATABASE_URL" || "DATABASE_URL never reaches an agent")
)
const Env = Schema.Record({
  key: EnvKey,
  value: Schema.String.pipe(
    Schema.maxLength(100_000),
    Schema.pattern(NO_NUL, { message: () => "values may not contain NUL" })
  )
}).pipe(Schema.filter((env) => Object.keys(env).length <= 100 || "at most 100 variables"))

const Model = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))
const TimeoutS = Schema.Int.pipe(Schema.between(1, 7 * 24 * 3600))
const MaxLogBytes = Schema.Int.pipe(Schema.between(1024, 1024 * 1024 * 1024))

const settingsFields = {
  enabled: Schema.optional(Schema.Boolean),
  model: Schema.optional(Model),
  autonomy: Schema.optional(Autonomy),
  command: Schema.optional(Schema.NullOr(Argv)),
  env: Schema.optional(Schema.NullOr(Env)),
  timeout_s: Schema.optional(Schema.NullOr(TimeoutS)),
  max_log_bytes: Schema.optional(Schema.NullOr(MaxLogBytes))
}

/**
 * `PUT /api/agents/:name`: the fields to change (at least one). `null` puts `command`, `env`,
 * `timeout_s` or `max_log_bytes` back to its default.
 */
export const AgentUpdate = Schema.Struct(settingsFields).pipe(
  Schema.filter((u) => Object.keys(u).length > 0 || "send at least one field to change", {
    identifier: "AgentUpdate"
  })
)
export type AgentUpdate = typeof AgentUpdate.Type

/** `agents.json`: agent name → the fields that differ from the defaults. */
export const AgentsFile = Schema.Record({ key: AgentName, value: Schema.Struct(settingsFields) })
export type AgentsFile = typeof AgentsFile.Type

/** Applies an update (or a file entry) over settings. */
export const applyUpdate = (base: AgentSettings, update: AgentUpdate | AgentsFile[string]): AgentSettings => ({
  enabled: update.enabled ?? base.enabled,
  model: update.model ?? base.model,
  autonomy: update.autonomy ?? base.autonomy,
  command: update.command === undefined ? base.command : update.command,
  env: update.env === undefined ? base.env : (update.env ?? {}),
  timeout_s: update.timeout_s === undefined ? base.timeout_s : (update.timeout_s ?? DEFAULT_TIMEOUT_S),
  max_log_bytes:
    update.max_log_bytes === undefined ? base.max_log_bytes : (update.max_log_bytes ?? DEFAULT_MAX_LOG_BYTES)
})

/** Why settings cannot be used, or null. */
export const settingsProblem = (name: string, settings: AgentSettings): string | null =>
  agentKind(name) === "command" && settings.enabled && settings.command === null
    ? `agent ${name} runs a configured command line: set command before enabling it`
    : null

/** An agent as `GET /api/agents` shows it (never its environment's values). */
export const AgentView = Schema.Struct({
  enabled: Schema.Boolean,
  model: Schema.String,
  autonomy: Autonomy,
  timeout_s: Schema.Number
})
export type AgentView = typeof AgentView.Type

export const AgentList = Schema.Struct({ agents: Schema.Record({ key: Schema.String, value: AgentView }) })
export type AgentList = typeof AgentList.Type

/** The answer to `PUT /api/agents/:name` (admin): the entry with its command and the names of its variables. */
export const AgentDetail = Schema.Struct({
  name: Schema.String,
  ...AgentView.fields,
  command: Schema.NullOr(Schema.Array(Schema.String)),
  env_keys: Schema.Array(Schema.String),
  max_log_bytes: Schema.Number
})
export type AgentDetail = typeof AgentDetail.Type

export const toView = (settings: AgentSettings): AgentView => ({
  enabled: settings.enabled,
  model: settings.model,
  autonomy: settings.autonomy,
  timeout_s: settings.timeout_s
})

export const toDetail = (name: string, settings: AgentSettings): AgentDetail => ({
  name,
  ...toView(settings),
  command: settings.command,
  env_keys: Object.keys(settings.env).sort(),
  max_log_bytes: settings.max_log_bytes
})

/** The file entry for settings: only what differs from the defaults. */
export const toFileEntry = (name: string, settings: AgentSettings): AgentsFile[string] => {
  const defaults = builtInDefaults(name)
  const entry: Record<string, unknown> = {
    enabled: settings.enabled,
    model: settings.model,
    autonomy: settings.autonomy
  }
  if (settings.command !== null) entry.command = settings.command
  if (Object.keys(settings.env).length > 0) entry.env = settings.env
  if (settings.timeout_s !== defaults.timeout_s) entry.timeout_s = settings.timeout_s
  if (settings.max_log_bytes !== defaults.max_log_bytes) entry.max_log_bytes = settings.max_log_bytes
  return entry as AgentsFile[string]
}
