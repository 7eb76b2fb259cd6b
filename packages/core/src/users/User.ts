import { Schema } from "effect"
import { Scope } from "../auth/Scopes.js"
import { ApiKeyId, UserId } from "../domain/Ids.js"
import { Timestamp } from "../domain/Timestamp.js"

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
