/**
 * The shape of the server's handlers, derived from the contract: one plain Effect function per
 * endpoint taking the decoded request and the authenticated actor. How a handler is served
 * (the fast node:http path, the Effect-native HttpApiBuilder, in process) is not its concern.
 */
import type { HttpApi, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import type { Actor, StoreError } from "@taskwright/core"
import type { Effect } from "effect"
import type { TaskwrightApi } from "./Api.js"

/** What a handler receives. Fields an endpoint does not declare are `never`. */
export interface HandlerInput<E extends HttpApiEndpoint.HttpApiEndpoint.Any> {
  readonly actor: Actor
  readonly path: HttpApiEndpoint.HttpApiEndpoint.PathParsed<E>
  readonly urlParams: HttpApiEndpoint.HttpApiEndpoint.UrlParams<E>
  readonly payload: HttpApiEndpoint.HttpApiEndpoint.Payload<E>
}

export type Handler<E extends HttpApiEndpoint.HttpApiEndpoint.Any, R> = (
  input: HandlerInput<E>
) => Effect.Effect<HttpApiEndpoint.HttpApiEndpoint.Success<E>, ApiErrorOf<E> | StoreError, R>

type ApiGroups = typeof TaskwrightApi extends HttpApi.HttpApi<infer _Id, infer G, infer _E, infer _R> ? G : never
type ApiErrors = typeof TaskwrightApi extends HttpApi.HttpApi<infer _Id, infer _G, infer E, infer _R> ? E : never
type ApiErrorOf<E extends HttpApiEndpoint.HttpApiEndpoint.Any> = HttpApiEndpoint.HttpApiEndpoint.Error<E> | ApiErrors

/** Handlers for every authenticated group of the contract (the `system` group is served by each server itself). */
export type Handlers<R> = {
  readonly [G in Exclude<ApiGroups, { readonly identifier: "system" }> as HttpApiGroup.HttpApiGroup.Name<G>]: {
    readonly [E in HttpApiGroup.HttpApiGroup.Endpoints<G> as HttpApiEndpoint.HttpApiEndpoint.Name<E>]: Handler<E, R>
  }
}
