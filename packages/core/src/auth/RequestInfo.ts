/**
 * What authentication needs to know of an HTTP request, whatever serves it (the fast node:http
 * path, `HttpApiBuilder`, a test). Servers implement it once per request.
 */
export interface RequestInfo {
  /** Upper-case HTTP method. */
  readonly method: string
  /** A request header by lower-case name; the first value when repeated. */
  header(name: string): string | undefined
  /** The client's address: the socket's peer, or the trusted proxy's `X-Forwarded-For` entry. */
  readonly clientAddress: string
  /** True when the client reached the service over HTTPS (TLS here, or `X-Forwarded-Proto` from a trusted proxy). */
  readonly secure: boolean
}

/** Methods that change nothing: no CSRF check. */
export const isSafeMethod = (method: string): boolean => method === "GET" || method === "HEAD" || method === "OPTIONS"
