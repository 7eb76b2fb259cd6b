/**
 * `@taskwright/core/internal`: what Taskwright's own packages (the server, the CLI, the harness)
 * share beyond the public API. Not public: repositories, row types, SQL helpers, the stores and the
 * auth plumbing change without notice. A host uses `@taskwright/core`.
 */
export * from "./agents/Executors.js"
export { ACCESS_TOKEN_ALGORITHM, looksLikeJwt, type TokenSource } from "./auth/AccessTokens.js"
export { bearerToken } from "./auth/Auth.js"
export * from "./auth/AuthRepo.js"
export { publicOrigin } from "./auth/AuthSettings.js"
export * from "./auth/Csrf.js"
export * from "./auth/Passwords.js"
export * from "./auth/Policy.js"
export { isSafeMethod } from "./auth/RequestInfo.js"
export * from "./auth/Secrets.js"
export { sessionTokenFromCookie } from "./auth/Sessions.js"
export { ensureAdmin } from "./Bootstrap.js"
export { CoreLive, StoreLive, StoreUnmigrated } from "./Core.js"
export * from "./domain/Traced.js"
export { selectionOf } from "./events/Events.js"
export * from "./labels/LabelsRepo.js"
export * from "./projects/ProjectsRepo.js"
export * from "./ratelimit/ClientAddress.js"
export * as MemoryRateLimitStore from "./ratelimit/MemoryRateLimitStore.js"
export { RateLimitStoreLive } from "./ratelimit/RateLimiter.js"
export * from "./ratelimit/RateLimitStore.js"
export * as SqlRateLimitStore from "./ratelimit/SqlRateLimitStore.js"
export { buildPrompt, COMMIT_AUTHOR, defaultBranch, parseOutput } from "./runs/Runs.js"
export * from "./runs/RunsRepo.js"
export { migrate } from "./store/migrations.js"
export {
  afterCommit,
  collectAfterCommit,
  type Dialect,
  type Direct,
  JsonText,
  type SqlParam,
  type Statement,
  type Store,
  StoreTag,
  statement
} from "./store/Store.js"
export * from "./tasks/TasksRepo.js"
export { toApiKey, toUser } from "./users/Users.js"
export * from "./users/UsersRepo.js"
