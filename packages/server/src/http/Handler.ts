/**
 * The shape of the handlers, derived from the contract: one plain Effect function per endpoint
 * taking the request and the authenticated actor. Path parameters arrive decoded (they choose the
 * resource); the query and the body arrive as sent, and the service each handler calls decodes
 * them with the contract's schemas, so every face (this server, the in-process API) refuses the
 * same input the same way. How a handler is served is not its concern.
 */
import type { HttpApi, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import type { Authentication, TaskwrightApi } from "@taskwright/api"
import type { Actor, RequestInfo, StoreError } from "@taskwright/core"
import type { Direct, JsonText } from "@taskwright/core/internal"
import type { Context, Effect } from "effect"
import type { HandlerServices } from "../handlers/index.js"

/**
 * The HTTP exchange as a handler may see it, for the few that need more than the decoded
 * request (login reads the `Origin` and sets the session cookie; the token endpoint sets
 * `Cache-Control`; verify sets `X-User-Id`).
 */
export interface RequestContext extends RequestInfo {
  /** Adds a header to the response; `set-cookie` may be added more than once. */
  setHeader(name: string, value: string): void
}

/**
 * What a handler receives. `actor` is the authenticated caller; on public endpoints it is
 * `undefined` unless the request happened to carry a valid credential.
 */
export interface HandlerInput<E extends HttpApiEndpoint.HttpApiEndpoint.Any, A = Actor> {
  readonly actor: A
  readonly path: HttpApiEndpoint.HttpApiEndpoint.PathParsed<E>
  /** The query as sent (`name → value`, or the values of a repeated name): the service decodes it. */
  readonly urlParams: unknown
  /** The JSON body as sent: the service decodes it. */
  readonly payload: unknown
  readonly request: RequestContext
}

/** A handler may fail with the errors its endpoint, its group (`GE`) and the API declare. */
export type Handler<E extends HttpApiEndpoint.HttpApiEndpoint.Any, R, A = Actor, GE = never> = (
  input: HandlerInput<E, A>
) => Effect.Effect<HttpApiEndpoint.HttpApiEndpoint.Success<E>, ApiErrorOf<E> | GE | StoreError, R>

/** `Actor` where the group or the endpoint requires {@link Authentication}, else `Actor | undefined`. */
type ActorOf<G, E> = [Authentication] extends [HttpApiGroup.HttpApiGroup.Middleware<G>]
  ? Actor
  : [Authentication] extends [HttpApiEndpoint.HttpApiEndpoint.Context<E>]
    ? Actor
    : Actor | undefined

type ApiGroups = typeof TaskwrightApi extends HttpApi.HttpApi<infer _Id, infer G, infer _E, infer _R> ? G : never
type ApiErrors = typeof TaskwrightApi extends HttpApi.HttpApi<infer _Id, infer _G, infer E, infer _R> ? E : never
type ApiErrorOf<E extends HttpApiEndpoint.HttpApiEndpoint.Any> = HttpApiEndpoint.HttpApiEndpoint.Error<E> | ApiErrors

/** Handlers for every group of the contract but `system` (served by the server itself). */
export type Handlers<R> = {
  readonly [G in Exclude<ApiGroups, { readonly identifier: "system" }> as HttpApiGroup.HttpApiGroup.Name<G>]: {
    readonly [E in HttpApiGroup.HttpApiGroup.Endpoints<G> as HttpApiEndpoint.HttpApiEndpoint.Name<E>]: Handler<
      E,
      R,
      ActorOf<G, E>,
      HttpApiGroup.HttpApiGroup.Error<G>
    >
  }
}

/** What any handler receives, as the dispatcher hands it over. */
export interface AnyHandlerInput {
  readonly actor: Actor | undefined
  readonly path: unknown
  readonly urlParams: unknown
  readonly payload: unknown
  readonly request: RequestContext
}

/** Any handler, as the dispatcher calls it; with {@link AnswerNow} when it has one. */
export type AnyHandler = ((input: AnyHandlerInput) => Effect.Effect<unknown, unknown, never>) & {
  readonly now?: AnswerNow<AnyHandlerInput, unknown, unknown, HandlerServices>
}

/**
 * A handler's answer given without a fiber, when its service can: at once on the embedded store
 * (an Exit), as one promise on PostgreSQL (see `Direct` in the core). `undefined` when it cannot;
 * the handler itself then runs.
 */
export type AnswerNow<I, A, E, R> = (input: I, services: Context.Context<R>) => Direct<A | JsonText<A>, E> | undefined

/** `handler`, able to answer at once through `now`. */
export const answeringNow = <I, A, E, R>(
  handler: (input: I) => Effect.Effect<A, E, R>,
  now: AnswerNow<I, A, E, R>
): ((input: I) => Effect.Effect<A, E, R>) & { readonly now: AnswerNow<I, A, E, R> } => Object.assign(handler, { now })
