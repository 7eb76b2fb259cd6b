/**
 * The Effect-native face: the whole HTTP API as an `@effect/platform` `HttpApp`, for Effect hosts
 * that serve it from their own `HttpServer` (or mount it with `HttpRouter.mountApp`), and as a
 * layer over a started engine. It is the same dispatcher as the `node:http` fast path, so it
 * answers every request the same way: one gate (rate limits, key usage, cookie sessions with
 * their CSRF check), one scope check, one envelope, the OpenAPI document and the docs page.
 */
import { Socket as NetSocket } from "node:net"
import type { TLSSocket } from "node:tls"
import { Cookies, type HttpApp, HttpServerRequest, HttpServerResponse, Socket } from "@effect/platform"
import { errorBody } from "@taskwright/api"
import { defaultAuthSettings, type EngineServices, errorWire, TaskwrightConfig } from "@taskwright/core"
import { clientAddress } from "@taskwright/core/internal"
import { Context, Effect, Either, Layer, ManagedRuntime, Option, type Runtime, Stream } from "effect"
import { apiDocuments } from "./Documents.js"
import { type EventsServices, makeEventsSessions, type Refusal } from "./events/EventsSession.js"
import { MAX_BUFFERED_BYTES, makeEventsUpgrade, PING_MS } from "./events/NodeEventsSocket.js"
import { makeRequestListener, splitUrl } from "./FastServer.js"
import { type HttpExchange, makeDispatcher, type SiteHandler } from "./http/Dispatcher.js"
import { VERSION } from "./version.js"
import { makeWebHandler } from "./WebHandler.js"

class EffectExchange implements HttpExchange {
  private readonly added: Array<readonly [string, string]> = []
  private address: string | undefined
  constructor(
    private readonly request: HttpServerRequest.HttpServerRequest,
    readonly pathname: string,
    readonly query: string,
    private readonly trustedHops: number,
    private readonly resume: (response: HttpServerResponse.HttpServerResponse) => void
  ) {}
  get method(): string {
    return this.request.method
  }
  header(name: string): string | undefined {
    return this.request.headers[name]
  }
  get clientAddress(): string {
    this.address ??= clientAddress(
      Option.getOrUndefined(this.request.remoteAddress),
      this.trustedHops > 0 ? this.header("x-forwarded-for") : undefined,
      this.trustedHops
    )
    return this.address
  }
  get secure(): boolean {
    if (servedOverTls(this.request)) return true
    if (this.trustedHops === 0) return false
    return this.header("x-forwarded-proto")?.split(",")[0]?.trim().toLowerCase() === "https"
  }
  get announcesBody(): boolean {
    return this.header("content-length") !== undefined || this.header("transfer-encoding") !== undefined
  }
  setHeader(name: string, value: string): void {
    this.added.push([name.toLowerCase(), value])
  }
  readBody(limit: number, done: (body: Uint8Array | "too_large" | "aborted") => void): void {
    if (Number(this.header("content-length") ?? "0") > limit) {
      this.closeAfterResponse()
      return done("too_large")
    }
    const read = Stream.runFoldWhile(
      this.request.stream,
      { size: 0, chunks: [] as Array<Uint8Array> },
      (acc) => acc.size <= limit,
      (acc, chunk) => {
        acc.chunks.push(chunk)
        acc.size += chunk.byteLength
        return acc
      }
    )
    Effect.runCallback(read, {
      onExit: (exit) => {
        if (exit._tag === "Failure") return done("aborted")
        const { size, chunks } = exit.value
        if (size <= limit) return done(Buffer.concat(chunks, size))
        this.closeAfterResponse()
        done("too_large")
      }
    })
  }
  respond(status: number, flat: Array<string>, body: string | Uint8Array): void {
    const headers: Record<string, string> = {}
    let contentType: string | undefined
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const name = flat[i] as string
      if (name === "content-type") contentType = flat[i + 1]
      else if (name !== "content-length") headers[name] = flat[i + 1] as string
    }
    const cookies: Array<string> = []
    for (const [name, value] of this.added) {
      if (name === "set-cookie") cookies.push(value)
      else headers[name] = value
    }
    const bytes = typeof body === "string" ? Buffer.from(body) : body
    this.resume(
      HttpServerResponse.uint8Array(this.request.method === "HEAD" ? new Uint8Array(0) : bytes, {
        status,
        headers,
        ...(contentType === undefined ? {} : { contentType }),
        ...(cookies.length === 0 ? {} : { cookies: Cookies.fromSetCookie(cookies) })
      })
    )
  }
  closeAfterResponse(): void {
    this.added.push(["connection", "close"])
  }
}

export interface HttpFaceOptions {
  /** The path the API is mounted under (`/tasks-api`); requests outside it are 404. */
  readonly prefix?: string
  /** Answers requests outside `/api/` (the web board). */
  readonly site?: SiteHandler
  /** Unsent bytes an event-socket client may have queued before it is closed as too slow (default 4 MiB). */
  readonly eventsMaxBufferedBytes?: number
  /** Milliseconds between pings of an event-socket client; one silent for two is dropped (default 30 s). */
  readonly eventsPingMs?: number
}

