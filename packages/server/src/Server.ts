/**
 * Serves a Taskwright engine over HTTP: the fast `node:http` listener attached to a started engine
 * (start-up and shutdown are the engine's: see `TaskwrightEngine` in the core). The server adds
 * what only a socket has: TLS, per-phase timeouts that free a slow client's socket in seconds, a
 * connection cap below the process's file limit, and answers in the common envelope for requests
 * `node:http` refuses before they reach the listener (malformed, headers too large, too slow).
 * `close()` drains: stop accepting, finish in-flight requests, then stop the engine.
 */
import { readFileSync } from "node:fs"
import { createServer as createHttpServer, type IncomingMessage, type Server } from "node:http"
import { createServer as createHttpsServer } from "node:https"
import type { AddressInfo, Socket } from "node:net"
import {
  type EngineRuntime,
  type EngineRuntimeOptions,
  type EngineServices,
  type EngineStarted,
  makeEngineRuntime,
  Runs,
  TaskwrightEngine,
  type TaskwrightSettings
} from "@taskwright/core"
import { Context, Effect, type Option } from "effect"
import { dispatcherOptions, type HttpFaceOptions } from "./EffectServer.js"
import { attachEventsSocket } from "./events/NodeEventsSocket.js"
import { type ConnectionWatch, makeRequestListener } from "./FastServer.js"
import { VERSION } from "./version.js"
import { webSite } from "./WebAssets.js"

/** How long each phase of a request may take, and how many connections are held at once. */
export interface ConnectionLimits {
  /** Milliseconds for a client to send a request's headers (default 10 s). */
  readonly headersTimeoutMs: number
  /** Milliseconds for a whole request, body included (default 30 s). */
  readonly requestTimeoutMs: number
  /** Milliseconds an idle keep-alive connection is kept (default 5 s). */
  readonly keepAliveTimeoutMs: number
  /**
   * Milliseconds a connection may stay silent before anything arrives, or in the middle of a
   * request's body or of reading an answer (default 10 s); never while a request is handled.
   */
  readonly idleTimeoutMs: number
  /** Connections held at once; past it a newcomer replaces the longest-idle one (default: below the file limit, at most 10,000). */
  readonly maxConnections: number
}

/** The soft limit on open files of this process (Linux), if it can be read. */
const openFileLimit = (): number | undefined => {
  try {
    const line = readFileSync("/proc/self/limits", "utf8")
      .split("\n")
      .find((l) => l.startsWith("Max open files"))
    const soft = Number(line?.split(/\s{2,}/)[1])
    return Number.isFinite(soft) && soft > 0 ? soft : undefined
  } catch {
    return undefined
  }
}

const positive = (value: string | undefined): number | undefined => {
  const n = Number(value)
  return value !== undefined && value.trim() !== "" && Number.isInteger(n) && n > 0 ? n : undefined
}

/**
 * The limits from `TASKWRIGHT_HEADERS_TIMEOUT_MS`, `TASKWRIGHT_REQUEST_TIMEOUT_MS`,
 * `TASKWRIGHT_KEEPALIVE_TIMEOUT_MS`, `TASKWRIGHT_IDLE_TIMEOUT_MS` and `TASKWRIGHT_MAX_CONNECTIONS`.
 * The connection cap leaves room below the file limit for the store, agents' pipes and logs, so
 * a flood of idle connections cannot make the process refuse everyone.
 */
export const connectionLimitsFromEnv = (env: Record<string, string | undefined>): ConnectionLimits => {
  const files = openFileLimit()
  const roomy = files === undefined ? 10_000 : Math.max(64, Math.min(10_000, files - 512))
  return {
    headersTimeoutMs: positive(env.TASKWRIGHT_HEADERS_TIMEOUT_MS) ?? 10_000,
    requestTimeoutMs: positive(env.TASKWRIGHT_REQUEST_TIMEOUT_MS) ?? 30_000,
    keepAliveTimeoutMs: positive(env.TASKWRIGHT_KEEPALIVE_TIMEOUT_MS) ?? 5_000,
    idleTimeoutMs: positive(env.TASKWRIGHT_IDLE_TIMEOUT_MS) ?? 10_000,
    maxConnections: positive(env.TASKWRIGHT_MAX_CONNECTIONS) ?? roomy
  }
}

export interface ServeOptions extends HttpFaceOptions, EngineRuntimeOptions {
  readonly port: number
  readonly host: string
  /** PEM files: serve HTTPS directly. */
  readonly tls?: { readonly certFile: string; readonly keyFile: string }
  /** Default: {@link connectionLimitsFromEnv} of the process's environment. */
  readonly limits?: ConnectionLimits
  /** Unsent bytes an event socket's client may have queued before it is closed as too slow (default 4 MiB). */
  readonly eventsMaxBufferedBytes?: number
}

