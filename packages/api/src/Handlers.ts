/**
 * The shape of the server's handlers, derived from the contract: one plain Effect function per
 * endpoint taking the decoded request and the authenticated actor. How a handler is served
 * (the fast node:http path, the Effect-native HttpApiBuilder, in process) is not its concern.
 */
import type { HttpApi, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import type { Actor, RequestInfo, StoreError } from "@taskwright/core"
import type { Effect } from "effect"
import type { TaskwrightApi } from "./Api.js"
import type { Authentication } from "./Security.js"

/**
 * The HTTP exchange as a handler may see it, for the few that need more than the decoded
 * request (login reads the `Origin` and sets the session cookie; the token endpoint sets
 * `Cache-Control`; verify sets `X-User-Id`). Each server implements it per request.
 */
export interface RequestContext extends RequestInfo {
  /** Adds a header to the response; `set-cookie` may be added more than once. */
  setHeader(name: string, value: string): void
}

/**
 * What a handler receives. Fields an endpoint does not declare are `never`. `actor` is the
 * authenticated caller; on endpoints outside the {@link Authentication} middleware (public
 * ones) it is `undefined` unless the request happened to carry a valid credential.
 */
export interface HandlerInput<E extends HttpApiEndpoint.HttpApiEndpoint.Any, A = Actor> {
  readonly actor: A
  readonly path: HttpApiEndpoint.HttpApiEndpoint.PathParsed<E>
  readonly urlParams: HttpApiEndpoint.HttpApiEndpoint.UrlParams<E>
  readonly payload: HttpApiEndpoint.HttpApiEndpoint.Payload<E>
  readonly request: RequestContext
}

export type Handler<E extends HttpApiEndpoint.HttpApiEndpoint.Any, R, A = Actor> = (
  input: HandlerInput<E, A>
) => Effect.Effect<HttpApiEndpoint.HttpApiEndpoint.Success<E>, ApiErrorOf<E> | StoreError, R>

/** `Actor` where the group or the endpoint requires {@link Authentication}, else `Actor | undefined`. */
type ActorOf<G, E> = [Authentication] extends [HttpApiGroup.HttpApiGroup.Middleware<G>]
  ? Actor
  : [Authentication] extends [HttpApiEndpoint.HttpApiEndpoint.Context<E>]
    ? Actor
    : Actor | undefined

type ApiGroups = typeof TaskwrightApi extends HttpApi.HttpApi<infer _Id, infer G, infer _E, infer _R> ? G : never
type ApiErrors = typeof TaskwrightApi extends HttpApi.HttpApi<infer _Id, infer _G, infer E, infer _R> ? E : never
type ApiErrorOf<E extends HttpApiEndpoint.HttpApiEndpoint.Any> = HttpApiEndpoint.HttpApiEndpoint.Error<E> | ApiErrors

/** Handlers for every authenticated group of the contract (the `system` group is served by each server itself). */
export type Handlers<R> = {
  readonly [G in Exclude<ApiGroups, { readonly identifier: "system" }> as HttpApiGroup.HttpApiGroup.Name<G>]: {
    readonly [E in HttpApiGroup.HttpApiGroup.Endpoints<G> as HttpApiEndpoint.HttpApiEndpoint.Name<E>]: Handler<
      E,
      R,
      ActorOf<G, E>
    >
  }
}
