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
  NotFound,
  PayloadTooLarge,
  RateLimited,
  Unauthorized
} from "@taskwright/core"
import { Schema } from "effect"

type WireError = { readonly _tag: keyof typeof errorWire; readonly message: string; readonly details: ErrorDetails }
type ErrorClass<A extends WireError, I> = Schema.Schema<A, I> &
  (new (props: {
    readonly message: string
    readonly details?: ErrorDetails
  }) => A)

const envelope = <A extends WireError, I>(cls: ErrorClass<A, I>, tag: A["_tag"]) => {
  const { code, status } = errorWire[tag]
  return Schema.transform(
    Schema.Struct({
      error: Schema.Struct({ code: Schema.Literal(code), message: Schema.String, details: ErrorDetails })
    }),
    Schema.typeSchema(cls),
    {
      strict: true,
      decode: ({ error }) => new cls({ message: error.message, details: error.details }),
      encode: (e) => ({ error: { code, message: e.message, details: e.details } })
    }
  ).annotations({ identifier: `${String(tag)}Error`, ...HttpApiSchema.annotations({ status }) })
}

export const BadRequestError = envelope(BadRequest, "BadRequest")
export const UnauthorizedError = envelope(Unauthorized, "Unauthorized")
export const ForbiddenError = envelope(Forbidden, "Forbidden")
export const NotFoundError = envelope(NotFound, "NotFound")
export const ConflictError = envelope(Conflict, "Conflict")
export const PayloadTooLargeError = envelope(PayloadTooLarge, "PayloadTooLarge")
export const RateLimitedError = envelope(RateLimited, "RateLimited")
export const InternalServerError = envelope(InternalError, "InternalError")

/** The envelope as a plain object, for servers that write errors without a schema pass. */
export const errorBody = (e: WireError) => ({
  error: { code: errorWire[e._tag].code, message: e.message, details: e.details }
})
