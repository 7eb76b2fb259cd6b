/**
 * The wire form of every error: `{"error":{"code","message","details"}}`. Each schema decodes
 * the envelope into the core error class and encodes the class back, so the OpenAPI document,
 * the typed client and both servers agree on one shape.
 */
import { HttpApiSchema } from "@effect/platform"
import {
  BadRequest,
  Conflict,
  ErrorDetails,
  errorWire,
  Forbidden,
  InternalError,
  MAX_FIELD_PROBLEMS,
  MAX_MESSAGE_LENGTH,
  MAX_PATH_TEXT,
  NotFound,
  PayloadTooLarge,
  RateLimited,
  ServiceUnavailable,
  Unauthorized
} from "@taskwright/domain"
import { Schema } from "effect"

type WireError = { readonly _tag: keyof typeof errorWire; readonly message: string; readonly details: ErrorDetails }
type ErrorClass<A extends WireError, I> = Schema.Schema<A, I> &
  (new (props: {
    readonly message: string
    readonly details?: ErrorDetails
  }) => A)

const wholeNumber = (description: string, minimum = 0) => ({
  type: "integer",
  format: "int64",
  minimum,
  maximum: Number.MAX_SAFE_INTEGER,
  description
})

/**
 * What `details` may hold, for the reader of the OpenAPI document (the decoder keeps any object:
 * a client must not fail on a detail added later).
 */
const Details = ErrorDetails.annotations({
  jsonSchema: {
    type: "object",
    description: "More about the error; an empty object when there is nothing to add.",
    properties: {
      fields: {
        type: "array",
        maxItems: MAX_FIELD_PROBLEMS,
        description: "400 for a request that does not decode: each offending field, what is wrong with it, in words.",
        items: {
          type: "object",
          required: ["path", "message"],
          properties: {
            path: {
              type: "string",
              maxLength: MAX_PATH_TEXT,
              description: "The field, dotted (labels.0), or body, query or path for the whole of it."
            },
            message: { type: "string", maxLength: MAX_MESSAGE_LENGTH, description: "What is wrong, in words." },
            bounds: {
              type: "object",
              description: "The bounds of the value, when it has any.",
              properties: {
                minLength: wholeNumber("The fewest characters."),
                maxLength: wholeNumber("The most characters."),
                minItems: wholeNumber("The fewest items."),
                maxItems: wholeNumber("The most items."),
                minimum: { type: "number", description: "The smallest value." },
                maximum: { type: "number", description: "The largest value." },
                exclusiveMinimum: { type: "number", description: "The value must be greater than this." },
                exclusiveMaximum: { type: "number", description: "The value must be less than this." },
                integer: { type: "boolean", description: "The value must be a whole number." }
              }
            }
          }
        }
      },
      reason: {
        type: "string",
        pattern: "^[a-z_]+$",
        maxLength: 64,
        description: "Why, as a word a program can test (task_busy, capacity, csrf, invalid_json, ...)."
      },
      required_scope: { type: "string", maxLength: 64, description: "403: the scope the credential lacks." },
      resource: { type: "string", maxLength: 64, description: "404: the kind of resource not found." },
      id: {
        anyOf: [{ type: "string", maxLength: 200 }, wholeNumber("A task id.", 1)],
        description: "404: the id that was not found."
      },
      limit: wholeNumber("413: the most bytes a body may have; 429: requests per minute."),
      retry_after: wholeNumber("429 and 503: seconds to wait before trying again.")
    }
  }
})

