/**
 * The fast serving path: the dispatcher over bare `node:http`, one {@link NodeExchange} per
 * request, headers written as one flat array and bodies with `res.end`. Measured against the
 * alternatives in this package's README. Also what `tw.nodeHandler(req, res)` is: it mounts in any
 * `node:http`-style framework (Express and friends), under a path prefix when given one.
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import type { Socket } from "node:net"
import type { TLSSocket } from "node:tls"
import { defaultAuthSettings, TaskwrightConfig } from "@taskwright/core"
import { clientAddress } from "@taskwright/core/internal"
import { Context, type Runtime } from "effect"
import { type DispatcherOptions, type DispatchServices, type HttpExchange, makeDispatcher } from "./http/Dispatcher.js"

export { MAX_BODY_BYTES } from "./http/Body.js"

/**
 * A body over the limit is answered (413) at once, and what the client is still sending is read
 * and thrown away, up to this many bytes, before the connection is used again. Closing it with the
 * body unread instead makes the kernel reset it, and a client still writing then never reads the
 * answer. A body declared larger is not waited for: the answer closes the connection.
 */
const DRAIN_LIMIT_BYTES = 16 * 1024 * 1024

/** One request over `node:http`, as the dispatcher sees it. */
class NodeExchange implements HttpExchange {
  private address: string | undefined
  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly pathname: string,
    readonly query: string,
    private readonly trustedHops: number,
    private readonly watch: ConnectionWatch | undefined
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
  get announcesBody(): boolean {
    return this.req.headers["content-length"] !== undefined || this.req.headers["transfer-encoding"] !== undefined
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
  readBody(limit: number, done: (body: Uint8Array | "too_large" | "aborted") => void): void {
    const req = this.req
    const declared = Number(req.headers["content-length"] ?? "0")
    if (declared > limit) {
      // Refused before a byte is read; what is left of the body is read and discarded (DRAIN_LIMIT_BYTES).
      if (declared > DRAIN_LIMIT_BYTES) this.closeAfterResponse()
      req.resume()
      return done("too_large")
    }
    const chunks: Array<Buffer> = []
    let size = 0
    let over = false
    req.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (over) {
        // Answered already: the rest is discarded, up to a point.
        if (size > DRAIN_LIMIT_BYTES) req.socket.destroy()
        return
      }
      if (size > limit) {
        over = true
        done("too_large")
        return
      }
      chunks.push(chunk)
    })
    req.on("end", () => {
      if (!over) done(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size))
    })
    req.on("error", () => {
      if (!over) {
        over = true
        done("aborted")
      }
    })
  }
  respond(status: number, headers: Array<string>, body: string | Uint8Array): void {
    this.res.writeHead(status, headers)
    this.res.end(body)
    this.watch?.answered(this.req.socket)
  }
  closeAfterResponse(): void {
    this.res.setHeader("connection", "close")
  }
}

/**
 * Hears when a connection's request arrives and when its answer starts, for a server that keeps
 * account of its connections (idle ones may be closed, busy ones spared): told by the listener
 * itself, with no listener added to each request.
 */
export interface ConnectionWatch {
  readonly arrived: (socket: Socket, req: IncomingMessage) => void
  readonly answered: (socket: Socket) => void
}

export interface RequestListenerOptions extends DispatcherOptions {
  /** The path the API is mounted under (`/tasks-api`); requests outside it are 404. */
  readonly prefix?: string
  readonly watch?: ConnectionWatch
}

/** The path of a request URL inside `prefix` ("" when outside it), and its query. */
export const splitUrl = (url: string, prefix: string | undefined): { pathname: string; query: string } => {
  const q = url.indexOf("?")
  let pathname = q === -1 ? url : url.slice(0, q)
  const query = q === -1 ? "" : url.slice(q + 1)
  if (prefix !== undefined && prefix !== "") {
    pathname = pathname.startsWith(`${prefix}/`) ? pathname.slice(prefix.length) : ""
  }
  return { pathname, query }
}

/** The `node:http` request listener over a prebuilt runtime. */
export const makeRequestListener = (runtime: Runtime.Runtime<DispatchServices>, options: RequestListenerOptions) => {
  const dispatch = makeDispatcher(runtime, options)
  const trustedHops = (Context.get(runtime.context, TaskwrightConfig).auth ?? defaultAuthSettings).trustProxy
  const prefix = options.prefix?.replace(/\/+$/, "")
  const watch = options.watch
  return (req: IncomingMessage, res: ServerResponse): void => {
    watch?.arrived(req.socket, req)
    const { pathname, query } = splitUrl(req.url ?? "/", prefix)
    dispatch(new NodeExchange(req, res, pathname, query, trustedHops, watch))
  }
}
