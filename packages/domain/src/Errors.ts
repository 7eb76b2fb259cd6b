/**
 * The errors a Taskwright service can return. Each maps to one code of the spec's error table;
 * the HTTP contract wraps them in the `{error:{code,message,details}}` envelope.
 */
import { Schema } from "effect"
import type { EventsGone } from "./Event.js"

export const ErrorDetails = Schema.Record({ key: Schema.String, value: Schema.Unknown })
export type ErrorDetails = typeof ErrorDetails.Type

const fields = {
  message: Schema.String,
  details: Schema.optionalWith(ErrorDetails, { default: () => ({}) })
}

/** 400: the request is malformed; `details.fields` lists `{path, message}` per offending field. */
export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", fields) {
  static field(path: string, message: string): BadRequest {
    return new BadRequest({ message: `${path}: ${message}`, details: { fields: [{ path, message }] } })
  }
}
/** 401: no valid credential. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", fields) {}
/** 403: missing scope, or another user's resource. */
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", fields) {}
/** 404: the addressed resource does not exist. */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields) {
  static of(resource: string, id: string | number): NotFound {
    return new NotFound({ message: `${resource} ${id} not found`, details: { resource, id } })
  }
}
/** 405: the path exists, but not for this method (`details.allow` lists those it has). */
export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()("MethodNotAllowed", fields) {}
/** 426: `GET /api/events` without `Upgrade: websocket` (`details.upgrade` names the protocol). */
export class UpgradeRequired extends Schema.TaggedError<UpgradeRequired>()("UpgradeRequired", fields) {}
/** 409: the resource's state forbids the request. */
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", fields) {}
/** 413: the body is over the limit. */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", fields) {}
/** 429: over the rate limit. */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", fields) {}
/** 500: a bug; the message never carries internals. */
export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", fields) {}
/**
 * 503: the service cannot do this now (the store is unreachable, or agent runs cannot be
 * sandboxed on this host); `details.retry_after` (seconds) when trying again later may help.
 */
export class ServiceUnavailable extends Schema.TaggedError<ServiceUnavailable>()("ServiceUnavailable", fields) {}

/** Every error a client can see. */
export type ApiError =
  | BadRequest
  | Unauthorized
  | Forbidden
  | NotFound
  | MethodNotAllowed
  | Conflict
  | EventsGone
  | PayloadTooLarge
  | RateLimited
  | InternalError
  | ServiceUnavailable
  | UpgradeRequired

/**
 * Wire code and status of each error, from the spec's table (plus METHOD_NOT_ALLOWED, GONE,
 * PAYLOAD_TOO_LARGE, UPGRADE_REQUIRED and SERVICE_UNAVAILABLE): every face answers from here.
 */
export const errorWire = {
  BadRequest: { code: "BAD_REQUEST", status: 400 },
  Unauthorized: { code: "UNAUTHORIZED", status: 401 },
  Forbidden: { code: "FORBIDDEN", status: 403 },
  NotFound: { code: "NOT_FOUND", status: 404 },
  MethodNotAllowed: { code: "METHOD_NOT_ALLOWED", status: 405 },
  Conflict: { code: "CONFLICT", status: 409 },
  // An event socket closes with 4410 instead; a Promise subscriber gets the envelope.
  EventsGone: { code: "GONE", status: 410 },
  PayloadTooLarge: { code: "PAYLOAD_TOO_LARGE", status: 413 },
  UpgradeRequired: { code: "UPGRADE_REQUIRED", status: 426 },
  RateLimited: { code: "RATE_LIMITED", status: 429 },
  InternalError: { code: "INTERNAL_ERROR", status: 500 },
  ServiceUnavailable: { code: "SERVICE_UNAVAILABLE", status: 503 }
} as const satisfies Record<ApiError["_tag"], { code: string; status: number }>
