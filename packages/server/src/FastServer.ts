/**
 * The fast serving path: the contract's endpoints on bare `node:http`, routed by `find-my-way`,
 * with every request schema compiled once per endpoint and handlers run on one prebuilt
 * runtime (`Runtime.runCallback`). Responses are written with `JSON.stringify` straight to the
 * socket. Measured against the alternatives in this package's README.
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import type { TLSSocket } from "node:tls"
import { HttpApi } from "@effect/platform"
import {
  errorBody,
  ForwardAuth,
  type RequestContext,
  RequiredScope,
  type Requirement,
  TaskwrightApi
} from "@taskwright/api"
import {
  type Actor,
  type Admission,
  type Auth,
  BadRequest,
  clientAddress,
  defaultAuthSettings,
  errorWire,
  Forbidden,
  Gate,
  type GateMode,
  hasScope,
  NotFound,
  type RateState,
  redactCredentials,
  type StoreError,
  type StoreTag,
  TaskwrightConfig,
  Unauthorized
} from "@taskwright/core"
import { Cause, Context, Effect, Either, Exit, Option, ParseResult, Runtime, Schema, type SchemaAST } from "effect"
import FindMyWay from "find-my-way"
import { type HandlerServices, handlers } from "./handlers/index.js"

/** Bodies above this are refused with 413 (DECISIONS). */
export const MAX_BODY_BYTES = 1024 * 1024

const FORWARD_AUTH_METHODS: Array<FindMyWay.HTTPMethod> = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

const unauthenticated = new Unauthorized({ message: "authentication required", details: {} })

type Decoder = (input: unknown) => Either.Either<unknown, ParseResult.ParseError>
type AnyHandler = (input: {
  readonly actor: Actor | undefined
  readonly path: unknown
  readonly urlParams: unknown
  readonly payload: unknown
  readonly request: RequestContext
}) => Effect.Effect<unknown, unknown, HandlerServices>

interface Route {
  readonly name: string
  readonly requirement: Requirement
  /** How the gate treats credentials: `public` endpoints `optional`, the proxy check `verify`. */
  readonly mode: GateMode
  /** The proxy check: any method, the body never read. */
  readonly forwardAuth: boolean
  /** The handler answers a preformatted body of this content type (the OpenAPI document, the docs page). */
  readonly rawContentType?: string
  readonly status: number
  readonly decodePath: Decoder | undefined
  readonly decodeQuery: Decoder | undefined
  readonly decodePayload: Decoder | undefined
  readonly handler: AnyHandler | undefined
}

export type ServerServices = HandlerServices | Auth | Gate | TaskwrightConfig | StoreTag

/**
 * One request as handlers and the gate see it ({@link RequestContext}): headers, the client's
 * address (from `X-Forwarded-For` only behind a trusted proxy), whether it came over HTTPS, and
 * the headers a handler adds to the answer.
 */
class Exchange implements RequestContext {
  private address: string | undefined
  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly pathname: string,
    private readonly trustedHops: number
  ) {}
  get method(): string {
    return this.req.method ?? "GET"
  }
  header(name: string): string | undefined {
    const value = this.req.headers[name]
    return Array.isArray(value) ? value[0] : value
  }
  get clientAddress(): string {
    this.address ??= clientAddress(
      this.req.socket.remoteAddress,
      this.trustedHops > 0 ? this.header("x-forwarded-for") : undefined,
      this.trustedHops
    )
    return this.address
  }
  get secure(): boolean {
    if ((this.req.socket as TLSSocket).encrypted === true) return true
    if (this.trustedHops === 0) return false
    return this.header("x-forwarded-proto")?.split(",")[0]?.trim().toLowerCase() === "https"
  }
  setHeader(name: string, value: string): void {
    if (name.toLowerCase() === "set-cookie") {
      const prev = this.res.getHeader("set-cookie")
      this.res.setHeader(
        "set-cookie",
        prev === undefined ? [value] : [...(Array.isArray(prev) ? prev : [String(prev)]), value]
      )
    } else {
      this.res.setHeader(name, value)
    }
  }
}

/**
 * One answer in the making: where it goes and, once the gate has spoken, the budget's state.
 * Headers are sent in one flat array, which Node writes without the per-header bookkeeping of
 * `setHeader`: `X-RateLimit-*` on every gated answer, `Retry-After` when the budget is spent.
 */
interface Reply {
  readonly res: ServerResponse
  readonly route: Route
  rate: RateState | undefined
}

const JSON_TYPE = "application/json; charset=utf-8"

