/**
 * Stands in for `pg`'s `lib/stream.js` in the bundle (see tsup.config.ts). That module chooses
 * between Node's sockets and Cloudflare's when it is loaded, and on Node 20 (which has no
 * `navigator`) it finds out by constructing a `Response`: that loads Node's bundled undici, about
 * 19 ms of every start on PostgreSQL, for a service that never runs in a Cloudflare Worker. This
 * is the module's Node branch, the same two functions.
 */
import { Socket } from "node:net"
import { type ConnectionOptions, connect, type TLSSocket } from "node:tls"

/** A plain socket for a connection; `pg` connects it itself. */
export const getStream = (_ssl?: unknown): Socket => new Socket()

/** The TLS socket `pg` upgrades a connection to when the server accepts SSL. */
export const getSecureStream = (options: ConnectionOptions): TLSSocket => connect(options)
