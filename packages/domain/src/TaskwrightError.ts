/**
 * The one error class a Promise-based caller sees (the in-process API, the typed client): the HTTP
 * error envelope `{error:{code, message, details}}` as a thrown value, with the status it has over
 * HTTP. `instanceof TaskwrightError` works across faces.
 */
import { type ErrorDetails, errorWire } from "./Errors.js"

export class TaskwrightError extends Error {
  override readonly name = "TaskwrightError"
  constructor(
    /** The envelope's `code`: `BAD_REQUEST`, `NOT_FOUND`, `FORBIDDEN`, ... */
    readonly code: string,
    /** The HTTP status the same failure has over HTTP. */
    readonly status: number,
    message: string,
    /** The envelope's `details`: `fields` for a bad request, `reason` for a conflict, ... */
    readonly details: ErrorDetails = {}
  ) {
    super(message)
  }

  /** The error as the HTTP API answers it. */
  toJSON(): { readonly error: { readonly code: string; readonly message: string; readonly details: ErrorDetails } } {
    return { error: { code: this.code, message: this.message, details: this.details } }
  }

  /** From a tagged domain error (`NotFound`, `BadRequest`, ...). */
  static fromTagged(error: {
    readonly _tag: keyof typeof errorWire
    readonly message: string
    readonly details: ErrorDetails
  }): TaskwrightError {
    const { code, status } = errorWire[error._tag]
    return new TaskwrightError(code, status, error.message, error.details)
  }

  /** From an HTTP error envelope and its status. */
  static fromEnvelope(status: number, body: unknown): TaskwrightError {
    const error = (body as { readonly error?: { code?: unknown; message?: unknown; details?: unknown } } | null)?.error
    return typeof error?.code === "string" && typeof error.message === "string"
      ? new TaskwrightError(error.code, status, error.message, (error.details ?? {}) as ErrorDetails)
      : new TaskwrightError("INTERNAL_ERROR", status, `unexpected answer with status ${status}`, {})
  }
}