const describe = {
  BadRequest: {
    description:
      "The request is malformed: a body that is not a JSON object, a field of the wrong type or out of bounds, an unknown field, a bad id or query value.",
    message: "title must be 1 to 500 characters long",
    details: {
      fields: [
        { path: "title", message: "title must be 1 to 500 characters long", bounds: { minLength: 1, maxLength: 500 } }
      ]
    }
  },
  Unauthorized: {
    description: "No valid credential: missing, malformed, unknown, revoked or expired (WWW-Authenticate: Bearer).",
    message: "authentication required",
    details: {}
  },
  Forbidden: {
    description:
      "The credential lacks the endpoint's scope, the resource is another user's, or a cookie-authenticated change came from another origin.",
    message: "this credential lacks the tasks:write scope",
    details: { required_scope: "tasks:write" }
  },
  NotFound: {
    description: "The addressed resource does not exist.",
    message: "task 42 not found",
    details: { resource: "task", id: 42 }
  },
  Conflict: {
    description: "The resource's state forbids the request.",
    message: "the task has a running agent run; stop it first",
    details: { reason: "run_running" }
  },
  PayloadTooLarge: {
    description:
      "The body is over 1 MiB. Answered before the credential is checked, so it carries no rate-limit headers.",
    message: "the body is over 1048576 bytes",
    details: { limit: 1048576 }
  },
  RateLimited: {
    description: "Over the rate limit: wait Retry-After seconds.",
    message: "rate limit exceeded: 1000 requests per minute per credential; retry after 12 s",
    details: { limit: 1000, retry_after: 12 }
  },
  InternalError: {
    description: "A bug in the service; the message never carries internals.",
    message: "internal server error",
    details: {}
  },
  ServiceUnavailable: {
    description: "The service cannot do this now (its store is unreachable, or runs cannot be sandboxed on this host).",
    message: "the service's store cannot be reached; try again in 5 s",
    details: { reason: "store_unavailable", retry_after: 5 }
  }
} as const satisfies Record<
  // 405 is answered by the router; 410 and 426 only by the event socket, which the document leaves out.
  Exclude<keyof typeof errorWire, "MethodNotAllowed" | "EventsGone" | "UpgradeRequired">,
  { description: string; message: string; details: ErrorDetails }
>

/** What each error means, as the OpenAPI document says it. */
export const errorDescriptions = describe

const envelope = <A extends WireError, I>(cls: ErrorClass<A, I>, tag: keyof typeof describe & A["_tag"]) => {
  const { code, status } = errorWire[tag]
  const { description, message, details } = describe[tag]
  return Schema.transform(
    Schema.Struct({
      error: Schema.Struct({
        code: Schema.Literal(code),
        message: Schema.String.annotations({
          description: "What went wrong, in words.",
          jsonSchema: { maxLength: MAX_MESSAGE_LENGTH }
        }),
        details: Details
      })
    }),
    Schema.typeSchema(cls),
    {
      strict: true,
      decode: ({ error }) => new cls({ message: error.message, details: error.details }),
      encode: (e) => ({ error: { code, message: e.message, details: e.details } })
    }
  ).annotations({
    identifier: `${String(tag)}Error`,
    description,
    examples: [new cls({ message, details })],
    ...HttpApiSchema.annotations({ status })
  })
}

export const BadRequestError = envelope(BadRequest, "BadRequest")
export const UnauthorizedError = envelope(Unauthorized, "Unauthorized")
export const ForbiddenError = envelope(Forbidden, "Forbidden")
export const NotFoundError = envelope(NotFound, "NotFound")
export const ConflictError = envelope(Conflict, "Conflict")
export const PayloadTooLargeError = envelope(PayloadTooLarge, "PayloadTooLarge")
export const RateLimitedError = envelope(RateLimited, "RateLimited")
export const InternalServerError = envelope(InternalError, "InternalError")
export const ServiceUnavailableError = envelope(ServiceUnavailable, "ServiceUnavailable")

/**
 * What any endpoint behind the gate can answer, whatever it does: a malformed request (400), a body
 * over 1 MiB (413), a spent budget (429), a bug (500), a store that cannot be reached (503).
 */
export const RequestErrors = Schema.Union(
  BadRequestError,
  PayloadTooLargeError,
  RateLimitedError,
  InternalServerError,
  ServiceUnavailableError
)

/** The envelope as a plain object, for servers that write errors without a schema pass. */
export const errorBody = (e: WireError) => ({
  error: { code: errorWire[e._tag].code, message: e.message, details: e.details }
})
