/**
 * One request handled from start to answer, whatever carries it: the `node:http` fast path, a
 * fetch-style `(Request) => Response` handler, or an `@effect/platform` app all hand the dispatcher
 * an {@link HttpExchange} and get the same routing, gate, scope check, decoding, handler, headers
 * and error envelope. Handlers run on one prebuilt runtime (`Runtime.runCallback`); a request
 * whose answer is known before anything runs (a refusal, a bad request) is answered without a fiber.
 */
import { errorBody } from "@taskwright/api"
import {
  type Actor,
  type Admission,
  errorWire,
  Forbidden,
  Gate,
  hasScope,
  invalidInput,
  MethodNotAllowed,
  NotFound,
  type RateState,
  type StoreError,
  type TaskwrightConfig,
  Unauthorized,
  UpgradeRequired
} from "@taskwright/core"
import { JsonText, redactCredentials, StoreTag, statement } from "@taskwright/core/internal"
import { Cause, Context, Effect, Either, Exit, Option, type ParseResult, Runtime } from "effect"
import { type HandlerServices, handlers } from "../handlers/index.js"
import { MAX_BODY_BYTES, missingBody, type ParsedBody, parseJsonBody } from "./Body.js"
import type { AnyHandler, RequestContext } from "./Handler.js"
import { compileRoutes, contractRoutes, publicRoute, type Route } from "./Routes.js"

/** A request and its answer, as the dispatcher needs them from whatever carries them. */
export interface HttpExchange extends RequestContext {
  /** The path without the query, the host's mount prefix removed. */
  readonly pathname: string
  /** The query string without `?`. */
  readonly query: string
  /** A body was announced (`Content-Length` or `Transfer-Encoding`). */
  readonly announcesBody: boolean
  /**
   * Reads the whole body, refusing past `limit` bytes. Calls `done` once. What is left of a
   * refused body is the exchange's to deal with: discarded, or the connection closed after the answer.
   */
  readBody(limit: number, done: (body: Uint8Array | "too_large" | "aborted") => void): void
  /** Sends the answer once: `headers` as a flat name, value, name, value array, added to those of {@link setHeader}. */
  respond(status: number, headers: Array<string>, body: string | Uint8Array): void
  /** The connection is not to be reused after this answer (a body is still arriving that will not be read). */
  closeAfterResponse(): void
}

/** Everything the dispatcher runs on. */
export type DispatchServices = HandlerServices | Gate | TaskwrightConfig | StoreTag

/** A document served beside the contract (the OpenAPI document, the docs page). */
export interface Document {
  readonly path: string
  readonly contentType: string
  /** The body, or how to make it on the first request (kept from then on). */
  readonly body: string | (() => string)
  /** Extra headers (a Content-Security-Policy, ...). */
  readonly headers?: ReadonlyArray<readonly [string, string]>
}

/**
 * Answers requests outside `/api/` (the web board's files). Answers true when it answered (with
 * `respond`), false to let the dispatcher answer 404.
 */
export type SiteHandler = (exchange: HttpExchange) => boolean

export interface DispatcherOptions {
  readonly version: string
  readonly documents: ReadonlyArray<Document>
  readonly site?: SiteHandler
}

const JSON_TYPE = "application/json; charset=utf-8"
/** Seconds a client is told to wait when the store is away. */
const STORE_RETRY_AFTER_S = 5

interface WireError {
  readonly _tag: keyof typeof errorWire
  readonly message: string
  readonly details: Record<string, unknown>
}

const isApiError = (u: unknown): u is WireError =>
  typeof u === "object" && u !== null && "_tag" in u && typeof u._tag === "string" && u._tag in errorWire

const isStoreError = (u: unknown): u is StoreError =>
  typeof u === "object" && u !== null && "_tag" in u && u._tag === "StoreError"

const unauthenticated = new Unauthorized({ message: "authentication required", details: {} })
const internal: WireError = { _tag: "InternalError", message: "internal server error", details: {} }
const storeAway: WireError = {
  _tag: "ServiceUnavailable",
  message: `the service's store cannot be reached; try again in ${STORE_RETRY_AFTER_S} s`,
  details: { reason: "store_unavailable", retry_after: STORE_RETRY_AFTER_S }
}

