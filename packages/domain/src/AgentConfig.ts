/**
 * Agent configuration: the settings of each agent as kept in `<data dir>/agents.json` and
 * changed with `PUT /api/agents/:name`, the built-in agents' defaults, and the API shapes.
 *
 * The built-in agents are `claude-code`, `codex`, `gemini` and `command`. Any other name an
 * admin configures is a further `command` agent (an argument vector of its own).
 */
import { Schema } from "effect"
import { Count, ShapedText, Text, WholeNumberIn } from "./Bounds.js"
import { AgentName, Autonomy } from "./Run.js"

export const BUILT_IN_AGENTS = ["claude-code", "codex", "gemini", "command"] as const

/** How an agent is launched and its output read: one of the built-in CLIs, or a configured command line. */
export type AgentKind = (typeof BUILT_IN_AGENTS)[number]

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
  /**
   * Absolute paths (files or directories) the sandboxed agent may read and write at their own
   * path: its CLI's login and settings (`~/.claude`, `~/.claude.json`, `~/.codex`, `~/.gemini`).
   * Below the service's `HOME` they land in the run's private home.
   */
  readonly credentials: ReadonlyArray<string>
  /** Absolute paths the sandboxed agent may read at their own path (a CLI installed in a hidden directory). */
  readonly read_only_paths: ReadonlyArray<string>
}

/** Defaults of the built-in agents; `command` needs a command line before it can be enabled. */
export const builtInDefaults = (name: string): AgentSettings => ({
  enabled: agentKind(name) !== "command",
  model: DEFAULT_MODEL,
  autonomy: "workspace-write",
  command: null,
  env: {},
  timeout_s: DEFAULT_TIMEOUT_S,
  max_log_bytes: DEFAULT_MAX_LOG_BYTES,
  credentials: [],
  read_only_paths: []
})

// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL cannot reach a process
const NO_NUL = /^[^\u0000]*$/

const Argv = Schema.Array(
  Schema.String.pipe(
    Schema.maxLength(100_000, { message: () => "an argument must be at most 100,000 characters long" }),
    Schema.pattern(NO_NUL, {
      message: () => "arguments may not contain NUL",
      title: "argument",
      description: "One argument, without NUL."
    })
  )
).pipe(
  Schema.minItems(1, { message: () => "command needs at least the program" }),
  Schema.maxItems(200, { message: () => "command has at most 200 arguments" }),
  Schema.filter((argv) => (argv[0] ?? "") !== "" || "the program may not be empty", {
    title: "command",
    jsonSchema: {},
    description:
      "The argument vector: for a command agent its whole command line, for a built-in CLI the program used instead of claude, codex or gemini."
  })
)

const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/
const EnvKey = Schema.String.pipe(
  Schema.pattern(ENV_KEY, {
    message: () => "environment names are 1 to 128 letters, digits and _",
    description: "A variable's name: letters, digits and _, not starting with a digit.",
    jsonSchema: { pattern: ENV_KEY.source, maxLength: 128 }
  }),
  Schema.filter((key) => key !== "DATABASE_URL" || "DATABASE_URL never reaches an agent")
)
const Env = Schema.Record({
  key: EnvKey,
  value: Schema.String.pipe(
    Schema.maxLength(100_000, { message: () => "a value must be at most 100,000 characters long" }),
    Schema.pattern(NO_NUL, {
      message: () => "values may not contain NUL",
      title: "value",
      description: "The variable's value, without NUL."
    })
  )
}).pipe(
  Schema.filter((env) => Object.keys(env).length <= 100 || "at most 100 variables", {
    description: "Extra environment variables of the agent's process.",
    jsonSchema: { maxProperties: 100 }
  })
)

/** An absolute, normalised path other than `/`: no `.` or `..` component, no `//`, no trailing `/`. */
const HostPath = Schema.String.pipe(
  Schema.maxLength(4096, { message: () => "a path must be at most 4096 characters long" }),
  Schema.filter(
    (path) => {
      if (!path.startsWith("/")) return "paths must be absolute"
      if (path === "/") return "the whole filesystem cannot be given to an agent"
      if (path.endsWith("/") || path.includes("//")) return "paths must be normalised (no // and no trailing /)"
      if (path.split("/").some((part) => part === "." || part === "..")) return "paths may not contain . or .."
      if (path.includes("\u0000") || path.includes("\n")) return "paths may not contain NUL or newlines"
      return true
    },
    { title: "path", description: "An absolute, normalised path on the host.", jsonSchema: { pattern: "^/" } }
  )
)
const HostPaths = Schema.Array(HostPath).pipe(
  Schema.maxItems(32, { message: () => "at most 32 paths" }),
  Schema.filter((paths) => new Set(paths).size === paths.length || "paths are listed once each", {
    title: "paths",
    jsonSchema: {},
    description: "Absolute paths on the host, each listed once."
  })
)

const modelMessage = () => "model must be 1 to 200 characters long"
const Model = Schema.String.pipe(
  Schema.minLength(1, { message: modelMessage }),
  Schema.maxLength(200, {
    message: modelMessage,
    title: "model",
    description: "The model the CLI is asked for; default leaves the choice to the CLI."
  })
)
const TimeoutS = WholeNumberIn("timeout_s", 1, 7 * 24 * 3600, "Seconds a run may take before it is stopped.")
const MaxLogBytes = WholeNumberIn(
  "max_log_bytes",
  1024,
  1024 * 1024 * 1024,
  "Bytes of log kept per run; past it, a single truncation notice."
)

