/**
 * CSRF defence for cookie-authenticated requests: a browser always names the page that sent a
 * cross-site request in `Origin` (or at least `Referer`), so a state-changing request carried by
 * the session cookie must come from the service's own origin. Requests with a Bearer credential
 * need no check: a browser never attaches one on its own.
 */
import { Option } from "effect"
import { type AuthSettings, publicOrigin } from "./AuthSettings.js"
import type { RequestInfo } from "./RequestInfo.js"

const originOf = (url: string): string | undefined => {
  try {
    const origin = new URL(url).origin
    return origin === "null" ? undefined : origin
  } catch {
    return undefined
  }
}

/** The origin browsers show for this service: `TASKWRIGHT_PUBLIC_URL`'s, else the scheme and `Host` of the request. */
export const expectedOrigin = (settings: AuthSettings, request: RequestInfo): string | undefined =>
  Option.getOrElse(publicOrigin(settings), () => {
    const host = request.header("host")
    return host === undefined ? undefined : originOf(`${request.secure ? "https" : "http"}://${host}`)
  })

/**
 * True when the request names the service's origin in `Origin` (or, without one, in `Referer`).
 * With `required` false, a request naming no origin at all passes (non-browser clients).
 */
export const sameOrigin = (settings: AuthSettings, request: RequestInfo, required: boolean): boolean => {
  const origin = request.header("origin")
  const referer = origin === undefined ? request.header("referer") : undefined
  const claimed = origin !== undefined ? (origin === "null" ? "null" : originOf(origin)) : referer && originOf(referer)
  if (claimed === undefined || claimed === "") return !required
  const expected = expectedOrigin(settings, request)
  return expected !== undefined && claimed === expected
}