// One message per field: a union such as "value or absent" reports both branches, and the
// first (the refinement that failed) is the one a user can act on.
const fieldErrors = (error: ParseResult.ParseError, where: string) => {
  const seen = new Set<string>()
  const out: Array<{ path: string; message: string }> = []
  for (const issue of ParseResult.ArrayFormatter.formatErrorSync(error)) {
    const path = issue.path.length === 0 ? where : issue.path.map(String).join(".")
    if (seen.has(path)) continue
    seen.add(path)
    out.push({ path, message: issue.message })
  }
  return out
}

const invalid = (error: ParseResult.ParseError, where: string): BadRequest => {
  const fields = fieldErrors(error, where)
  const first = fields[0]
  return new BadRequest({
    message: first === undefined ? `invalid ${where}` : `invalid ${where}: ${first.path}: ${first.message}`,
    details: { fields }
  })
}

const lookupHandler = (group: string, endpoint: string): AnyHandler | undefined => {
  const byGroup = (handlers as unknown as Record<string, Record<string, AnyHandler> | undefined>)[group]
  return byGroup?.[endpoint]
}

/** A route outside the contract that anyone may call (documents, the 404 answer). */
const publicRoute = (name: string): Route => ({
  name,
  requirement: "public",
  mode: "optional",
  forwardAuth: false,
  status: 200,
  decodePath: undefined,
  decodeQuery: undefined,
  decodePayload: undefined,
  handler: undefined
})

/** Compiles the contract into routes. Fails loudly if an endpoint has no scope annotation. */
const compileRoutes = () => {
  const routes: Array<{ method: string; path: string; route: Route }> = []
  HttpApi.reflect(TaskwrightApi, {
    onGroup: () => {},
    onEndpoint: ({ group, endpoint, mergedAnnotations, successes }) => {
      const requirement = Context.getOption(mergedAnnotations, RequiredScope)
      if (Option.isNone(requirement)) {
        throw new Error(`endpoint ${group.identifier}.${endpoint.name} has no RequiredScope annotation`)
      }
      const handler = lookupHandler(group.identifier, endpoint.name)
      if (handler === undefined && requirement.value !== "public") {
        throw new Error(`endpoint ${group.identifier}.${endpoint.name} has no handler`)
      }
      const forwardAuth = Option.isSome(Context.getOption(mergedAnnotations, ForwardAuth))
      const compile = (schema: Option.Option<{ readonly ast: SchemaAST.AST }>, strict: boolean): Decoder | undefined =>
        Option.match(schema, {
          onNone: () => undefined,
          onSome: (s) =>
            Schema.decodeUnknownEither(Schema.make<unknown, unknown, never>(s.ast), {
              errors: "all",
              onExcessProperty: strict ? "error" : "ignore"
            })
        })
      routes.push({
        method: endpoint.method,
        path: endpoint.path,
        route: {
          name: `${group.identifier}.${endpoint.name}`,
          requirement: requirement.value,
          mode: forwardAuth ? "verify" : requirement.value === "public" ? "optional" : "required",
          forwardAuth,
          status: successes.keys().next().value ?? 200,
          decodePath: compile(endpoint.pathSchema, false),
          decodeQuery: compile(endpoint.urlParamsSchema, false),
          decodePayload: compile(endpoint.payloadSchema, true),
          handler
        }
      })
    }
  })
  return routes
}

export interface FastServerOptions {
  /** Extra routes answered before the contract's (OpenAPI document, docs page). */
  readonly staticRoutes: ReadonlyArray<{
    readonly path: string
    readonly contentType: string
    /** The body, or how to make it on the first request (kept from then on). */
    readonly body: string | (() => string)
  }>
  readonly version: string
  /** Answers `/api/health` once the store answers. */
  readonly health: Effect.Effect<boolean, never, ServerServices>
  readonly onDefect: (route: string, cause: Cause.Cause<unknown>) => void
}

type Body =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly error: BadRequest }
  | undefined