const ping = statement<{ one: number }>("health.ping", "SELECT 1 AS one")

/** A route answered by the server itself (not a handler of the contract). */
const serverRoute = (name: string, handler: AnyHandler): Route => publicRoute(name, handler)

/** Parses a query string into `name → value` (`name → values` when repeated). */
const parseQuery = (query: string): Record<string, string | Array<string>> => {
  const out: Record<string, string | Array<string>> = {}
  if (query === "") return out
  for (const [k, v] of new URLSearchParams(query)) {
    const prev = out[k]
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v]
  }
  return out
}

/** One answer in the making: where it goes, the route, and once the gate has spoken, the budget and the caller. */
interface Reply {
  readonly exchange: HttpExchange
  readonly route: Route
  rate: RateState | undefined
  actor: Actor | undefined
}

/**
 * A count that differs on every request (a budget's remaining requests) as decimal text, without
 * V8's number-to-string cache. `String(n)` keeps its result in that cache until another number
 * lands in the same slot, which for a count that never repeats is thousands of requests later:
 * each answer's string then outlived the young generation, about 30 bytes a request promoted to
 * the old one, and full collections followed under load.
 */
const uncachedDecimal = (n: number): string => n.toFixed(0)

/** Builds the dispatcher over a prebuilt runtime. */
export const makeDispatcher = (runtime: Runtime.Runtime<DispatchServices>, options: DispatcherOptions) => {
  const runCallback = Runtime.runCallback(runtime)
  const runFork = Runtime.runFork(runtime)
  const gate = Context.get(runtime.context, Gate)
  const store = Context.get(runtime.context, StoreTag)
  const services = runtime.context
  const byGroup = handlers as unknown as Record<string, Record<string, AnyHandler> | undefined>

  const documents = options.documents.map((d) => {
    let body: string | undefined
    const make = d.body
    const headers = d.headers ?? []
    return {
      path: d.path,
      route: {
        ...serverRoute(`document ${d.path}`, ({ request }) =>
          Effect.sync(() => {
            for (const [name, value] of headers) request.setHeader(name, value)
            body ??= typeof make === "string" ? make : make()
            return body
          })
        ),
        // Static and public: a budget of their own per address, no credential looked at.
        mode: "document" as const,
        rawContentType: d.contentType
      }
    }
  })
  const match = compileRoutes(
    contractRoutes((group, endpoint) => byGroup[group]?.[endpoint]),
    documents
  )

  // The store's reachability, so an outage is logged once when it starts and once when it ends.
  let storeDown = false
  const storeFailed = (error: StoreError) => {
    if (storeDown) return
    storeDown = true
    runFork(Effect.logWarning(`the store cannot be reached (${error.message}); answering 503 until it is back`))
  }
  const storeAnswered = () => {
    if (!storeDown) return
    storeDown = false
    runFork(Effect.logInfo("the store is reachable again"))
  }

  const send = (reply: Reply, status: number, body: string | Uint8Array, contentType: string = JSON_TYPE): void => {
    const { exchange, rate } = reply
    const headers: Array<string> = [
      "x-taskwright-version",
      options.version,
      "content-type",
      contentType,
      "content-length",
      String(typeof body === "string" ? Buffer.byteLength(body) : body.byteLength),
      "x-content-type-options",
      "nosniff"
    ]
    // What a credential reads is nobody else's: no shared cache may keep it.
    if (reply.actor !== undefined) headers.push("cache-control", "no-store")
    if (rate !== undefined) {
      headers.push(
        "x-ratelimit-limit",
        String(rate.limit),
        "x-ratelimit-remaining",
        uncachedDecimal(rate.remaining),
        "x-ratelimit-reset",
        String(rate.reset)
      )
      if (!rate.allowed) headers.push("retry-after", String(rate.retryAfter))
    }
    exchange.respond(status, headers, body)
  }

  let lastError: WireError | undefined
  let lastErrorBody = ""
  const sendError = (reply: Reply, error: WireError): void => {
    const status = errorWire[error._tag].status
    if (status === 401) reply.exchange.setHeader("www-authenticate", 'Bearer realm="taskwright"')
    const retryAfter = error.details.retry_after
    if ((status === 429 || status === 503) && typeof retryAfter === "number" && reply.rate?.allowed !== false) {
      reply.exchange.setHeader("retry-after", String(retryAfter))
    }
    // An error may quote what the client sent (a path, a rejected value): never a credential.
    // The same error object again (a flood of refusals shares one) reuses its body.
    if (error !== lastError) {
      lastError = error
      lastErrorBody = redactCredentials(JSON.stringify(errorBody(error)))
    }
    send(reply, status, lastErrorBody)
  }

  const finish = (reply: Reply) => (exit: Exit.Exit<unknown, unknown>) => {
    if (Exit.isSuccess(exit)) {
      if (storeDown) storeAnswered()
      const raw = reply.route.rawContentType
      if (raw !== undefined) return send(reply, reply.route.status, exit.value as string, raw)
      return exit.value === noContent
        ? send(reply, 204, "", "text/plain; charset=utf-8")
        : send(reply, reply.route.status, exit.value instanceof JsonText ? exit.value.text : JSON.stringify(exit.value))
    }
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure)) {
      const error = failure.value
      if (isApiError(error)) return sendError(reply, error)
      if (isStoreError(error) && error.kind === "unavailable") {
        storeFailed(error)
        return sendError(reply, storeAway)
      }
    }
    runFork(Effect.logError(`500 in ${reply.route.name}`, exit.cause))
    sendError(reply, internal)
  }

  const scopeRefusal = (route: Route) =>
    new Forbidden({
      message: `this credential lacks the ${route.requirement} scope`,
      details: { required_scope: route.requirement }
    })

  const execute = (
    exchange: HttpExchange,
    route: Route,
    params: Record<string, string | undefined>,
    body: ParsedBody | undefined
  ) => {
    const reply: Reply = { exchange, route, rate: undefined, actor: undefined }
    const admitted = (
      admission: Admission
    ): Effect.Effect<unknown, unknown, HandlerServices> | Promise<Exit.Exit<unknown, unknown>> => {
      reply.rate = admission.rate
      reply.actor = admission.actor
      if (admission.refusal !== undefined) return Effect.fail(admission.refusal)
      const actor = admission.actor
      if ((route.mode === "required" || route.mode === "verify") && actor === undefined) {
        return Effect.fail(unauthenticated)
      }
      if (
        actor !== undefined &&
        route.requirement !== "authenticated" &&
        route.requirement !== "public" &&
        !hasScope(actor, route.requirement)
      ) {
        return Effect.fail(scopeRefusal(route))
      }
      let path: unknown
      if (route.decodePath !== undefined) {
        const r = route.decodePath(params)
        if (Either.isLeft(r)) return Effect.fail(invalidPath(r.left))
        path = r.right
      }
      let payload: unknown
      if (route.takesBody) {
        if (body === undefined) return Effect.fail(missingBody)
        if (!body.ok) return Effect.fail(body.error)
        payload = body.value
      } else if (body !== undefined && !body.ok) {
        return Effect.fail(body.error)
      }
      const handler = route.handler
      if (handler === undefined) return Effect.fail(new NotFound({ message: "no handler", details: {} }))
      const input = { actor, path, urlParams: parseQuery(exchange.query), payload, request: exchange }
      return handler.now?.(input, services) ?? handler(input)
    }
    const admission = gate.admitNow(exchange, route.mode)
    const program =
      admission === undefined
        ? Effect.flatMap(gate.admit(exchange, route.mode), (a) => {
            const next = admitted(a)
            return next instanceof Promise ? Effect.flatten(Effect.promise(() => next)) : next
          })
        : admitted(admission)
    // Known before anything runs (a refusal, a bad request, an answer of the embedded store), or a
    // promise of it (PostgreSQL): answered without starting a fiber.
    if (program instanceof Promise) {
      program.then(finish(reply), (defect: unknown) => finish(reply)(Exit.die(defect)))
      return
    }
    if (Exit.isExit(program)) return finish(reply)(program)
    runCallback(program, { onExit: finish(reply) })
  }

  const tooLarge = (exchange: HttpExchange) => {
    sendError(
      { exchange, route: tooLargeRoute, rate: undefined, actor: undefined },
      {
        _tag: "PayloadTooLarge",
        message: `the body is over ${MAX_BODY_BYTES} bytes`,
        details: { limit: MAX_BODY_BYTES }
      }
    )
  }

  const withBody = (exchange: HttpExchange, then: (body: ParsedBody | undefined) => void) => {
    exchange.readBody(MAX_BODY_BYTES, (bytes) => {
      if (bytes === "aborted") return
      if (bytes === "too_large") return tooLarge(exchange)
      then(bytes.byteLength === 0 ? undefined : parseJsonBody(bytes, exchange.header("content-type")))
    })
  }

  const health = (exchange: HttpExchange): void => {
    const reply: Reply = { exchange, route: healthRoute, rate: undefined, actor: undefined }
    runCallback(store.get(ping), {
      onExit: (exit) => {
        if (Exit.isSuccess(exit)) {
          storeAnswered()
          return send(reply, 200, '{"status":"ok"}')
        }
        const failure = Cause.failureOption(exit.cause)
        if (Option.isSome(failure)) storeFailed(failure.value)
        sendError(reply, storeAway)
      }
    })
  }

  // The event socket is taken by the transport's upgrade; a request without `Upgrade` is told how to ask.
  const upgradeRequired = (exchange: HttpExchange): void => {
    exchange.setHeader("upgrade", "websocket")
    sendError({ exchange, route: upgradeRoute, rate: undefined, actor: undefined }, upgradeNeeded)
  }

  return (exchange: HttpExchange): void => {
    const { pathname, method } = exchange
    if (pathname === "/api/health" && (method === "GET" || method === "HEAD")) return health(exchange)
    if (pathname === "/api/events" && (method === "GET" || method === "HEAD")) return upgradeRequired(exchange)
    if (!pathname.startsWith("/api/") && options.site?.(exchange) === true) return
    const found = match(method, pathname)
    switch (found._tag) {
      case "Route": {
        const route = found.route
        if (route.forwardAuth) {
          // Never wait for a body here; if one was announced, do not keep the connection for it.
          if (exchange.announcesBody) exchange.closeAfterResponse()
          return execute(exchange, route, found.params, undefined)
        }
        if (route.takesBody || exchange.announcesBody) {
          return withBody(exchange, (body) => execute(exchange, route, found.params, body))
        }
        return execute(exchange, route, found.params, undefined)
      }
      case "MethodNotAllowed":
        exchange.setHeader("allow", found.allow.join(", "))
        return execute(exchange, methodNotAllowed(method, pathname, found.allow), {}, undefined)
      case "Options":
        exchange.setHeader("allow", found.allow.join(", "))
        return execute(exchange, optionsRoute, {}, undefined)
      case "NotFound":
        return execute(exchange, notFoundRoute, {}, undefined)
    }
  }
}

