/**
 * The client address a request is counted under when it carries no valid credential.
 * `X-Forwarded-For` is read only when the operator says how many proxies to trust
 * (`TASKWRIGHT_TRUST_PROXY`): the entry that many hops from the right is the one the outermost
 * trusted proxy saw; anything further left was written by the client and is ignored.
 */
import { isIP } from "node:net"

/** The client's address given the socket peer, the `X-Forwarded-For` header and the trusted hop count. */
export const clientAddress = (
  peer: string | undefined,
  forwardedFor: string | undefined,
  trustedHops: number
): string => {
  const direct = peer ?? "unknown"
  if (trustedHops <= 0 || forwardedFor === undefined) return direct
  const entries = forwardedFor.split(",")
  const entry = entries[entries.length - trustedHops] ?? entries[0]
  const candidate = entry?.trim() ?? ""
  return isIP(candidate) !== 0 ? candidate : direct
}

const expandV6 = (address: string): Array<string> | undefined => {
  const [head = "", tail] = address.split("::")
  const left = head === "" ? [] : head.split(":")
  const right = tail === undefined || tail === "" ? [] : tail.split(":")
  if (tail === undefined) return left.length === 8 ? left : undefined
  return [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill("0"), ...right]
}

/**
 * The rate-limit subject of an address: IPv4 as is (IPv4-mapped IPv6 folded to IPv4), IPv6 by
 * its /64, since one client usually holds a whole /64 and could otherwise rotate through it.
 */
export const addressSubject = (address: string): string => {
  if (address.startsWith("::ffff:") && isIP(address.slice(7)) === 4) return address.slice(7)
  if (isIP(address) !== 6) return address
  const groups = expandV6(address.split("%")[0] ?? address)
  if (groups === undefined) return address
  return `${groups
    .slice(0, 4)
    .map((g) => (Number.parseInt(g, 16) || 0).toString(16))
    .join(":")}::/64`
}