/** Builds the `node:http` request listener over a prebuilt runtime. */
export const makeRequestListener = (runtime: Runtime.Runtime<ServerServices>, options: FastServerOptions) => {
  const router = FindMyWay({ ignoreTrailingSlash: false, caseSensitive: true, maxParamLength: 200 })
  for (const { method, path, route } of compileRoutes()) {
    // The proxy check answers whatever method the proxy forwards.
    const methods = route.forwardAuth ? FORWARD_AUTH_METHODS : (method as FindMyWay.HTTPMethod)
    router.on(methods, path, () => {}, route)
  }
  // Documents are public routes like any other: gated, so counted in the caller's budget.
  const statics = new Map(
    options.staticRoutes.map((r): [string, Route] => {
      const make = r.body
      let body: string | undefined
      return [
        r.path,
        {
          ...publicRoute(`static ${r.path}`),
          rawContentType: r.contentType,
          handler: () => Effect.sync(() => (body ??= typeof make === "string" ? make : make()))
        }
      ]
    })
  )
  const notFound: Route = {
    ...publicRoute("not found"),
    handler: ({ request }) =>
      Effect.fail(
        new NotFound({ message: `no route for ${request.method} ${(request as Exchange).pathname}`, details: {} })
      )
  }
  const runCallback = Runtime.runCallback(runtime)
  const gate = Context.get(runtime.context, Gate)
  const trustedHops = (Context.get(runtime.context, TaskwrightConfig).auth ?? defaultAuthSettings).trustProxy

  const send = (
    res: ServerResponse,
    rate: RateState | undefined,
    status: number,
    body: string,
    contentType = JSON_TYPE
  ) => {
    const headers: Array<string> = [
      "x-taskwright-version",
      options.version,
      "content-type",
      contentType,
      "content-length",
      String(Buffer.byteLength(body))
    ]
    if (rate !== undefined) {
      headers.push(
        "x-ratelimit-limit",
        String(rate.limit),
        "x-ratelimit-remaining",
        String(rate.remaining),
        "x-ratelimit-reset",
        String(rate.reset)
      )
      if (!rate.allowed && !res.hasHeader("retry-after")) headers.push("retry-after", String(rate.retryAfter))
    }
    res.writeHead(status, headers)
    res.end(body)
  }

  const sendError = (
    res: ServerResponse,
    rate: RateState | undefined,
    error: {
      readonly _tag: keyof typeof errorWire
      readonly message: string
      readonly details: Record<string, unknown>
    }
  ) => {
    const status = errorWire[error._tag].status
    if (status === 401) res.setHeader("www-authenticate", 'Bearer realm="taskwright"')
    if (status === 429 && typeof error.details.retry_after === "number" && !res.hasHeader("retry-after")) {
      res.setHeader("retry-after", error.details.retry_after)
    }
    // An error may quote what the client sent (a path, a rejected value): never a credential.
    send(res, rate, status, redactCredentials(JSON.stringify(errorBody(error))))
  }

  const internal = { _tag: "InternalError" as const, message: "internal server error", details: {} }

  const isApiError = (
    u: unknown
  ): u is {
    readonly _tag: keyof typeof errorWire
    readonly message: string
    readonly details: Record<string, unknown>
  } => typeof u === "object" && u !== null && "_tag" in u && typeof u._tag === "string" && u._tag in errorWire

  const finish = (reply: Reply) => (exit: Exit.Exit<unknown, unknown>) => {
    const { res, route, rate } = reply
    if (Exit.isSuccess(exit)) {
      return route.rawContentType === undefined
        ? send(res, rate, route.status, JSON.stringify(exit.value))
        : send(res, rate, route.status, exit.value as string, route.rawContentType)
    }
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure) && isApiError(failure.value)) return sendError(res, rate, failure.value)
    options.onDefect(route.name, exit.cause)
    sendError(res, rate, internal)
  }

  const parseQuery = (query: string): Record<string, string | Array<string>> => {
    const out: Record<string, string | Array<string>> = {}
    if (query === "") return out
    for (const [k, v] of new URLSearchParams(query)) {
      const prev = out[k]
      out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v]
    }
    return out
  }

  const execute = (
    req: IncomingMessage,
    res: ServerResponse,
    route: Route,
    params: Record<string, string | undefined>,
    query: string,
    body: Body,
    pathname: string
  ) => {
    const exchange = new Exchange(req, res, pathname, trustedHops)
    const reply: Reply = { res, route, rate: undefined }
    const admitted = (admission: Admission): Effect.Effect<unknown, unknown, HandlerServices> => {
      reply.rate = admission.rate
      if (admission.refusal !== undefined) return Effect.fail(admission.refusal)
      const actor = admission.actor
      if (route.mode !== "optional" && actor === undefined) return Effect.fail(unauthenticated)
      if (
        actor !== undefined &&
        route.requirement !== "authenticated" &&
        route.requirement !== "public" &&
        !hasScope(actor, route.requirement)
      ) {
        return Effect.fail(
          new Forbidden({
            message: `this credential lacks the ${route.requirement} scope`,
            details: { required_scope: route.requirement }
          })
        )
      }
      let path: unknown
      if (route.decodePath !== undefined) {
        const r = route.decodePath(params)
        if (Either.isLeft(r)) return Effect.fail(invalid(r.left, "path"))
        path = r.right
      }
      let urlParams: unknown
      if (route.decodeQuery !== undefined) {
        const r = route.decodeQuery(parseQuery(query))
        if (Either.isLeft(r)) return Effect.fail(invalid(r.left, "query"))
        urlParams = r.right
      }
      let payload: unknown
      if (route.decodePayload !== undefined) {
        if (body === undefined) return Effect.fail(new BadRequest({ message: "a JSON body is required", details: {} }))
        if (!body.ok) return Effect.fail(body.error)
        const r = route.decodePayload(body.value)
        if (Either.isLeft(r)) return Effect.fail(invalid(r.left, "body"))
        payload = r.right
      }
      const handler = route.handler
      if (handler === undefined) return Effect.fail(new BadRequest({ message: "no handler", details: {} }))
      return handler({ actor, path, urlParams, payload, request: exchange })
    }
    const admission = gate.admitNow(exchange, route.mode)
    const program: Effect.Effect<unknown, unknown, HandlerServices | Gate> =
      admission === undefined ? Effect.flatMap(gate.admit(exchange, route.mode), admitted) : admitted(admission)
    // A refusal or a bad request is known before anything runs: answered without starting a fiber.
    if (Exit.isExit(program)) return finish(reply)(program)
    runCallback(program as Effect.Effect<unknown, unknown | StoreError, ServerServices>, {
      onExit: finish(reply)
    })
  }

  const readBody = (req: IncomingMessage, res: ServerResponse, done: (body: Body) => void) => {
    const declared = Number(req.headers["content-length"] ?? "0")
    if (declared > MAX_BODY_BYTES) {
      tooLarge(req, res)
      return
    }
    const type = req.headers["content-type"]
    const chunks: Array<Buffer> = []
    let size = 0
    let aborted = false
    req.on("data", (chunk: Buffer) => {
      if (aborted) return
      size += chunk.length
      if (size > MAX_BODY_BYTES) {
        aborted = true
        tooLarge(req, res)
        return
      }
      chunks.push(chunk)
    })
    req.on("end", () => {
      if (aborted) return
      if (size === 0) return done(undefined)
      if (type === undefined || !/^application\/(.+\+)?json\b/i.test(type)) {
        return done({
          ok: false,
          error: new BadRequest({ message: "Content-Type must be application/json", details: {} })
        })
      }
      try {
        done({ ok: true, value: JSON.parse(Buffer.concat(chunks, size).toString("utf8")) })
      } catch {
        done({ ok: false, error: new BadRequest({ message: "the body is not valid JSON", details: {} }) })
      }
    })
    req.on("error", () => {
      aborted = true
    })
  }

  const tooLarge = (req: IncomingMessage, res: ServerResponse) => {
    res.setHeader("connection", "close")
    sendError(res, undefined, {
      _tag: "PayloadTooLarge",
      message: `the body is over ${MAX_BODY_BYTES} bytes`,
      details: { limit: MAX_BODY_BYTES }
    })
    // Stop reading what is left of an oversized body; the connection closes after the answer.
    req.resume()
  }

  const health = (res: ServerResponse): void => {
    runCallback(options.health, {
      onExit: (exit) =>
        Exit.isSuccess(exit) && exit.value
          ? send(res, undefined, 200, '{"status":"ok"}')
          : sendError(res, undefined, { _tag: "InternalError", message: "the store does not answer", details: {} })
    })
  }

  return (req: IncomingMessage, res: ServerResponse): void => {
    const url = req.url ?? "/"
    const q = url.indexOf("?")
    const pathname = q === -1 ? url : url.slice(0, q)
    const query = q === -1 ? "" : url.slice(q + 1)
    const method = req.method ?? "GET"
    if (method === "GET") {
      if (pathname === "/api/health") return health(res)
      const file = statics.get(pathname)
      if (file !== undefined) return execute(req, res, file, {}, "", undefined, pathname)
    }
    const found = router.find(method as FindMyWay.HTTPMethod, pathname)
    if (found === null) return execute(req, res, notFound, {}, "", undefined, pathname)
    const route = found.store as Route
    if (route.forwardAuth) {
      // Never wait for a body here; if one was announced, do not keep the connection for it.
      if (req.headers["content-length"] !== undefined || req.headers["transfer-encoding"] !== undefined) {
        res.setHeader("connection", "close")
      }
      execute(req, res, route, found.params, query, undefined, pathname)
    } else if (route.decodePayload !== undefined || (method !== "GET" && method !== "DELETE")) {
      readBody(req, res, (body) => execute(req, res, route, found.params, query, body, pathname))
    } else {
      execute(req, res, route, found.params, query, undefined, pathname)
    }
  }
}