/** What a handler answers to send 204 with no body. */
export const noContent: unique symbol = Symbol("noContent")

const invalidPath = (error: ParseResult.ParseError) => invalidInput(error, "path")

const notFoundRoute: Route = serverRoute("not found", ({ request }) =>
  Effect.fail(
    new NotFound({
      message: `no route for ${request.method} ${(request as HttpExchange).pathname}`,
      details: {}
    })
  )
)

const tooLargeRoute: Route = serverRoute("body too large", () => Effect.void)

const upgradeRoute: Route = serverRoute("events without upgrade", () => Effect.void)

const upgradeNeeded = new UpgradeRequired({
  message: "GET /api/events is a WebSocket: open it with Upgrade: websocket",
  details: { upgrade: "websocket" }
})

const healthRoute: Route = serverRoute("health", () => Effect.succeed({ status: "ok" }))

const optionsRoute: Route = serverRoute("options", () => Effect.succeed(noContent))

const methodNotAllowed = (method: string, pathname: string, allow: ReadonlyArray<string>): Route =>
  serverRoute("method not allowed", () =>
    Effect.fail(
      new MethodNotAllowed({
        message: `${method} is not allowed on ${pathname}; allowed: ${allow.join(", ")}`,
        details: { allow }
      })
    )
  )
