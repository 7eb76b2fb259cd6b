/**
 * Settings of one Taskwright instance. The CLI builds them from flags and `TASKWRIGHT_*`
 * variables; an embedding host passes them directly.
 */
import { resolve } from "node:path"
import { Context, Layer, Option } from "effect"
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
}

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

/** Settings from the environment, with explicit overrides (CLI flags) winning. */
export const settingsFromEnv = (
  env: Record<string, string | undefined>,
  overrides: { readonly dataDir?: string | undefined; readonly databaseUrl?: string | undefined } = {}
): TaskwrightSettings => {
  const maxRuns = Number(env.TASKWRIGHT_MAX_RUNS ?? "4")
  return {
    dataDir: resolve(overrides.dataDir ?? env.TASKWRIGHT_DATA_DIR ?? "./data"),
    databaseUrl: nonEmpty(overrides.databaseUrl ?? env.DATABASE_URL),
    projectsRoot: Option.map(nonEmpty(env.TASKWRIGHT_PROJECTS_ROOT), (p) => resolve(p)),
    maxRuns: Number.isInteger(maxRuns) && maxRuns > 0 ? maxRuns : 4,
    auth: authSettingsFromEnv(env)
  }
}
