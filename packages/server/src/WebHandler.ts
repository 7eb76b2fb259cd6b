/**
 * The whole HTTP API as a fetch-style handler, `(Request) => Promise<Response>`, for hosts that
 * speak web-standard requests (Hono, Next.js route handlers, Deno-style servers, tests without a
 * socket): the same dispatcher as the `node:http` path, so the same gate, envelope and answers.
 */
import { defaultAuthSettings, TaskwrightConfig } from "@taskwright/core"
import { clientAddress } from "@taskwright/core/internal"
import { Context, type Runtime } from "effect"
import { splitUrl } from "./FastServer.js"
import { type DispatcherOptions, type DispatchServices, type HttpExchange, makeDispatcher } from "./http/Dispatcher.js"

export interface WebHandlerOptions extends DispatcherOptions {
  /** The path the API is mounted under (`/tasks-api`); requests outside it are 404. */
  readonly prefix?: string
  /** The client's address, when the host knows it (a web `Request` does not carry one). */
  readonly clientAddress?: (request: Request) => string | undefined
}

class WebExchange implements HttpExchange {
  private readonly added: Array<readonly [string, string]> = []
  private address: string | undefined
  constructor(
    private readonly request: Request,
    private readonly url: URL,
    readonly pathname: string,
    readonly query: string,
    private readonly peer: string | undefined,
    private readonly trustedHops: number,
    private readonly resolve: (response: Response) => void
  ) {}
  get method(): string {
    return this.request.method
  }
  header(name: string): string | undefined {
    return this.request.headers.get(name) ?? undefined
  }
  get clientAddress(): string {
    this.address ??= clientAddress(
      this.peer,
      this.trustedHops > 0 ? this.header("x-forwarded-for") : undefined,
      this.trustedHops
    )
    return this.address
  }
  get secure(): boolean {
    if (this.url.protocol === "https:") return true
    if (this.trustedHops === 0) return false
    return this.header("x-forwarded-proto")?.split(",")[0]?.trim().toLowerCase() === "https"
  }
  get announcesBody(): boolean {
    return this.request.body !== null
  }
  setHeader(name: string, value: string): void {
    this.added.push([name.toLowerCase(), value])
  }
  readBody(limit: number, done: (body: Uint8Array | "too_large" | "aborted") => void): void {
    const body = this.request.body
    if (body === null) return done(new Uint8Array(0))
    if (Number(this.request.headers.get("content-length") ?? "0") > limit) {
      this.closeAfterResponse()
      return done("too_large")
    }
    const reader = body.getReader()
    const chunks: Array<Uint8Array> = []
    let size = 0
    const next = (): void => {
      reader.read().then(
        ({ done: finished, value }) => {
          if (finished) return done(chunks.length === 1 ? (chunks[0] as Uint8Array) : Buffer.concat(chunks, size))
          size += value.byteLength
          if (size > limit) {
            void reader.cancel().catch(() => {})
            this.closeAfterResponse()
            return done("too_large")
          }
          chunks.push(value)
          next()
        },
        () => done("aborted")
      )
    }
    next()
  }
  respond(status: number, flat: Array<string>, body: string | Uint8Array): void {
    const headers = new Headers()
    for (let i = 0; i + 1 < flat.length; i += 2) headers.set(flat[i] as string, flat[i + 1] as string)
    // Headers a handler added win over the defaults, as `node:http` merges them; cookies add up.
    for (const [name, value] of this.added) {
      if (name === "set-cookie") headers.append(name, value)
      else headers.set(name, value)
    }
    const empty = status === 204 || status === 304 || this.request.method === "HEAD"
    this.resolve(new Response(empty ? null : body, { status, headers }))
  }
  closeAfterResponse(): void {
    this.added.push(["connection", "close"])
  }
}

/** The fetch-style handler over a prebuilt runtime. */
export const makeWebHandler = (runtime: Runtime.Runtime<DispatchServices>, options: WebHandlerOptions) => {
  const dispatch = makeDispatcher(runtime, options)
  const trustedHops = (Context.get(runtime.context, TaskwrightConfig).auth ?? defaultAuthSettings).trustProxy
  const prefix = options.prefix?.replace(/\/+$/, "")
  return (request: Request): Promise<Response> =>
    new Promise<Response>((resolve) => {
      const url = new URL(request.url)
      const { pathname, query } = splitUrl(url.pathname + url.search, prefix)
      dispatch(new WebExchange(request, url, pathname, query, options.clientAddress?.(request), trustedHops, resolve))
    })
}
