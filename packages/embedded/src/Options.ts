/**
 * What a host passes to `createTaskwright`: every setting the server reads from its environment,
 * as plain options, turned here into the engine's settings.
 */
import { dirname, resolve } from "node:path"
import {
  type AgentUpdate,
  type AuthSettings,
  defaultAuthSettings,
  type RateLimitStoreKind,
  type SandboxMode,
  type TaskwrightSettings
} from "@taskwright/core"
import { Option, Redacted } from "effect"

/** One entry a host writes to the engine's log. */
export interface LogEntry {
  readonly level: "trace" | "debug" | "info" | "warn" | "error" | "fatal"
  readonly message: string
  /** The cause's first line, for failures. */
  readonly cause?: string
  readonly annotations: Readonly<Record<string, unknown>>
}

export interface TaskwrightOptions {
  /**
   * `":memory:"`, a SQLite file path, or a `postgres://` URL. Default: the SQLite file
   * `<dataDir>/taskwright.db`.
   */
  readonly database?: string
  /**
   * Where agent configuration (`agents.json`), run worktrees and projects live. Default: for
   * `":memory:"` a fresh temporary directory (removed on `close()`), for a SQLite file its directory,
   * otherwise `./data`.
   */
  readonly dataDir?: string
  /** Non-admin users' projects must live under this directory (default `<dataDir>/projects`). */
  readonly projectsRoot?: string
  /** Agent runs at once (default 4). */
  readonly maxRuns?: number
  /**
   * Hours the event log keeps events for replays (`events.subscribe(..., { since })`); older ones
   * are pruned at start and every 10 minutes (default 168: 7 days; `TASKWRIGHT_EVENT_RETENTION_HOURS`
   * for the server).
   */
  readonly eventRetentionHours?: number
  /**
   * On PostgreSQL, milliseconds a statement (or a transaction) may hold a connection before the call fails as
   * unavailable and its connection is dropped (default 10,000; `TASKWRIGHT_STORE_TIMEOUT_MS` for the
   * server).
   */
  readonly storeTimeoutMs?: number
  /** `"auto"` (default) sandboxes every agent run; `"off"` runs agents as plain child processes. */
  readonly sandbox?: SandboxMode
  /** Agents to configure at start, over `agents.json` (`command`, `enabled`, `model`, `env`, ...). */
  readonly agents?: Readonly<Record<string, typeof AgentUpdate.Encoded>>
  /** The HMAC secret of access tokens (at least 32 bytes); default: generated once, kept in the store. */
  readonly jwtSecret?: string
  /** The service's public URL: decides the session cookie's `Secure` flag and the `Origin` accepted for CSRF. */
  readonly publicUrl?: string
  /** Reverse-proxy hops trusted in `X-Forwarded-For` / `X-Forwarded-Proto` (default 0). */
  readonly trustProxy?: number
  readonly rateLimit?: {
    /** Requests per minute per credential (default 1000). */
    readonly authenticated?: number
    /** Requests per minute per client address without a valid credential (default 10). */
    readonly anonymous?: number
    /** Where the counters live (default: the store on PostgreSQL, memory on SQLite). */
    readonly store?: RateLimitStoreKind
  }
  /** Login attempts per account per window (default 10 per 15 minutes). */
  readonly login?: { readonly attempts?: number; readonly windowMinutes?: number }
  /** Where the engine's logs go: `"stderr"`, `"silent"` (default) or a function of your own. */
  readonly log?: "stderr" | "silent" | ((entry: LogEntry) => void)
  /** Spans for every service call (off by default: they cost on the hot path). */
  readonly tracing?: boolean
  /** GitHub, for agent reviews of pull requests (`reviews.pullRequest`). */
  readonly github?: {
    /** The REST API's base URL (default `https://api.github.com`; GitHub Enterprise Server: `https://<host>/api/v3`). */
    readonly apiUrl?: string
    /** The token sent to it: reads private pull requests and posts reviews. */
    readonly token?: string
  }
}

/** Where the data directory comes from, and whether `close()` removes it. */
export interface DataDirChoice {
  readonly path: string | undefined
  /** True when a temporary directory is to be made (and removed on close). */
  readonly temporary: boolean
}

export const chooseDataDir = (options: TaskwrightOptions): DataDirChoice => {
  if (options.dataDir !== undefined) return { path: resolve(options.dataDir), temporary: false }
  const database = options.database
  if (database === ":memory:") return { path: undefined, temporary: true }
  if (database !== undefined && !/^postgres(ql)?:\/\//.test(database)) {
    return { path: dirname(resolve(database.replace(/^file:/, ""))), temporary: false }
  }
  return { path: resolve("./data"), temporary: false }
}

/** An option that must be a positive finite number when given; a `RangeError` naming it otherwise. */
const positiveOption = (
  options: TaskwrightOptions,
  name: "eventRetentionHours" | "storeTimeoutMs",
  unit: string
): number | undefined => {
  const value = options[name]
  if (value !== undefined && !(Number.isFinite(value) && value > 0)) {
    throw new RangeError(`${name} must be a positive number of ${unit}, not ${value}`)
  }
  return value
}

/** The engine's settings for these options, with the data directory chosen. */
export const toSettings = (options: TaskwrightOptions, dataDir: string): TaskwrightSettings => {
  // Zero or less would prune every event as it is written.
  const retention = positiveOption(options, "eventRetentionHours", "hours")
  const storeTimeoutMs = positiveOption(options, "storeTimeoutMs", "milliseconds")
  const auth: AuthSettings = {
    ...defaultAuthSettings,
    publicUrl: Option.map(Option.fromNullable(options.publicUrl), (u) => u.replace(/\/+$/, "")),
    jwtSecret: Option.fromNullable(options.jwtSecret),
    trustProxy: options.trustProxy ?? defaultAuthSettings.trustProxy,
    authenticatedPerMinute: options.rateLimit?.authenticated ?? defaultAuthSettings.authenticatedPerMinute,
    anonymousPerMinute: options.rateLimit?.anonymous ?? defaultAuthSettings.anonymousPerMinute,
    rateLimitStore: Option.fromNullable(options.rateLimit?.store),
    loginAttempts: options.login?.attempts ?? defaultAuthSettings.loginAttempts,
    loginWindowMinutes: options.login?.windowMinutes ?? defaultAuthSettings.loginWindowMinutes
  }
  return {
    dataDir,
    databaseUrl: Option.fromNullable(options.database),
    projectsRoot: Option.map(Option.fromNullable(options.projectsRoot), (p) => resolve(p)),
    maxRuns: options.maxRuns ?? 4,
    ...(retention === undefined ? {} : { eventRetentionHours: retention }),
    ...(storeTimeoutMs === undefined ? {} : { storeTimeoutMs }),
    auth,
    sandbox: options.sandbox ?? "auto",
    ...(options.github?.apiUrl === undefined ? {} : { githubApiUrl: options.github.apiUrl }),
    ...(options.github?.token === undefined ? {} : { githubToken: Redacted.make(options.github.token) })
  }
}
