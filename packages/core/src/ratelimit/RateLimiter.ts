/**
 * Fixed-window rate limiting over a pluggable {@link RateLimitStore}. A policy names a budget
 * (`limit` hits per `windowMs`); a subject (a key id, a user id, a client address, an account)
 * spends it. The answer carries what the `X-RateLimit-*` headers and `Retry-After` need.
 */
import { Effect, Layer, Option, Schedule } from "effect"
import { defaultAuthSettings } from "../auth/AuthSettings.js"
import { TaskwrightConfig } from "../Config.js"
import { type StoreError, StoreTag } from "../store/Store.js"
import * as MemoryRateLimitStore from "./MemoryRateLimitStore.js"
import { RateLimitStore } from "./RateLimitStore.js"
import * as SqlRateLimitStore from "./SqlRateLimitStore.js"

/** A budget: at most `limit` hits per fixed window of `windowMs`, counted per subject. */
export interface RatePolicy {
  /** Short, unique: it prefixes the bucket names in the store. */
  readonly name: string
  readonly limit: number
  readonly windowMs: number
}

/** The state of a subject's budget after one hit. */
export interface RateState {
  readonly allowed: boolean
  readonly limit: number
  readonly remaining: number
  /** When the window ends, Unix seconds (`X-RateLimit-Reset`). */
  readonly reset: number
  /** Seconds until the window ends, at least 1 (`Retry-After`). */
  readonly retryAfter: number
}

const stateOf = (policy: RatePolicy, count: number, windowStart: number, nowMs: number): RateState => {
  const end = windowStart + policy.windowMs
  return {
    allowed: count <= policy.limit,
    limit: policy.limit,
    remaining: count >= policy.limit ? 0 : policy.limit - count,
    reset: Math.ceil(end / 1000),
    retryAfter: Math.max(1, Math.ceil((end - nowMs) / 1000))
  }
}

/** Requests per minute per address for the API's documents. */
const DOCUMENTS_PER_MINUTE = 300

export class RateLimiter extends Effect.Service<RateLimiter>()("@taskwright/core/RateLimiter", {
  scoped: Effect.gen(function* () {
    const store = yield* RateLimitStore
    const settings = (yield* TaskwrightConfig).auth ?? defaultAuthSettings

    const policies = {
      /** A valid credential: per API key (its access tokens included) or per user for sessions. */
      authenticated: { name: "c", limit: settings.authenticatedPerMinute, windowMs: 60_000 },
      /** No valid credential: per client address. */
      anonymous: { name: "a", limit: settings.anonymousPerMinute, windowMs: 60_000 },
      /** Login attempts per account, whatever the address. */
      login: { name: "l", limit: settings.loginAttempts, windowMs: settings.loginWindowMinutes * 60_000 },
      /**
       * The API's documents (the OpenAPI document, the reference page and its script), per client
       * address: static, public, and loaded several at a time by one page view, so a budget of their
       * own rather than the anonymous one, which a couple of reloads of the reference would spend.
       */
      documents: { name: "d", limit: Math.max(DOCUMENTS_PER_MINUTE, settings.anonymousPerMinute), windowMs: 60_000 }
    } as const satisfies Record<string, RatePolicy>

    const longest = Math.max(...Object.values(policies).map((p) => p.windowMs))
    // Old windows are forgotten once a minute (a no-op for the in-memory store).
    yield* Effect.forkScoped(
      Effect.suspend(() => store.prune(Date.now() - longest)).pipe(
        Effect.ignore,
        Effect.repeat(Schedule.spaced("1 minute")),
        Effect.delay("1 minute")
      )
    )

    const hitSync = store.hitSync
    /** Spends one hit at once when the store can without I/O; `undefined` (nothing spent) otherwise. */
    const consumeNow = (policy: RatePolicy, subject: string): RateState | undefined => {
      if (hitSync === undefined) return undefined
      const now = Date.now()
      const hit = hitSync(`${policy.name}:${subject}`, now - (now % policy.windowMs), policy.windowMs)
      return hit === undefined ? undefined : stateOf(policy, hit.count, hit.windowStart, now)
    }
    return {
      policies,
      /** True when {@link consumeNow} may answer (the in-memory store always does; the database's while it holds a lease or the budget is spent). */
      synchronous: hitSync !== undefined,
      consumeNow,
      /** Spends one hit of `subject`'s budget under `policy`. */
      consume: (policy: RatePolicy, subject: string): Effect.Effect<RateState, StoreError> => {
        const state = consumeNow(policy, subject)
        if (state !== undefined) return Effect.succeed(state)
        const now = Date.now()
        const windowStart = now - (now % policy.windowMs)
        return Effect.map(store.hit(`${policy.name}:${subject}`, windowStart, policy.windowMs, policy.limit), (hit) =>
          stateOf(policy, hit.count, hit.windowStart, now)
        )
      }
    }
  })
}) {}

/**
 * The counters' store chosen by the settings: `TASKWRIGHT_RATE_LIMIT_STORE=memory|database`,
 * by default the database when it is PostgreSQL (so several processes share one budget) and
 * memory for the embedded SQLite store.
 */
export const RateLimitStoreLive: Layer.Layer<RateLimitStore, never, TaskwrightConfig | StoreTag> = Layer.unwrapEffect(
  Effect.gen(function* () {
    const config = yield* TaskwrightConfig
    const store = yield* StoreTag
    const chosen = Option.getOrElse((config.auth ?? defaultAuthSettings).rateLimitStore, () =>
      store.dialect === "pg" ? ("database" as const) : ("memory" as const)
    )
    return chosen === "database" ? SqlRateLimitStore.layer : MemoryRateLimitStore.layer
  })
)
