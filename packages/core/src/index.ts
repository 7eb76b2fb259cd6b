/**
 * Taskwright's engine: the engine layer and runtime, the services (tasks, projects, labels, runs,
 * reviews, agents, users and keys, authentication, events), the settings, logging, the errors and
 * the domain's schemas.
 *
 * Repositories, row types, SQL helpers, the stores and the auth plumbing are in
 * `@taskwright/core/internal`, for Taskwright's own packages only: not public, changed without notice.
 */
export * from "@taskwright/domain"
export { Agents, type ResolvedAgent } from "./agents/Agents.js"
export { ACCESS_TOKEN_TTL_SECONDS, AccessTokens, AuthConfigError } from "./auth/AccessTokens.js"
export { Auth, type RequestCredentials } from "./auth/Auth.js"
export {
  type AuthSettings,
  authSettingsFromEnv,
  defaultAuthSettings,
  type RateLimitStoreKind
} from "./auth/AuthSettings.js"
export { CREDENTIAL_FRESH_FOR_MS } from "./auth/CredentialCache.js"
export { type Admission, Gate, type GateMode } from "./auth/Gate.js"
export type { RequestInfo } from "./auth/RequestInfo.js"
export { SESSION_COOKIE, SESSION_TTL_SECONDS, Sessions } from "./auth/Sessions.js"
export type { BootstrapResult } from "./Bootstrap.js"
export { type SandboxMode, settingsFromEnv, TaskwrightConfig, type TaskwrightSettings } from "./Config.js"
export { type CoreServices, coreLayer } from "./Core.js"
export * from "./Engine.js"
export { Events, type SubscribeOptions, type Subscription } from "./events/Events.js"
export * from "./Logging.js"
export { Labels } from "./labels/Labels.js"
export { Projects } from "./projects/Projects.js"
export { RateLimiter, type RatePolicy, type RateState } from "./ratelimit/RateLimiter.js"
export { Reviews } from "./runs/Reviews.js"
export { Runs } from "./runs/Runs.js"
export { probeSandbox, type SandboxKind, type SandboxStatus } from "./runs/Sandbox.js"
export { StoreError } from "./store/Store.js"
export { Tasks } from "./tasks/Tasks.js"
export { KeyUsage, USAGE_REPORT_DAYS } from "./users/KeyUsage.js"
export { type NewApiKey, type NewUser, Users } from "./users/Users.js"
