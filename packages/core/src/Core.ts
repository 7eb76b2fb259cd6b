/**
 * The whole engine as one layer: the store chosen by configuration, migrations applied, and
 * every domain service. Hosts provide {@link TaskwrightConfig}; nothing here hard-wires a database.
 */
import { join, resolve } from "node:path"
import { FetchHttpClient } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { Agents } from "./agents/Agents.js"
import { AccessTokens } from "./auth/AccessTokens.js"
import { Auth } from "./auth/Auth.js"
import { AuthRepo } from "./auth/AuthRepo.js"
import { Gate } from "./auth/Gate.js"
import { Sessions } from "./auth/Sessions.js"
import { TaskwrightConfig, type TaskwrightSettings } from "./Config.js"
import { Events } from "./events/Events.js"
import { EventsRepo } from "./events/EventsRepo.js"
import { GitHub } from "./github/GitHub.js"
import { Labels } from "./labels/Labels.js"
import { LabelsRepo } from "./labels/LabelsRepo.js"
import { Projects } from "./projects/Projects.js"
import { ProjectsRepo } from "./projects/ProjectsRepo.js"
import { RateLimiter, RateLimitStoreLive } from "./ratelimit/RateLimiter.js"
import { Reviews } from "./runs/Reviews.js"
import { Runs } from "./runs/Runs.js"
import { RunsRepo } from "./runs/RunsRepo.js"
import { migrateWhenBehind } from "./store/migrations.js"
import * as SqliteStore from "./store/SqliteStore.js"
import { StoreError } from "./store/Store.js"
import { Tasks } from "./tasks/Tasks.js"
import { TasksRepo } from "./tasks/TasksRepo.js"
import { KeyUsage } from "./users/KeyUsage.js"
import { Users } from "./users/Users.js"
import { UsersRepo } from "./users/UsersRepo.js"

/**
 * The store named by the configuration, as it is (the `migrate` command runs the migrations
 * itself): `postgres://...` is PostgreSQL; `:memory:` an in-memory SQLite database; any other value
 * a SQLite file at that path; none the embedded default, `<data dir>/taskwright.db`.
 */
export const StoreUnmigrated = Layer.unwrapEffect(
  Effect.map(TaskwrightConfig, (config) => {
    const url = Option.getOrUndefined(config.databaseUrl)
    // PostgreSQL's driver and client are loaded only when PostgreSQL is the store: a SQLite service
    // never pays for them (start-up time and memory).
    if (url !== undefined && /^postgres(ql)?:\/\//.test(url)) {
      return Layer.unwrapEffect(
        Effect.promise(() => import("./store/PgStore.js")).pipe(
          Effect.map((Pg) =>
            Pg.layer({
              url,
              ...(config.storeTimeoutMs !== undefined ? { answerTimeoutMs: config.storeTimeoutMs } : {})
            })
          )
        )
      )
    }
    const filename =
      url === undefined
        ? join(config.dataDir, "taskwright.db")
        : url === ":memory:"
          ? url
          : resolve(url.replace(/^file:/, ""))
    return SqliteStore.layer({ filename })
  })
)

/** The store named by the configuration, migrated. */
export const StoreLive = Layer.tap(StoreUnmigrated, (ctx) =>
  migrateWhenBehind.pipe(
    Effect.provide(ctx),
    Effect.mapError((cause) => new StoreError({ kind: "other", message: `migration failed: ${String(cause)}`, cause }))
  )
)

const Repos = Layer.mergeAll(
  TasksRepo.Default,
  ProjectsRepo.Default,
  LabelsRepo.Default,
  UsersRepo.Default,
  AuthRepo.Default,
  RunsRepo.Default,
  EventsRepo.Default
)

/** Authentication (keys, sessions, access tokens), rate limiting and key usage, behind the request {@link Gate}. */
const AuthServices = Gate.Default.pipe(
  Layer.provideMerge(Auth.Default),
  Layer.provideMerge(Layer.mergeAll(Sessions.Default, AccessTokens.Default)),
  Layer.provideMerge(Layer.mergeAll(RateLimiter.Default, KeyUsage.Default)),
  Layer.provideMerge(RateLimitStoreLive)
)

/** GitHub's REST API for pull-request reviews, over the platform's fetch-based HTTP client. */
const GitHubLive = GitHub.Default.pipe(Layer.provide(FetchHttpClient.layer))

/** Agent runs (their supervisor, configuration and reviews, GitHub for pull requests), over the tasks they work on. */
const RunServices = Reviews.Default.pipe(
  Layer.provideMerge(Runs.Default),
  Layer.provideMerge(Layer.mergeAll(Agents.Default, GitHubLive))
)

const Services = RunServices.pipe(
  Layer.provideMerge(Layer.mergeAll(Tasks.Default, Users.Default, Labels.Default)),
  Layer.provideMerge(Projects.Default),
  // Every change appends its events through this one log.
  Layer.provideMerge(Events.Default),
  Layer.provideMerge(AuthServices),
  Layer.provideMerge(Repos)
)

/** Every core service over the configured store. */
export const CoreLive = Services.pipe(Layer.provideMerge(StoreLive))

/** The whole engine for one set of settings, the settings included: what a host runs. */
export const coreLayer = (settings: TaskwrightSettings) =>
  CoreLive.pipe(Layer.provideMerge(TaskwrightConfig.layer(settings)))

/** Everything {@link CoreLive} provides. */
export type CoreServices = Layer.Layer.Success<typeof CoreLive>
