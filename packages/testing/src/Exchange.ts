/** What the socket server and the in-process harness share: a JSON request and its parsed answer, and ad-hoc store queries. */
import { createHash } from "node:crypto"
import { StoreTag, statement } from "@taskwright/core/internal"
import { Effect } from "effect"

export interface TestResponse<T = unknown> {
  readonly status: number
  readonly headers: Headers
  /** The body parsed as JSON, or its text when it is not JSON (`undefined` when empty). */
  readonly body: T
  readonly text: string
}

export interface RequestOptions {
  /** Sent as `Authorization: Bearer <key>`. */
  readonly key?: string | undefined
  /** Sent as JSON. */
  readonly body?: unknown
  /** A raw body, sent as is (for malformed JSON tests). */
  readonly raw?: string | Uint8Array
  readonly headers?: Record<string, string>
}

/** Sends `method path` through `send` (a socket's `fetch`, or the in-process handler) and reads the answer. */
export const sendTestRequest = async <T>(
  send: (path: string, init: RequestInit) => Promise<Response>,
  method: string,
  path: string,
  o: RequestOptions = {}
): Promise<TestResponse<T>> => {
  const headers: Record<string, string> = { ...o.headers }
  if (o.key !== undefined) headers.authorization = `Bearer ${o.key}`
  let body: string | Uint8Array | undefined = o.raw
  if (o.body !== undefined) {
    body = JSON.stringify(o.body)
    headers["content-type"] ??= "application/json"
  }
  const res = await send(path, { method, headers, ...(body === undefined ? {} : { body }) })
  const text = await res.text()
  let parsed: unknown = text
  try {
    parsed = text === "" ? undefined : JSON.parse(text)
  } catch {
    // not JSON: the text stays the body
  }
  return { status: res.status, headers: res.headers, body: parsed as T, text }
}

/** A value bound to a `?` of a test's query. */
export type QueryParam = string | number | bigint | null

/** A query straight on the engine's store (`?` placeholders on both dialects). */
export const storeQuery = <Row>(sql: string, params: ReadonlyArray<QueryParam> = []) =>
  Effect.flatMap(StoreTag, (s) =>
    s.all(statement<Row>(`adhoc:${createHash("sha1").update(sql).digest("hex")}`, sql), params)
  )