export interface RunningServer {
  readonly url: string
  readonly port: number
  readonly server: Server
  /** What the engine did when it started: the bootstrap admin (key and file, on a first start), recovered runs. */
  readonly started: EngineStarted
  /** Where the bootstrap admin key was written, on the first start of an empty store. */
  readonly adminKeyFile: Option.Option<string>
  /** Runs an effect on the engine (same store, same services). */
  readonly run: <A, E>(effect: Effect.Effect<A, E, EngineServices>) => Promise<A>
  readonly close: () => Promise<void>
}

/** When the agent sandbox's status is found out and logged, after the server starts answering. */
const SANDBOX_REPORT_DELAY_MS = 500

const STATUS_TEXT: Record<number, string> = {
  400: "Bad Request",
  408: "Request Timeout",
  413: "Payload Too Large",
  431: "Request Header Fields Too Large"
}

/** The envelope for requests `node:http` refuses itself; it would answer them with an empty body. */
const refuseRaw = (socket: Socket, status: number, code: string, message: string) => {
  if (!socket.writable) return socket.destroy()
  const body = JSON.stringify({ error: { code, message, details: {} } })
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? "Bad Request"}\r\n` +
      "Content-Type: application/json; charset=utf-8\r\n" +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      "X-Content-Type-Options: nosniff\r\n" +
      `X-Taskwright-Version: ${VERSION}\r\n` +
      `Connection: close\r\n\r\n${body}`
  )
}

const onClientError = (error: Error & { readonly code?: string }, socket: Socket) => {
  switch (error.code) {
    case "HPE_HEADER_OVERFLOW":
      return refuseRaw(socket, 431, "HEADERS_TOO_LARGE", "the request's headers are over 16 KiB")
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return refuseRaw(socket, 408, "REQUEST_TIMEOUT", "the request took too long to arrive")
    case "ECONNRESET":
      return socket.destroy()
    default:
      return refuseRaw(socket, 400, "BAD_REQUEST", "the request is not valid HTTP")
  }
}

/**
 * Holds at most `max` connections. A connection past the cap takes the place of the one that has
 * been idle longest (connected but silent, or waiting between keep-alive requests); only when every
 * connection is busy is the newcomer closed. A flood of idle connections therefore cannot lock out
 * a client that sends a request, nor take the process to its file limit.
 *
 * It also decides what the idle timer (`server.timeout`) cuts. That timer is for a connection that
 * does nothing: silent since it connected, a body that stopped coming (the request timeout bounds
 * the whole of it), an answer the client stopped reading. Node applies it to a request being
 * handled too, and would cut a handler that works for a while before answering (a clone for
 * `POST /api/projects` or `POST /api/review/pr`). So from the moment a request has fully arrived
 * until its answer starts, its connection is spared; a client that pipelines has its next request
 * arrive before the answer to the one before, so a connection counts the requests it has in hand.
 *
 * The request listener reports arrivals and answers ({@link ConnectionWatch}), where listeners on
 * each request and response cost several microseconds. Neither report allocates: each connection
 * has one record, found by its socket, and the idle ones are linked oldest first through their
 * records. (Maps did this before, a set and a delete per report. V8 gives a map that lives in the
 * old generation a new table there whenever it rehashes, which a delete that empties a small map
 * or a set after many deletes does: about 200 bytes of old-generation garbage a request under wrk,
 * which only full collections clear. packages/cli/test/old-generation.test.ts measures it.)
 */
const watchConnections = (server: Server, max: number, secure: boolean): ConnectionWatch => {
  const connections = new WeakMap<Socket, Connection>()
  const idle = new IdleList()
  let open = 0
  server.on(secure ? "secureConnection" : "connection", (socket: Socket) => {
    if (open >= max) {
      const oldest = idle.shift()
      if (oldest === undefined) return socket.destroy()
      oldest.socket.destroy()
    }
    open++
    const connection = new Connection(socket)
    connections.set(socket, connection)
    idle.push(connection)
    // The record goes with the socket (the WeakMap does not hold it); only the idle list must let go.
    socket.once("close", () => {
      open--
      idle.remove(connection)
    })
  })
  // An upgraded connection (the events socket) is in use for as long as it lives.
  server.on("upgrade", (req: IncomingMessage) => {
    const connection = connections.get(req.socket)
    if (connection !== undefined) idle.remove(connection)
  })
  // A listener here answers Node's question "is anyone handling this timeout?": otherwise it destroys the socket.
  server.on("timeout", (socket: Socket) => {
    const connection = connections.get(socket)
    if (connection?.isHandling() === true) return
    socket.destroy()
  })
  return {
    arrived: (socket, req) => {
      const connection = connections.get(socket)
      if (connection === undefined) return
      idle.remove(connection)
      connection.inHand++
      connection.latest = req
    },
    answered: (socket) => {
      const connection = connections.get(socket)
      if (connection === undefined) return
      if (connection.inHand > 0) connection.inHand--
      // A pipelining client's next request may have arrived before this answer: still in use.
      if (connection.inHand > 0) return
      connection.latest = undefined
      if (!socket.destroyed) idle.push(connection)
    }
  }
}

/** One open connection: the requests its handlers have, and its links in the idle list. */
class Connection {
  /** Requests that arrived and are not answered yet: more than one when the client pipelines. */
  inHand = 0
  /** The last request that arrived: the only one whose body may still be coming. */
  latest: IncomingMessage | undefined = undefined
  older: Connection | undefined = undefined
  newer: Connection | undefined = undefined
  isIdle = false
  constructor(readonly socket: Socket) {}

  /** Whether a handler works on a request that has fully arrived (so the idle timer must spare it). */
  isHandling(): boolean {
    return this.inHand > 1 || (this.inHand === 1 && this.latest?.complete === true)
  }
}

/** The idle connections, oldest first, linked through their records: no allocation to add or remove one. */
class IdleList {
  private oldest: Connection | undefined = undefined
  private newest: Connection | undefined = undefined

  push(connection: Connection): void {
    if (connection.isIdle) this.remove(connection)
    connection.isIdle = true
    connection.older = this.newest
    connection.newer = undefined
    if (this.newest === undefined) this.oldest = connection
    else this.newest.newer = connection
    this.newest = connection
  }

  remove(connection: Connection): void {
    if (!connection.isIdle) return
    connection.isIdle = false
    const { older, newer } = connection
    if (older === undefined) this.oldest = newer
    else older.newer = newer
    if (newer === undefined) this.newest = older
    else newer.older = older
    connection.older = undefined
    connection.newer = undefined
  }

  /** Takes the connection idle longest out of the list. */
  shift(): Connection | undefined {
    const oldest = this.oldest
    if (oldest !== undefined) this.remove(oldest)
    return oldest
  }
}

/** Starts an engine for `settings` and serves it, or serves an engine the host started (and keeps owning). */
export const serve = async (
  engine: TaskwrightSettings | EngineRuntime,
  options: ServeOptions
): Promise<RunningServer> => {
  const owned = !("runtime" in engine && typeof engine.runtime === "function")
  const managed: EngineRuntime = owned
    ? makeEngineRuntime(engine as TaskwrightSettings, { writeAdminKeyFile: true, ...options })
    : (engine as EngineRuntime)
  const runtime = await managed.runtime()
  const started = Context.get(runtime.context, TaskwrightEngine)
  const limits = options.limits ?? connectionLimitsFromEnv(process.env)

  const serverOptions = {
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    // Node checks the two timeouts above on this period (30 s by default).
    connectionsCheckingInterval: Math.min(1_000, limits.headersTimeoutMs)
  }
  const server: Server =
    options.tls === undefined
      ? createHttpServer(serverOptions)
      : createHttpsServer({
          ...serverOptions,
          cert: readFileSync(options.tls.certFile),
          key: readFileSync(options.tls.keyFile)
        })
  const watch = watchConnections(server, limits.maxConnections, options.tls !== undefined)
  server.on("request", makeRequestListener(runtime, { ...dispatcherOptions({ site: webSite(), ...options }), watch }))
  // TLS handshakes in progress are not in the guard's count: node's own cap bounds them.
  if (options.tls !== undefined) server.maxConnections = limits.maxConnections * 2
  // A connection that sends nothing at all is closed after this long (not a request being handled).
  server.timeout = limits.idleTimeoutMs
  server.on("clientError", onClientError)
  const eventSockets = attachEventsSocket(server, runtime, {
    ...(options.prefix === undefined ? {} : { prefix: options.prefix }),
    ...(options.eventsMaxBufferedBytes === undefined ? {} : { maxBufferedBytes: options.eventsMaxBufferedBytes })
  })
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(options.port, options.host, () => {
      server.off("error", reject)
      resolve()
    })
  })
  // Whether agent runs are sandboxed here, said once at start: the operator must know. Found out
  // (two short bwrap runs) a moment after the server answers: spawning them takes the event loop
  // some 15 ms, which the first requests should not wait for.
  const sandboxReport = setTimeout(() => {
    void managed
      .runPromise(
        Effect.flatMap(Runs, (runs) => runs.sandboxStatus).pipe(
          Effect.flatMap(({ mode, detail }) =>
            mode === "bwrap"
              ? Effect.logInfo(`agent sandbox: ${detail}`)
              : Effect.logWarning(`agent sandbox ${mode}: ${detail}`)
          )
        )
      )
      .catch(() => undefined)
  }, SANDBOX_REPORT_DELAY_MS)
  const port = (server.address() as AddressInfo).port
  const host = options.host.includes(":") ? `[${options.host}]` : options.host
  let closing: Promise<void> | undefined
  const close = () => {
    closing ??= new Promise<void>((resolve) => {
      clearTimeout(sandboxReport)
      eventSockets.closeAll()
      server.close(() => resolve())
      server.closeIdleConnections()
    }).then(() => (owned ? managed.dispose() : undefined))
    return closing
  }
  return {
    url: `${options.tls === undefined ? "http" : "https"}://${host}:${port}`,
    port,
    server,
    started,
    adminKeyFile: started.bootstrap.keyFile,
    run: (effect) => managed.runPromise(effect),
    close
  }
}