const settingsFields = {
  enabled: Schema.optional(Schema.Boolean),
  model: Schema.optional(Model),
  autonomy: Schema.optional(Autonomy),
  command: Schema.optional(Schema.NullOr(Argv)),
  env: Schema.optional(Schema.NullOr(Env)),
  timeout_s: Schema.optional(Schema.NullOr(TimeoutS)),
  max_log_bytes: Schema.optional(Schema.NullOr(MaxLogBytes)),
  credentials: Schema.optional(Schema.NullOr(HostPaths)),
  read_only_paths: Schema.optional(Schema.NullOr(HostPaths))
}

/**
 * `PUT /api/agents/:name`: the fields to change (at least one). `null` puts `command`, `env`,
 * `timeout_s`, `max_log_bytes`, `credentials` or `read_only_paths` back to its default.
 */
export const AgentUpdate = Schema.Struct(settingsFields).pipe(
  Schema.filter((u) => Object.keys(u).length > 0 || "send at least one field to change", {
    identifier: "AgentUpdate",
    description: "The settings to change, at least one; null puts a setting back to its default.",
    jsonSchema: { minProperties: 1 },
    examples: [{ enabled: true, model: "default", autonomy: "workspace-write", timeout_s: 1800 }]
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
    update.max_log_bytes === undefined ? base.max_log_bytes : (update.max_log_bytes ?? DEFAULT_MAX_LOG_BYTES),
  credentials: update.credentials === undefined ? base.credentials : (update.credentials ?? []),
  read_only_paths: update.read_only_paths === undefined ? base.read_only_paths : (update.read_only_paths ?? [])
})

/** True when one path is the other or inside it. */
const overlapping = (a: string, b: string): boolean => a === b || a.startsWith(`${b}/`) || b.startsWith(`${a}/`)

/**
 * Why settings cannot be used (and the field to blame), or null. `dataDir`, when given: no path
 * shown to the sandboxed agent may be the data directory, inside it or around it (its keys,
 * store and other runs' worktrees).
 */
export const settingsProblem = (
  name: string,
  settings: AgentSettings,
  dataDir?: string
): { readonly field: string; readonly message: string } | null => {
  if (agentKind(name) === "command" && settings.enabled && settings.command === null) {
    return { field: "command", message: `agent ${name} runs a configured command line: set command before enabling it` }
  }
  if (dataDir === undefined) return null
  for (const field of ["credentials", "read_only_paths"] as const) {
    const clash = settings[field].find((path) => overlapping(path, dataDir))
    if (clash !== undefined) {
      return { field, message: `${clash} overlaps the service's data directory, which agents never see` }
    }
  }
  return null
}

/** An agent as `GET /api/agents` shows it (never its environment's values). */
const AGENT_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/
const paths = (description: string) =>
  Schema.Array(Text(4096)).annotations({ description, jsonSchema: { maxItems: 32 } })

export const AgentView = Schema.Struct({
  enabled: Schema.Boolean,
  model: Text(200, "The model the CLI is asked for; default leaves the choice to the CLI."),
  autonomy: Autonomy,
  timeout_s: Count("Seconds a run may take before it is stopped.", 1, 7 * 24 * 3600)
})
export type AgentView = typeof AgentView.Type

export const AgentList = Schema.Struct({
  agents: Schema.Record({ key: ShapedText(AGENT_NAME, 64, "An agent's name."), value: AgentView }).annotations({
    description: "Each agent by name: whether it can run, its model, autonomy and timeout."
  })
}).annotations({
  description: "The configured agents.",
  examples: [
    {
      agents: {
        "claude-code": { enabled: true, model: "default", autonomy: "workspace-write", timeout_s: 3600 },
        command: { enabled: false, model: "default", autonomy: "workspace-write", timeout_s: 3600 }
      }
    }
  ]
})
export type AgentList = typeof AgentList.Type

/** The answer to `PUT /api/agents/:name` (admin): the entry with its command and the names of its variables. */
export const AgentDetail = Schema.Struct({
  name: ShapedText(AGENT_NAME, 64, "The agent's name."),
  ...AgentView.fields,
  command: Schema.NullOr(
    Schema.Array(Text(100_000)).annotations({
      description: "The configured argument vector, or null for the CLI itself.",
      jsonSchema: { maxItems: 200 }
    })
  ),
  env_keys: Schema.Array(Text(128)).annotations({
    description: "The names of the agent's extra variables (their values are never shown).",
    jsonSchema: { maxItems: 100 }
  }),
  max_log_bytes: Count("Bytes of log kept per run.", 1024, 1024 * 1024 * 1024),
  credentials: paths("Paths the sandboxed agent may read and write (its CLI's login and settings)."),
  read_only_paths: paths("Paths the sandboxed agent may read.")
}).annotations({
  description: "One agent's settings, without the values of its variables.",
  examples: [
    {
      name: "claude-code",
      enabled: true,
      model: "default",
      autonomy: "workspace-write",
      timeout_s: 1800,
      command: null,
      env_keys: [],
      max_log_bytes: 10485760,
      credentials: ["/home/taskwright/.claude"],
      read_only_paths: []
    }
  ]
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
  max_log_bytes: settings.max_log_bytes,
  credentials: settings.credentials,
  read_only_paths: settings.read_only_paths
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
  if (settings.credentials.length > 0) entry.credentials = settings.credentials
  if (settings.read_only_paths.length > 0) entry.read_only_paths = settings.read_only_paths
  return entry as AgentsFile[string]
}
