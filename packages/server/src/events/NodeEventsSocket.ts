/**
 * The event socket on a `node:http` (or `https`) server, with `ws`: the upgrade is decided by the
 * session (an HTTP answer in the error envelope when refused), then `ws` does the handshake. Ping
 * every 30 s, and a client that does not answer is dropped. A client whose unsent frames pile up
 * past {@link MAX_BUFFERED_BYTES} is too slow and is closed, so it never holds memory or the
 * service back.
 */
import type { IncomingMessage, Server } from "node:http"
import type { Duplex } from "node:stream"
import type { TLSSocket } from "node:tls"
import { errorBody } from "@taskwright/api"
import { defaultAuthSettings, errorWire, TaskwrightConfig } from "@taskwright/core"
import { clientAddress, redactCredentials } from "@taskwright/core/internal"
import { Context, Either, type Runtime } from "effect"
import type { WebSocketServer } from "ws"
import { splitUrl } from "../FastServer.js"
import { VERSION } from "../version.js"
import { type EventsRequest, type EventsServices, makeEventsSessions, type Refusal } from "./EventsSession.js"

/** Unsent bytes a client may have queued before it counts as too slow. */
export const MAX_BUFFERED_BYTES = 4 * 1024 * 1024
/** How often a client is pinged; one that has not answered the previous ping by then is dropped. */
export const PING_MS = 30_000

const STATUS_TEXT: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  429: "Too Many Requests",
  503: "Service Unavailable"
}

/** An HTTP answer in the envelope on a socket that will not be upgraded. */
const refuse = (socket: Duplex, refusal: Refusal) => {
  const status = errorWire[refusal._tag].status
  const body = redactCredentials(JSON.stringify(errorBody(refusal)))
  const headers = [
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? "Error"}`,
    "Content-Type: application/json; charset=utf-8",
    `Content-Length: ${Buffer.byteLength(body)}`,
    "X-Content-Type-Options: nosniff",
    `X-Taskwright-Version: ${VERSION}`,
    "Connection: close"
  ]
  if (status === 401) headers.push('WWW-Authenticate: Bearer realm="taskwright"')
  const rate = refusal.rate
  if (rate !== undefined) {
    headers.push(
      `X-RateLimit-Limit: ${rate.limit}`,
      `X-RateLimit-Remaining: ${rate.remaining}`,
      `X-RateLimit-Reset: ${rate.reset}`
    )
    if (!rate.allowed) headers.push(`Retry-After: ${rate.retryAfter}`)
  }
  socket.end(`${headers.join("\r\n")}\r\n\r\n${body}`)
}

/**
 * The upgrade handler of `GET /api/events` for a `node:http` server (`server.on("upgrade", handle)`),
 * and how to close every session (shutdown).
 */
export interface EventsSocketOptions {
  readonly prefix?: string
  /** Unsent bytes a client may have queued before it counts as too slow (default {@link MAX_BUFFERED_BYTES}). */
  readonly maxBufferedBytes?: number
  /** Milliseconds between pings (default {@link PING_MS}). */
  readonly pingMs?: number
}

export const makeEventsUpgrade = (runtime: Runtime.Runtime<EventsServices>, options: EventsSocketOptions = {}) => {
  const maxBuffered = options.maxBufferedBytes ?? MAX_BUFFERED_BYTES
  const pingMs = options.pingMs ?? PING_MS
  const sessions = makeEventsSessions(runtime)
  const trustedHops = (Context.get(runtime.context, TaskwrightConfig).auth ?? defaultAuthSettings).trustProxy
  const prefix = options.prefix?.replace(/\/+$/, "")
  // `ws` is loaded at the first upgrade, not at start: its module code ran at every start.
  let wss: WebSocketServer | undefined
  let loading: Promise<WebSocketServer> | undefined
  const socketServer = () =>
    (loading ??= import("ws").then(({ WebSocketServer }) => {
      wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 })
      return wss
    }))

  const handle = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on("error", () => {})
    const { pathname, query } = splitUrl(req.url ?? "/", prefix)
    if (pathname !== "/api/events") {
      return refuse(socket, { _tag: "NotFound", message: `no event socket at ${pathname || req.url}`, details: {} })
    }
    const header = (name: string) => {
      const value = req.headers[name]
      return Array.isArray(value) ? value[0] : value
    }
    const request: EventsRequest = {
      method: req.method ?? "GET",
      header,
      query,
      clientAddress: clientAddress(
        req.socket.remoteAddress,
        trustedHops > 0 ? header("x-forwarded-for") : undefined,
        trustedHops
      ),
      secure:
        (req.socket as TLSSocket).encrypted === true ||
        (trustedHops > 0 && header("x-forwarded-proto")?.split(",")[0]?.trim().toLowerCase() === "https")
    }
    void sessions
      .admit(request)
      .then(async (decision) => {
        if (Either.isLeft(decision)) return refuse(socket, decision.left)
        const server = await socketServer()
        server.handleUpgrade(req, socket, head, (ws) => {
          const session = sessions.start(
            {
              send: (text) => {
                if (ws.bufferedAmount > maxBuffered) return false
                ws.send(text)
                return true
              },
              close: (code, reason) => ws.close(code, reason)
            },
            decision.right
          )
          let alive = true
          ws.on("pong", () => {
            alive = true
          })
          const ping = setInterval(() => {
            if (!alive) return ws.terminate()
            alive = false
            ws.ping()
          }, pingMs)
          ping.unref()
          ws.on("message", (data, binary) => {
            if (!binary) session.message(data.toString())
          })
          ws.on("close", () => {
            clearInterval(ping)
            session.closed()
          })
          ws.on("error", () => ws.terminate())
        })
      })
      // Neither the gate nor loading `ws` should fail; if one does, the client is not left hanging.
      .catch(() => socket.destroy())
  }

  return {
    handle,
    closeAll: () => {
      sessions.closeAll()
      for (const client of wss?.clients ?? []) client.terminate()
    }
  }
}

/** Serves `GET /api/events` on `server`'s upgrades; answers how to close every session (shutdown). */
export const attachEventsSocket = (
  server: Server,
  runtime: Runtime.Runtime<EventsServices>,
  options: EventsSocketOptions = {}
) => {
  const upgrade = makeEventsUpgrade(runtime, options)
  server.on("upgrade", upgrade.handle)
  return upgrade
}
