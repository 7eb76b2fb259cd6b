/**
 * A request body turned into JSON, refusing with a clear 400 what no JSON value can carry: bytes
 * that are not UTF-8, and nesting deeper than any request needs. NUL characters and unpaired
 * UTF-16 surrogates in strings (PostgreSQL text holds neither; SQLite would store them and hand
 * back something else) are refused by the services' decoders, naming the field, so a body sent
 * over HTTP and the same value passed in-process get the same answer.
 */
import { isUtf8 } from "node:buffer"
import { BadRequest } from "@taskwright/core"

/** Bodies above this are refused with 413. */
export const MAX_BODY_BYTES = 1024 * 1024

/** No request of the contract nests deeper than a few levels; this leaves room and bounds the parser's work. */
export const MAX_JSON_DEPTH = 32

export type ParsedBody =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly error: BadRequest }

/** A refusal of the body as a whole: named as the field `body`, like a body the services' decoders refuse. */
const bodyRefusal = (message: string, reason?: string): BadRequest =>
  new BadRequest({
    message,
    details: { ...(reason === undefined ? {} : { reason }), fields: [{ path: "body", message }] }
  })

const refuse = (message: string, reason: string): ParsedBody => ({ ok: false, error: bodyRefusal(message, reason) })

/** No body where one is required: what the services answer in process for a missing body, word for word. */
export const missingBody: BadRequest = bodyRefusal("the body must be a JSON object")

const OPEN_OBJECT = 0x7b
const OPEN_ARRAY = 0x5b
const CLOSE_OBJECT = 0x7d
const CLOSE_ARRAY = 0x5d
const QUOTE = 0x22
const BACKSLASH = 0x5c

/** The deepest nesting of objects and arrays in JSON text, stopping early past `max`. */
const depthExceeds = (bytes: Uint8Array, max: number): boolean => {
  let depth = 0
  let inString = false
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]
    if (inString) {
      if (b === BACKSLASH) i++
      else if (b === QUOTE) inString = false
    } else if (b === QUOTE) inString = true
    else if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
      if (++depth > max) return true
    } else if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) depth--
  }
  return false
}

const JSON_TYPE = /^application\/(.+\+)?json\b/i

/** Parses a request body of `bytes` (non-empty) sent with `contentType`. */
export const parseJsonBody = (bytes: Uint8Array, contentType: string | undefined): ParsedBody => {
  if (contentType === undefined || !JSON_TYPE.test(contentType)) {
    return refuse("Content-Type must be application/json", "content_type")
  }
  if (!isUtf8(bytes)) return refuse("the body is not valid UTF-8", "invalid_utf8")
  if (depthExceeds(bytes, MAX_JSON_DEPTH)) {
    return refuse(`the body nests objects or arrays deeper than ${MAX_JSON_DEPTH} levels`, "too_deep")
  }
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8")
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return refuse("the body is not valid JSON", "invalid_json")
  }
  return { ok: true, value }
}
