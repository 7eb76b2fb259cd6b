import { Schema } from "effect"
import { Scope } from "../auth/Scopes.js"
import { ApiKeyId, UserId } from "../domain/Ids.js"
import { PageParams } from "../domain/Paging.js"
import { Timestamp, TimestampFromInput } from "../domain/Timestamp.js"

/** The public user shape (spec part 2). */
export const User = Schema.Struct({ id: UserId, email: Schema.String, name: Schema.String })
export type User = typeof User.Type

export const Email = Schema.compose(
  Schema.Trim,
  Schema.String.pipe(
    Schema.maxLength(320),
    Schema.pattern(/^[^\s@]+@[^\s@]+$/, { message: () => "must be an email address" })
  )
)

/** An API key as lists show it: never the secret, only its first characters. */
export const ApiKey = Schema.Struct({
  id: ApiKeyId,
  name: Schema.String,
  prefix: Schema.String,
  scopes: Schema.Array(Scope),
  user_id: UserId,
  created_at: Timestamp,
  expires_at: Schema.NullOr(Timestamp),
  revoked_at: Schema.NullOr(Timestamp),
  last_used_at: Schema.NullOr(Timestamp)
})
export type ApiKey = typeof ApiKey.Type

/** Creation and rotation answer the secret, once. */
export const ApiKeyWithSecret = Schema.Struct({ ...ApiKey.fields, secret: Schema.String })
export type ApiKeyWithSecret = typeof ApiKeyWithSecret.Type

/** `POST /api/keys`: a key for the caller (or, for an admin, for `user_id`), never with more scopes than the caller's credential. */
export const ApiKeyCreate = Schema.Struct({
  name: Schema.compose(
    Schema.Trim,
    Schema.String.pipe(
      Schema.minLength(1, { message: () => "a key name must not be empty" }),
      Schema.maxLength(100, { message: () => "a key name must be at most 100 characters" })
    )
  ),
  scopes: Schema.Array(Scope).pipe(
    Schema.minItems(1, { message: () => "choose at least one scope" }),
    Schema.maxItems(20)
  ),
  expires_at: Schema.optional(Schema.NullOr(TimestampFromInput)),
  user_id: Schema.optional(UserId)
})
export type ApiKeyCreate = typeof ApiKeyCreate.Type

/** `GET /api/keys`: the caller's keys, or (admin) another user's with `user_id`. */
export const ApiKeyListParams = Schema.Struct({ user_id: Schema.optional(UserId), ...PageParams })
export type ApiKeyListParams = typeof ApiKeyListParams.Type

export const ApiKeyList = Schema.Struct({
  keys: Schema.Array(ApiKey),
  total: Schema.Number,
  limit: Schema.Number,
  offset: Schema.Number
})
export type ApiKeyList = typeof ApiKeyList.Type
