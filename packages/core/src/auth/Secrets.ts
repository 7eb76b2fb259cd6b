/**
 * API key secrets: `twk_` + 43 random base62 characters (256 bits) + a 6-character checksum, so a
 * mistyped key is refused without a database lookup and secret scanners can recognise ours.
 * Only the SHA-256 of a secret is ever stored.
 */

import * as crypto from "node:crypto"
import { crc32 } from "node:zlib"
import { randomBase62 } from "@taskwright/domain"

const PREFIX = "twk_"
const BODY_LENGTH = 43
const CHECKSUM_LENGTH = 6
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
const SHAPE = /^twk_[0-9A-Za-z]{49}$/

const checksum = (text: string): string => {
  let n = crc32(text)
  let out = ""
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = BASE62[n % 62] + out
    n = Math.floor(n / 62)
  }
  return out
}

/** A fresh API key secret. */
export const newApiKeySecret = (): string => {
  const head = PREFIX + randomBase62(BODY_LENGTH)
  return head + checksum(head)
}

/** True when `secret` has our shape and its checksum matches: cheap, no I/O. */
export const isWellFormedApiKey = (secret: string): boolean =>
  SHAPE.test(secret) && checksum(secret.slice(0, -CHECKSUM_LENGTH)) === secret.slice(-CHECKSUM_LENGTH)

// `crypto.hash` (Node 20.12+) hashes in one call, without a Hash object per request.
const sha256Hex: (text: string) => string =
  typeof crypto.hash === "function"
    ? (text) => crypto.hash("sha256", text, "hex")
    : (text) => crypto.createHash("sha256").update(text).digest("hex")

/** The form a secret is stored in: SHA-256, hex. */
export const hashSecret = (secret: string): string => sha256Hex(secret)

/**
 * Constant-time comparison of two hex digests: every character is looked at whatever differs
 * first. (Decoding both to buffers for `timingSafeEqual` cost more than the rest of a cached
 * key check; digests have a fixed, public length, so the length test leaks nothing.)
 */
export const digestsEqual = (a: string, b: string): boolean => {
  if (a.length !== b.length) return false
  let difference = 0
  for (let i = 0; i < a.length; i++) difference |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return difference === 0
}

/** What a key list may show of a secret: enough to recognise it, never enough to use it. */
export const displayPrefix = (secret: string): string => secret.slice(0, PREFIX.length + 6)

const CREDENTIAL_SHAPES: ReadonlyArray<readonly [RegExp, string]> = [
  [/twk_[0-9A-Za-z]{6,}/g, "twk_[redacted]"],
  [/eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g, "[redacted token]"],
  [/(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])/g, "[redacted]"]
]

/**
 * `text` with anything shaped like one of our credentials (an API key, an access token, a
 * session token) replaced: error answers may quote what a client sent (a path, a value that
 * failed validation), and a credential sent in the wrong place must not come back.
 */
export const redactCredentials = (text: string): string => {
  let out = text
  for (const [shape, replacement] of CREDENTIAL_SHAPES) out = out.replace(shape, replacement)
  return out
}
