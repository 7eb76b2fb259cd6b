/**
 * Calls to the HTTP API: same origin, the session cookie, JSON in and out. The browser adds
 * `Origin` to every state-changing fetch, which is what the API's CSRF check asks of a cookie.
 */
import type { Page } from "./types.js"

export interface FieldError {
  readonly path: string
  readonly message: string
}

/** An answer outside 2xx, from the API's `{"error":{"code","message","details"}}` envelope. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Readonly<Record<string, unknown>>
  ) {
    super(message)
  }

  /** Validation failures, one per field (`details.fields`). */
  get fields(): ReadonlyArray<FieldError> {
    const fields = this.details.fields
    return Array.isArray(fields) ? fields.filter(isFieldError) : []
  }

  /** The message about `name` (or one of its elements, `labels.2`), if the API named that field. */
  fieldMessage(name: string): string | undefined {
    return this.fields.find((f) => f.path === name || f.path.startsWith(`${name}.`))?.message
  }
}

const isFieldError = (u: unknown): u is FieldError =>
  typeof u === "object" && u !== null && typeof (u as FieldError).path === "string" && "message" in u

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null

let unauthorized: () => void = () => {}

/** What to do when a call answers 401: the session is gone, so the app shows Sign in. */
export const onUnauthorized = (handler: () => void): void => {
  unauthorized = handler
}

/** The error's message for a person, whatever was thrown. */
export const messageOf = (error: unknown): string =>
  error instanceof Error ? error.message : "Something went wrong. Try again."

export const api = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
  let res: Response
  try {
    res = await fetch(path, {
      method,
      credentials: "same-origin",
      headers: body === undefined ? { accept: "application/json" } : { "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
  } catch {
    throw new ApiError(0, "NETWORK", "The server cannot be reached. Check your connection and try again.", {})
  }
  const text = await res.text()
  let parsed: unknown
  try {
    parsed = text === "" ? undefined : JSON.parse(text)
  } catch {
    parsed = undefined
  }
  if (res.ok) return parsed as T
  const error = isRecord(parsed) && isRecord(parsed.error) ? parsed.error : {}
  const apiError = new ApiError(
    res.status,
    typeof error.code === "string" ? error.code : `HTTP_${res.status}`,
    typeof error.message === "string" ? error.message : `The server answered ${res.status}.`,
    isRecord(error.details) ? error.details : {}
  )
  if (res.status === 401 && !path.startsWith("/api/auth/")) unauthorized()
  throw apiError
}

/** The API's largest `limit`. */
export const PAGE_SIZE = 200

/**
 * Every item of a paged list: the first `ahead` pages at once, then, the total known, the rest at
 * once. A list that is often long (the board's tasks) asks for more than one page ahead, saving a
 * round trip for a page that usually exists.
 */
export const allPages = async <K extends string, T>(path: string, key: K, ahead = 1): Promise<Array<T>> => {
  const sep = path.includes("?") ? "&" : "?"
  type Answer = Page & Record<K, Array<T>>
  const page = (offset: number) => api<Answer>("GET", `${path}${sep}limit=${PAGE_SIZE}&offset=${offset}`)
  const first = page(0)
  const next = Array.from({ length: Math.max(0, ahead - 1) }, (_, i) => page((i + 1) * PAGE_SIZE))
  // Awaited below only if the first page answers: a failure of theirs is not left unhandled.
  for (const p of next) p.catch(() => {})
  const { total } = await first
  for (let offset = (next.length + 1) * PAGE_SIZE; offset < total; offset += PAGE_SIZE) next.push(page(offset))
  return (await Promise.all([first, ...next])).flatMap((p) => p[key])
}
