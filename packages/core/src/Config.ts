/**
 * Settings of one Taskwright instance. The CLI builds them from flags and `TASKWRIGHT_*`
 * variables; an embedding host passes them directly.
 */
import { resolve } from "node:path"
import { Context, Layer, Option, Redacted } from "effect"
import { type AuthSettings, authSettingsFromEnv } from "./auth/AuthSettings.js"

export interface TaskwrightSettings {
  /** Where the SQLite file, agent config, worktrees and the bootstrap key live. */
  readonly dataDir: string
  /** `postgres://...` selects PostgreSQL; none selects the embedded SQLite store; `:memory:` an in-memory one. */
  readonly databaseUrl: Option.Option<string>
  /** Projects must live under this directory when set. */
  readonly projectsRoot: Option.Option<string>
  /** Concurrent agent runs allowed. */
  readonly maxRuns: number
  /** Authentication and rate limits; the defaults of `AuthSettings` when absent. */
  readonly auth?: AuthSettings
  /** How agent runs are contained; `"auto"` when absent. */
  readonly sandbox?: SandboxMode
  /** Hours the event log keeps events for `?since=` replays (default 168: 7 days). */
  readonly eventRetentionHours?: number
  /**
   * GitHub's REST API, which pull-request reviews read and post to (`TASKWRIGHT_GITHUB_API_URL`;
   * default `https://api.github.com`, a GitHub Enterprise Server's is `https://<host>/api/v3`).
   */
  readonly githubApiUrl?: string
  /** The token sent to that API (`GITHUB_TOKEN`): reads private pull requests, posts reviews. */
  readonly githubToken?: Redacted.Redacted<string>
  /**
   * On PostgreSQL, how long a statement (or a transaction) may hold a connection before its
   * request gets a 503 and the connection is dropped (`TASKWRIGHT_STORE_TIMEOUT_MS`, default 10,000).
   */
  readonly storeTimeoutMs?: number
}

/**
 * `auto`: every agent run is sandboxed, and runs are refused (503) on a host where no sandbox
 * can be made. `off`: agents run as plain child processes, the operator's explicit choice
 * (`TASKWRIGHT_SANDBOX=off`).
 */
export type SandboxMode = "auto" | "off"

export class TaskwrightConfig extends Context.Tag("@taskwright/core/TaskwrightConfig")<
  TaskwrightConfig,
  TaskwrightSettings
>() {
  static layer(settings: TaskwrightSettings): Layer.Layer<TaskwrightConfig> {
    return Layer.succeed(TaskwrightConfig, settings)
  }
}

const nonEmpty = (value: string | undefined): Option.Option<string> =>
  value === undefined || value.trim() === "" ? Option.none() : Option.some(value.trim())

const positiveNumber = (value: string | undefined): number | undefined => {
  const n = Number(value)
  return value !== undefined && value.trim() !== "" && Number.isFinite(n) && n > 0 ? n : undefined
}

/** Settings from the environment, with explicit overrides (CLI flags) winning. */
export const settingsFromEnv = (
  env: Record<string, string | undefined>,
  overrides: { readonly dataDir?: string | undefined; readonly databaseUrl?: string | undefined } = {}
): TaskwrightSettings => {
  const maxRuns = Number(env.TASKWRIGHT_MAX_RUNS ?? "4")
  const githubApiUrl = nonEmpty(env.TASKWRIGHT_GITHUB_API_URL)
  const githubToken = nonEmpty(env.GITHUB_TOKEN)
  const storeTimeoutMs = positiveNumber(env.TASKWRIGHT_STORE_TIMEOUT_MS)
  return {
    dataDir: resolve(overrides.dataDir ?? env.TASKWRIGHT_DATA_DIR ?? "./data"),
    databaseUrl: nonEmpty(overrides.databaseUrl ?? env.DATABASE_URL),
    projectsRoot: Option.map(nonEmpty(env.TASKWRIGHT_PROJECTS_ROOT), (p) => resolve(p)),
    maxRuns: Number.isInteger(maxRuns) && maxRuns > 0 ? maxRuns : 4,
    auth: authSettingsFromEnv(env),
    sandbox: env.TASKWRIGHT_SANDBOX?.trim().toLowerCase() === "off" ? "off" : "auto",
    eventRetentionHours: positiveNumber(env.TASKWRIGHT_EVENT_RETENTION_HOURS) ?? 168,
    ...(storeTimeoutMs !== undefined ? { storeTimeoutMs } : {}),
    ...(Option.isSome(githubApiUrl) ? { githubApiUrl: githubApiUrl.value } : {}),
    ...(Option.isSome(githubToken) ? { githubToken: Redacted.make(githubToken.value) } : {})
  }
}
