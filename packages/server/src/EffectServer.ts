/**
 * The Effect-native face: the same contract and the same handlers mounted with
 * `HttpApiBuilder`, for Effect hosts that serve it from their own `@effect/platform` server
 * (or in process with `toWebHandler`). Slower than the fast path, identical in behaviour for
 * every handled request.
 */
import { HttpApiBuilder, HttpApp, HttpServer, type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import {
  Authentication,
  CurrentActor,
  type RequestContext,
  RequiredScope,
  type Requirement,
  TaskwrightApi
} from "@taskwright/api"
import {
  Auth,
  type CoreServices,
  Forbidden,
  hasScope,
  InternalError,
  StoreTag,
  statement,
  Unauthorized
} from "@taskwright/core"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { handlers } from "./handlers/index.js"

const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.map(Auth, (auth) =>
    Authentication.of({
      bearer: (token) =>
        auth
          .authenticate(`Bearer ${Redacted.value(token)}`)
          .pipe(
            Effect.catchTag("StoreError", () =>
              Effect.fail(new Unauthorized({ message: "the credential could not be checked", details: {} }))
            )
          )
    })
  )
)

type LooseInput = {
  readonly path?: unknown
  readonly urlParams?: unknown
  readonly payload?: unknown
  readonly request: HttpServerRequest.HttpServerRequest
}
type LooseHandler = (
  input: Omit<LooseInput, "request"> & { readonly actor: never; readonly request: RequestContext }
) => Effect.Effect<unknown, unknown, CoreServices>
interface LooseHandlers {
  handle(
    name: string,
    handler: (req: LooseInput) => Effect.Effect<unknown, unknown, CoreServices | CurrentActor>
  ): LooseHandlers
}

/**
 * The handlers' view of one request ({@link RequestContext}); headers they add are applied to
 * the response before it is written.
 */
const requestContext = (request: HttpServerRequest.HttpServerRequest) => {
  const added: Array<readonly [string, string]> = []
  const context: RequestContext = {
    method: request.method,
    header: (name) => request.headers[name],
    clientAddress: Option.getOrElse(request.remoteAddress, () => "unknown"),
    secure: false,
    setHeader: (name, value) => {
      added.push([name.toLowerCase(), value])
    }
  }
  const applyHeaders = Effect.suspend(() =>
    added.length === 0
      ? Effect.void
      : HttpApp.appendPreResponseHandler((_, response) =>
          Effect.succeed(added.reduce((r, [name, value]) => HttpServerResponse.setHeader(r, name, value), response))
        )
  )
  return { context, applyHeaders }
}

const scopeCheck = (requirement: Requirement) =>
  requirement === "public"
    ? Effect.map(Effect.serviceOption(CurrentActor), Option.getOrUndefined)
    : Effect.flatMap(CurrentActor, (actor) =>
        requirement === "authenticated" || hasScope(actor, requirement)
          ? Effect.succeed(actor)
          : Effect.fail(
              new Forbidden({
                message: `this credential lacks the ${requirement} scope`,
                details: { required_scope: requirement }
              })
            )
      )

const hideStoreErrors = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.catchIf(
    effect,
    (e): e is E & { readonly _tag: "StoreError" } =>
      typeof e === "object" && e !== null && "_tag" in e && e._tag === "StoreError",
    () => Effect.fail(new InternalError({ message: "internal server error", details: {} }))
  )

/** One group's layer: every endpoint wired to its handler behind the scope of its annotation. */
const groupLive = (name: keyof typeof handlers) => {
  const group = TaskwrightApi.groups[name]
  if (group === undefined) throw new Error(`the contract has no group ${name}`)
  const byEndpoint = handlers[name] as unknown as Record<string, LooseHandler>
  return HttpApiBuilder.group(TaskwrightApi, name, (h) => {
    let out = h as unknown as LooseHandlers
    for (const endpoint of Object.values(group.endpoints)) {
      const requirement = Option.getOrElse(
        Context.getOption(Context.merge(group.annotations, endpoint.annotations), RequiredScope),
        () => "authenticated" as const
      )
      const handler = byEndpoint[endpoint.name]
      if (handler === undefined) throw new Error(`no handler for ${name}.${endpoint.name}`)
      out = out.handle(endpoint.name, (req) =>
        Effect.flatMap(scopeCheck(requirement), (actor) => {
          const { context, applyHeaders } = requestContext(req.request)
          return hideStoreErrors(
            handler({
              path: req.path,
              urlParams: req.urlParams,
              payload: req.payload,
              actor: actor as never,
              request: context
            })
          ).pipe(Effect.tap(() => applyHeaders))
        })
      )
    }
    return out as never
  })
}

const ping = statement<{ one: number }>("health.ping", "SELECT 1 AS one")

const SystemLive = HttpApiBuilder.group(TaskwrightApi, "system", (h) =>
  h.handle("health", () =>
    Effect.flatMap(StoreTag, (store) => store.get(ping)).pipe(
      Effect.as({ status: "ok" as const }),
      Effect.mapError(() => new InternalError({ message: "the store does not answer", details: {} }))
    )
  )
)

/** The whole contract as an `HttpApiBuilder` API; needs the core services. */
export const TaskwrightHttpApiLive = HttpApiBuilder.api(TaskwrightApi).pipe(
  Layer.provide([
    SystemLive,
    groupLive("tasks"),
    groupLive("projects"),
    groupLive("labels"),
    groupLive("auth"),
    groupLive("keys"),
    groupLive("runs"),
    groupLive("reviews"),
    groupLive("agents")
  ]),
  Layer.provide(AuthenticationLive)
)

/** A web-standard `(Request) => Promise<Response>` over the Effect-native face, for hosts that mount it. */
export const makeEffectWebHandler = (core: Layer.Layer<CoreServices>) =>
  HttpApiBuilder.toWebHandler(Layer.mergeAll(TaskwrightHttpApiLive, HttpServer.layerContext).pipe(Layer.provide(core)))
