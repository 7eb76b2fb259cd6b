/**
 * The contract compiled into routes: one per endpoint, with its scope requirement, how the gate
 * treats credentials, the success status, the path decoder and the handler. Compiling refuses an
 * endpoint without a `RequiredScope` annotation or without a handler, so the contract cannot be
 * served with a hole in it.
 */
import { HttpApi } from "@effect/platform"
import { ForwardAuth, RequiredScope, type Requirement, TaskwrightApi } from "@taskwright/api"
import type { GateMode } from "@taskwright/core"
import { Context, Option, type ParseResult, Schema } from "effect"
import FindMyWay from "find-my-way"
import type { AnyHandler } from "./Handler.js"

export type Decoder = (input: unknown) => import("effect").Either.Either<unknown, ParseResult.ParseError>

export interface Route {
  /** `group.endpoint`, for logs. */
  readonly name: string
  readonly requirement: Requirement
  /** How the gate treats credentials: `public` endpoints `optional`, the proxy check `verify`. */
  readonly mode: GateMode
  /** The proxy check: any method, the body never read. */
  readonly forwardAuth: boolean
  readonly status: number
  /** Path parameters are decoded here; query and body are decoded by the service that takes them. */
  readonly decodePath: Decoder | undefined
  /** The endpoint reads a body. */
  readonly takesBody: boolean
  /** The handler answers a preformatted body of this type (the OpenAPI document, the docs page), not JSON to encode. */
  readonly rawContentType?: string
  readonly handler: AnyHandler | undefined
}

/** What a request's method and path lead to. */
export type RouteMatch =
  | { readonly _tag: "Route"; readonly route: Route; readonly params: Record<string, string | undefined> }
  /** The path exists, but not for this method (405, with these methods in `Allow`). */
  | { readonly _tag: "MethodNotAllowed"; readonly allow: ReadonlyArray<string> }
  /** `OPTIONS` on a path that exists. */
  | { readonly _tag: "Options"; readonly allow: ReadonlyArray<string> }
  | { readonly _tag: "NotFound" }

const METHODS: ReadonlyArray<FindMyWay.HTTPMethod> = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
const FORWARD_AUTH_METHODS: Array<FindMyWay.HTTPMethod> = [...METHODS, "OPTIONS"]

/** A route served beside the contract (the OpenAPI document, the docs page): public, GET and HEAD. */
export interface ExtraRoute {
  readonly path: string
  readonly route: Route
}

/** A public route outside the contract. */
export const publicRoute = (name: string, handler: AnyHandler | undefined): Route => ({
  name,
  requirement: "public",
  mode: "optional",
  forwardAuth: false,
  status: 200,
  decodePath: undefined,
  takesBody: false,
  handler
})

/** An endpoint of the contract as served: its method, path template and route. */
export interface ContractRoute {
  readonly method: string
  readonly path: string
  readonly route: Route
}

/**
 * The contract's endpoints as routes. `handlerFor` names the handler of an endpoint; an endpoint
 * without a `RequiredScope` annotation, or without a handler unless it is public (served by the
 * server itself), is refused.
 */
export const contractRoutes = (
  handlerFor: (group: string, endpoint: string) => AnyHandler | undefined
): ReadonlyArray<ContractRoute> => {
  const out: Array<ContractRoute> = []
  HttpApi.reflect(TaskwrightApi, {
    onGroup: () => {},
    onEndpoint: ({ group, endpoint, mergedAnnotations, successes }) => {
      const requirement = Context.getOption(mergedAnnotations, RequiredScope)
      if (Option.isNone(requirement)) {
        throw new Error(`endpoint ${group.identifier}.${endpoint.name} has no RequiredScope annotation`)
      }
      const handler = handlerFor(group.identifier, endpoint.name)
      if (handler === undefined && requirement.value !== "public") {
        throw new Error(`endpoint ${group.identifier}.${endpoint.name} has no handler`)
      }
      const forwardAuth = Option.isSome(Context.getOption(mergedAnnotations, ForwardAuth))
      out.push({
        method: endpoint.method,
        path: endpoint.path,
        route: {
          name: `${group.identifier}.${endpoint.name}`,
          requirement: requirement.value,
          mode: forwardAuth ? "verify" : requirement.value === "public" ? "optional" : "required",
          forwardAuth,
          status: successes.keys().next().value ?? 200,
          decodePath: Option.match(endpoint.pathSchema, {
            onNone: () => undefined,
            onSome: (s) => Schema.decodeUnknownEither(Schema.make<unknown, unknown, never>(s.ast), { errors: "all" })
          }),
          takesBody: Option.isSome(endpoint.payloadSchema),
          handler
        }
      })
    }
  })
  return out
}

/** Compiles the contract's routes (and `extra` routes) into a router. */
export const compileRoutes = (routes: ReadonlyArray<ContractRoute>, extra: ReadonlyArray<ExtraRoute>) => {
  const router = FindMyWay({ ignoreTrailingSlash: false, caseSensitive: true, maxParamLength: 200 })
  for (const { method, path, route } of routes) {
    // The proxy check answers whatever method the proxy forwards; every GET answers HEAD too.
    const methods: Array<FindMyWay.HTTPMethod> = route.forwardAuth
      ? FORWARD_AUTH_METHODS
      : method === "GET"
        ? ["GET", "HEAD"]
        : [method as FindMyWay.HTTPMethod]
    router.on(methods, path, noop, route)
  }
  for (const { path, route } of extra) router.on(["GET", "HEAD"], path, noop, route)

  const allowed = (pathname: string): ReadonlyArray<string> => METHODS.filter((m) => router.find(m, pathname) !== null)

  return (method: string, pathname: string): RouteMatch => {
    const found = router.find(method as FindMyWay.HTTPMethod, pathname)
    if (found !== null) return { _tag: "Route", route: found.store as Route, params: found.params }
    // Only misses pay for working out which methods the path has.
    const allow = allowed(pathname)
    if (allow.length === 0) return { _tag: "NotFound" }
    const withOptions = [...allow, "OPTIONS"]
    return method === "OPTIONS"
      ? { _tag: "Options", allow: withOptions }
      : { _tag: "MethodNotAllowed", allow: withOptions }
  }
}

const noop = () => {}