/**
 * The connection under a request the platform serves over `node:http` (its `source` is the
 * `IncomingMessage`); undefined on other platforms, where an event socket then has neither the
 * unsent-bytes bound nor pings (only the bound on frames sent before it opened).
 */
const connectionOf = (request: HttpServerRequest.HttpServerRequest): NetSocket | undefined => {
  const source: unknown = request.source
  if (typeof source !== "object" || source === null || !("socket" in source)) return undefined
  return source.socket instanceof NetSocket ? source.socket : undefined
}

/** The host serves this request over TLS itself (an `https` server, or a platform whose request URL says so). */
const servedOverTls = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const connection = connectionOf(request)
  if (connection !== undefined) return (connection as TLSSocket).encrypted === true
  const source: unknown = request.source
  return source instanceof Request && source.url.startsWith("https:")
}

/** The dispatcher's options for this server: its version, documents and site. */
export const dispatcherOptions = (options: HttpFaceOptions = {}) => ({
  version: VERSION,
  documents: apiDocuments,
  ...(options.site === undefined ? {} : { site: options.site }),
  ...(options.prefix === undefined ? {} : { prefix: options.prefix })
})

/** Frames sent before the socket has opened, held until it has; past this the client counts as too slow. */
const MAX_EARLY_FRAMES = 10_000

/** A WebSocket ping frame: FIN, opcode 0x9, no payload (a server's frames are unmasked). */
const PING_FRAME = Buffer.from([0x89, 0x00])

/**
 * Pings a WebSocket client every `everyMs` on its connection and calls `dead` when nothing came
 * from it (a pong, or anything else) since the previous ping. The platform's socket has no ping of
 * its own, so the frame is written on the connection: the WebSocket writes whole frames to it
 * synchronously, so this one never lands inside another. Answers how to stop.
 */
const heartbeat = (connection: NetSocket, everyMs: number, dead: () => void) => {
  let heard = true
  const onData = () => {
    heard = true
  }
  connection.on("data", onData)
  const timer = setInterval(() => {
    if (!heard) return dead()
    heard = false
    if (connection.writable) connection.write(PING_FRAME)
  }, everyMs)
  timer.unref()
  return () => {
    clearInterval(timer)
    connection.off("data", onData)
  }
}

/**
 * `GET /api/events` on `@effect/platform`'s sockets: the same session as over `ws`, the socket
 * upgraded only once the session admitted the request. The platform's write hands a frame to the
 * connection at once, so how far a client is behind is read from the connection itself (its
 * unsent bytes, as `ws` counts them for the `node:http` face); the same bound closes it.
 */
const eventsSocket = (
  sessions: ReturnType<typeof makeEventsSessions>,
  request: HttpServerRequest.HttpServerRequest,
  exchange: EffectExchange,
  query: string,
  limits: { readonly maxBufferedBytes: number; readonly pingMs: number }
) =>
  Effect.gen(function* () {
    const decision = yield* Effect.promise(() => sessions.admit({ ...requestInfo(exchange), query }))
    if (Either.isLeft(decision)) return envelopeResponse(decision.left)
    const socket = yield* request.upgrade
    const write = yield* socket.writer
    const connection = connectionOf(request)
    // Frames the session sends before the socket has opened; undefined once it has.
    let early: Array<string | Socket.CloseEvent> | undefined = []
    let open = false
    let ended = false
    let stopHeartbeat = () => {}
    const put = (frame: string | Socket.CloseEvent) => {
      if (open) Effect.runSyncExit(write(frame))
    }
    const session = sessions.start(
      {
        send: (text) => {
          if (early !== undefined) {
            if (early.length >= MAX_EARLY_FRAMES) return false
            early.push(text)
            return true
          }
          // The client is not reading: what is unsent would only pile up here.
          if (connection !== undefined && connection.writableLength > limits.maxBufferedBytes) return false
          put(text)
          return true
        },
        close: (code, reason) => {
          ended = true
          stopHeartbeat()
          const frame = new Socket.CloseEvent(code, reason)
          if (early !== undefined) early.push(frame)
          else put(frame)
        }
      },
      decision.right
    )
    const onOpen = Effect.sync(() => {
      open = true
      const waiting = early ?? []
      early = undefined
      for (const frame of waiting) put(frame)
      if (connection !== undefined && !ended) {
        stopHeartbeat = heartbeat(connection, limits.pingMs, () => connection.destroy())
      }
    })
    const text = new TextDecoder()
    yield* socket
      .runRaw((data) => session.message(typeof data === "string" ? data : text.decode(data)), { onOpen })
      .pipe(
        Effect.ignore,
        Effect.ensuring(
          Effect.sync(() => {
            open = false
            stopHeartbeat()
            session.closed()
          })
        )
      )
    return HttpServerResponse.empty()
  }).pipe(
    Effect.scoped,
    // The upgrade itself failed (not a WebSocket handshake the platform accepts).
    Effect.catchAll(() =>
      Effect.succeed(
        envelopeResponse({ _tag: "BadRequest", message: "the WebSocket handshake could not be completed", details: {} })
      )
    )
  )

