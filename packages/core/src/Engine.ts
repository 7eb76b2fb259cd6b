/**
 * The engine: every core service over the configured store, started and stopped as one unit, the
 * same for every host (the HTTP server, the CLI, an embedding application, the test harness).
 *
 * Start-up, when the layer is built: migrations, the bootstrap admin on an empty store, and
 * recovery of agent runs a previous process left `running`. Shutdown, when its scope closes:
 * running agents stopped with their work committed, key usage flushed, the store closed.
 */
import { Context, Effect, Layer, ManagedRuntime, RuntimeFlags } from "effect"
import type { AuthConfigError } from "./auth/AccessTokens.js"
import { type BootstrapResult, ensureAdmin } from "./Bootstrap.js"
import type { TaskwrightConfig, TaskwrightSettings } from "./Config.js"
import { type CoreServices, coreLayer } from "./Core.js"
import { type LogDestination, loggerLayer } from "./Logging.js"
import { Runs } from "./runs/Runs.js"
import type { StoreError } from "./store/Store.js"

/** What the engine did when it started. */
export interface EngineStarted {
  readonly bootstrap: BootstrapResult
  /** Runs a previous process left `running`, now recorded `failed`. */
  readonly recoveredRuns: number
}

/** The started engine; present once start-up is done. */
export class TaskwrightEngine extends Context.Tag("@taskwright/core/TaskwrightEngine")<
  TaskwrightEngine,
  EngineStarted
>() {}

/** Why the engine could not start: the store is unreachable or its schema could not be brought up to date, or the authentication settings are unsafe. */
export type EngineStartError = StoreError | AuthConfigError

/** Everything a started engine provides. */
export type EngineServices = CoreServices | TaskwrightConfig | TaskwrightEngine

export interface EngineOptions {
  /** Write the bootstrap admin key to `<data dir>/admin-key.txt` (the server does; embedding hosts take it from {@link EngineStarted}). */
  readonly writeAdminKeyFile?: boolean
}

const start = (options: EngineOptions) =>
  Layer.effect(
    TaskwrightEngine,
    Effect.gen(function* () {
      const bootstrap = yield* ensureAdmin({ writeKeyFile: options.writeAdminKeyFile === true }).pipe(
        // Only a store failure can stop the first admin being made on an empty store.
        Effect.catchTags({ BadRequest: Effect.die, Conflict: Effect.die, NotFound: Effect.die })
      )
      // Before the first request: a run still `running` in the store has no process supervising it.
      const recoveredRuns = yield* Effect.flatMap(Runs, (runs) => runs.recover)
      if (recoveredRuns > 0) {
        yield* Effect.logWarning(`marked ${recoveredRuns} run(s) failed that a previous process left running`)
      }
      return { bootstrap, recoveredRuns }
    })
  )

/** The started engine for one set of settings. */
export const engineLayer = (
  settings: TaskwrightSettings,
  options: EngineOptions = {}
): Layer.Layer<EngineServices, EngineStartError> => start(options).pipe(Layer.provideMerge(coreLayer(settings)))

export interface EngineRuntimeOptions extends EngineOptions {
  /** Where the engine's logs go (default: stderr). */
  readonly log?: LogDestination
  /** Spans for every service call; off by default because they cost on the hot path. */
  readonly tracing?: boolean
}

/**
 * A runtime over a started engine, for hosts that are not Effect programs (the server, the
 * embedded API, the harness). Effect's built-in fiber metrics (a counter and a histogram updated
 * for every fiber, so for every request) are off: nothing reads them here.
 */
export const makeEngineRuntime = (settings: TaskwrightSettings, options: EngineRuntimeOptions = {}) =>
  ManagedRuntime.make(
    Layer.mergeAll(
      engineLayer(settings, options),
      Layer.setTracerEnabled(options.tracing === true),
      RuntimeFlags.disableRuntimeMetrics
    ).pipe(Layer.provide(loggerLayer(options.log ?? "stderr")))
  )

/** A runtime made by {@link makeEngineRuntime}. */
export type EngineRuntime = ManagedRuntime.ManagedRuntime<EngineServices, EngineStartError>
