/**
 * The front door of every request, in one place so that no endpoint can skip it: authenticate
 * the credential (Bearer API key or access token, else the session cookie), spend the right
 * rate-limit budget, check the `Origin` of cookie-authenticated state changes, and count the
 * request in its API key's usage. Servers call {@link Gate.admit} once per request and turn the
 * answer into headers and, when refused, the error.
 *
 * Budgets (DECISIONS, "Rate limits"): a valid credential spends its own (an API key and the
 * access tokens made from it share one; a session spends its user's); anything else spends the
 * client address's anonymous budget, a credential that fails to authenticate included.
 */
import { type Actor, Forbidden, RateLimited, type Unauthorized } from "@taskwright/domain"
import { Effect } from "effect"
import { TaskwrightConfig } from "../Config.js"
import { addressSubject } from "../ratelimit/ClientAddress.js"
import { type RateLimiter, RateLimiter as RateLimiterTag, type RateState } from "../ratelimit/RateLimiter.js"
import type { StoreError } from "../store/Store.js"
import { KeyUsage } from "../users/KeyUsage.js"
import { Auth } from "./Auth.js"
import { defaultAuthSettings } from "./AuthSettings.js"
import { sameOrigin } from "./Csrf.js"
import { isSafeMethod, type RequestInfo } from "./RequestInfo.js"

/**
 * How an endpoint treats credentials:
 * - `required`: no valid credential is 401; over budget is 429.
 * - `optional` (public endpoints): a missing or invalid credential is ignored (the request
 *   spends the anonymous budget); over budget is 429.
 * - `verify` (`/api/auth/verify`, for reverse proxies): like `required`, but never 429, which
 *   proxies turn into 500: a caller without a valid credential over budget gets 401, a valid
 *   credential over its budget 403 (with `Retry-After`).
 * - `document` (the OpenAPI document, the reference page and its script): no credential is looked
 *   at; the client address's own budget for documents is spent.
 */
export type GateMode = "required" | "optional" | "verify" | "document"

/** The outcome: who is calling (if anyone), the budget's state, and the error when refused. */
export interface Admission {
  readonly actor: Actor | undefined
  readonly rate: RateState
  readonly refusal: Unauthorized | Forbidden | RateLimited | undefined
}

/**
 * Makes the refusals of spent budgets, remembering the last one of each kind: a client flooding
 * past its budget gets the same error object for as long as its words stay the same (a second:
 * `retry_after` counts down). Making one, its fields checked and its stack captured, cost more
 * than the rest of the refusal.
 */
const refusals = () => {
  const last = new Map<string, { readonly limit: number; readonly retryAfter: number; readonly error: RateLimited }>()
  return (rate: RateState, who: string): RateLimited => {
    const known = last.get(who)
    if (known !== undefined && known.limit === rate.limit && known.retryAfter === rate.retryAfter) return known.error
    const error = new RateLimited({
      message: `rate limit exceeded: ${rate.limit} requests per minute ${who}; retry after ${rate.retryAfter} s`,
      details: { limit: rate.limit, retry_after: rate.retryAfter }
    })
    last.set(who, { limit: rate.limit, retryAfter: rate.retryAfter, error })
    return error
  }
}

const csrf = new Forbidden({
  message: "cross-site request refused: a cookie-authenticated change must come from this service's origin",
  details: { reason: "csrf" }
})

export class Gate extends Effect.Service<Gate>()("@taskwright/core/Gate", {
  effect: Effect.gen(function* () {
    const auth = yield* Auth
    const limiter: RateLimiter = yield* RateLimiterTag
    const usage = yield* KeyUsage
    const settings = (yield* TaskwrightConfig).auth ?? defaultAuthSettings
    const { authenticated, anonymous, documents } = limiter.policies
    const rateLimited = refusals()

    const asDocument = (rate: RateState): Admission => ({
      actor: undefined,
      rate,
      refusal: rate.allowed ? undefined : rateLimited(rate, "for the API's documents, per client address")
    })

    const asAnonymous = (request: RequestInfo, mode: GateMode, error: Unauthorized) =>
      Effect.map(
        limiter.consume(anonymous, addressSubject(request.clientAddress)),
        (rate): Admission => ({
          actor: undefined,
          rate,
          refusal: rate.allowed
            ? mode === "optional"
              ? undefined
              : error
            : mode === "verify"
              ? error
              : rateLimited(rate, "without a valid credential, per client address")
        })
      )

    /** A valid credential's budget: per API key (its access tokens included), else per user. */
    const subjectOf = (actor: Actor) =>
      actor.credential.keyId === undefined ? `u:${actor.userId}` : `k:${actor.credential.keyId}`

    /** Counts the request in its key's usage and decides, once the budget is spent. */
    const admitActor = (request: RequestInfo, mode: GateMode, actor: Actor, rate: RateState): Admission => {
      if (actor.credential.keyId !== undefined) usage.record(actor.credential.keyId, request.clientAddress)
      if (!rate.allowed) {
        const error = rateLimited(rate, "per credential")
        return {
          actor,
          rate,
          refusal: mode === "verify" ? new Forbidden({ message: error.message, details: error.details }) : error
        }
      }
      if (
        actor.credential.kind === "session" &&
        mode === "required" &&
        !isSafeMethod(request.method) &&
        !sameOrigin(settings, request, true)
      ) {
        return { actor, rate, refusal: csrf }
      }
      return { actor, rate, refusal: undefined }
    }

    const asActor = (request: RequestInfo, mode: GateMode, actor: Actor) =>
      Effect.map(limiter.consume(authenticated, subjectOf(actor)), (rate) => admitActor(request, mode, actor, rate))

    return {
      /**
       * {@link admit} answered synchronously when everything it needs is in memory: a remembered
       * API key or session and the in-memory limiter, the common case on the embedded store. `undefined`
       * (nothing spent, nothing counted) otherwise: then call {@link admit}.
       */
      admitNow: (request: RequestInfo, mode: GateMode): Admission | undefined => {
        if (!limiter.synchronous) return undefined
        if (mode === "document") {
          const rate = limiter.consumeNow(documents, addressSubject(request.clientAddress))
          return rate === undefined ? undefined : asDocument(rate)
        }
        const actor = auth.authenticateNow({
          authorization: request.header("authorization"),
          cookie: request.header("cookie")
        })
        if (actor === undefined) return undefined
        const rate = limiter.consumeNow(authenticated, subjectOf(actor))
        return rate === undefined ? undefined : admitActor(request, mode, actor, rate)
      },
      /** Authenticates and rate-limits one request. */
      admit: (request: RequestInfo, mode: GateMode): Effect.Effect<Admission, StoreError> =>
        mode === "document"
          ? Effect.map(limiter.consume(documents, addressSubject(request.clientAddress)), asDocument)
          : auth
              .authenticateRequest({ authorization: request.header("authorization"), cookie: request.header("cookie") })
              .pipe(
                Effect.matchEffect({
                  onFailure: (error) =>
                    error._tag === "Unauthorized" ? asAnonymous(request, mode, error) : Effect.fail(error),
                  onSuccess: (actor) => asActor(request, mode, actor)
                })
              )
    }
  })
}) {}