/** A plain {@link RequestInfo} of an exchange (its getters read once). */
const requestInfo = (exchange: EffectExchange) => ({
  method: exchange.method,
  header: (name: string) => exchange.header(name),
  clientAddress: exchange.clientAddress,
  secure: exchange.secure
})

/** An error envelope as a response (for a refused event socket). */
const envelopeResponse = (refusal: Refusal) =>
  HttpServerResponse.unsafeJson(errorBody(refusal), {
    status: errorWire[refusal._tag].status,
    headers: {
      "x-content-type-options": "nosniff",
      ...(errorWire[refusal._tag].status === 401 ? { "www-authenticate": 'Bearer realm="taskwright"' } : {})
    }
  })

/** The API as an `HttpApp` over a prebuilt runtime; `GET /api/events` upgrades to the event socket. */
export const makeHttpApp = (
  runtime: Runtime.Runtime<EventsServices>,
  options: HttpFaceOptions = {}
): HttpApp.Default<never, HttpServerRequest.HttpServerRequest> => {
  const dispatch = makeDispatcher(runtime, dispatcherOptions(options))
  const sessions = makeEventsSessions(runtime)
  const trustedHops = (Context.get(runtime.context, TaskwrightConfig).auth ?? defaultAuthSettings).trustProxy
  const prefix = options.prefix?.replace(/\/+$/, "")
  const limits = {
    maxBufferedBytes: options.eventsMaxBufferedBytes ?? MAX_BUFFERED_BYTES,
    pingMs: options.eventsPingMs ?? PING_MS
  }
  return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const { pathname, query } = splitUrl(request.url, prefix)
    if (pathname === "/api/events" && request.headers.upgrade?.toLowerCase() === "websocket") {
      const exchange = new EffectExchange(request, pathname, query, trustedHops, () => {})
      return eventsSocket(sessions, request, exchange, query, limits)
    }
    return Effect.async<HttpServerResponse.HttpServerResponse>((resume) => {
      dispatch(
        new EffectExchange(request, pathname, query, trustedHops, (response) => resume(Effect.succeed(response)))
      )
    })
  })
}

/** The HTTP faces of one started engine. */
export interface TaskwrightHttpFaces {
  /** For an Effect host's `HttpServer` / `HttpRouter`. */
  readonly app: HttpApp.Default<never, HttpServerRequest.HttpServerRequest>
  /** `(Request) => Promise<Response>`, for fetch-style frameworks. */
  readonly handler: (request: Request) => Promise<Response>
  /** `(req, res)`, for `node:http`, Express and friends. */
  readonly nodeHandler: ReturnType<typeof makeRequestListener>
  /** `(req, socket, head)`, the event socket for a `node:http` server's `"upgrade"` event. */
  readonly nodeUpgrade: ReturnType<typeof makeEventsUpgrade>["handle"]
}

/** The HTTP faces over the started engine in context. */
export class TaskwrightHttp extends Context.Tag("@taskwright/server/TaskwrightHttp")<
  TaskwrightHttp,
  TaskwrightHttpFaces
>() {
  /** The faces, built once over the engine's runtime. */
  static layer(options: HttpFaceOptions = {}): Layer.Layer<TaskwrightHttp, never, EngineServices> {
    return Layer.effect(
      TaskwrightHttp,
      Effect.map(Effect.runtime<EngineServices>(), (runtime) => makeHttpFaces(runtime, options))
    )
  }
}

/** Every HTTP face over a prebuilt runtime. */
export const makeHttpFaces = (
  runtime: Runtime.Runtime<EventsServices>,
  options: HttpFaceOptions = {}
): TaskwrightHttpFaces => ({
  app: makeHttpApp(runtime, options),
  handler: makeWebHandler(runtime, dispatcherOptions(options)),
  nodeHandler: makeRequestListener(runtime, dispatcherOptions(options)),
  nodeUpgrade: makeEventsUpgrade(runtime, {
    ...(options.prefix === undefined ? {} : { prefix: options.prefix }),
    ...(options.eventsMaxBufferedBytes === undefined ? {} : { maxBufferedBytes: options.eventsMaxBufferedBytes }),
    ...(options.eventsPingMs === undefined ? {} : { pingMs: options.eventsPingMs })
  }).handle
})

/**
 * A web-standard `(Request) => Promise<Response>` over an engine layer (an engine of its own:
 * built on the first request, stopped by `dispose`). A failure to start the engine is a defect of
 * every request.
 */
export const makeEffectWebHandler = <E>(engine: Layer.Layer<EngineServices, E>, options: HttpFaceOptions = {}) => {
  const managed = ManagedRuntime.make(Layer.orDie(engine))
  let handler: Promise<(request: Request) => Promise<Response>> | undefined
  return {
    handler: async (request: Request): Promise<Response> => {
      handler ??= managed.runtime().then((runtime) => makeWebHandler(runtime, dispatcherOptions(options)))
      return (await handler)(request)
    },
    dispose: () => managed.dispose()
  }
}
