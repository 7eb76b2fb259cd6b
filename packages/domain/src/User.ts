import { Schema } from "effect"
import { Count, ShapedText, Text, TrimmedText } from "./Bounds.js"
import { ApiKeyId, UserId } from "./Ids.js"
import { PageFields, PageParams, PageQuery } from "./Paging.js"
import { Scope } from "./Scopes.js"
import { Timestamp, TimestampFromInput } from "./Timestamp.js"

/** The public user shape (spec part 2). */
export const User = Schema.Struct({
  id: UserId,
  email: Text(320, "The user's email address."),
  name: Text(200, "The user's name.")
}).annotations({ description: "A user." })
export type User = typeof User.Type

export const Email = Schema.compose(
  Schema.Trim,
  Schema.String.pipe(
    Schema.maxLength(320),
    Schema.pattern(/^[^\s@]+@[^\s@]+$/, { message: () => "must be an email address" })
  )
)

/** A new user (the CLI's `users create`, the in-process API's `users.create`). */
export const UserCreate = Schema.Struct({
  email: Email,
  name: Schema.compose(
    Schema.Trim,
    Schema.String.pipe(
      Schema.minLength(1, { message: () => "name must not be empty" }),
      Schema.maxLength(200, { message: () => "name must be at most 200 characters" })
    )
  ),
  password: Schema.NullOr(
    Schema.String.pipe(
      Schema.minLength(8, { message: () => "password must be at least 8 characters" }),
      Schema.maxLength(1024, { message: () => "password must be at most 1024 characters" })
    )
  ),
  admin: Schema.Boolean
})

/** An API key as lists show it: never the secret, only its first characters. */
export const ApiKey = Schema.Struct({
  id: ApiKeyId,
  name: Text(100, "What the key is for."),
  prefix: ShapedText(/^twk_[0-9A-Za-z]{6}$/, 10, "The first characters of the secret, to recognise the key."),
  scopes: Schema.Array(Scope).annotations({ description: "What the key may do.", jsonSchema: { maxItems: 20 } }),
  user_id: UserId,
  created_at: Timestamp,
  expires_at: Schema.NullOr(Timestamp),
  revoked_at: Schema.NullOr(Timestamp),
  last_used_at: Schema.NullOr(Timestamp)
}).annotations({ description: "An API key, never with its secret." })
export type ApiKey = typeof ApiKey.Type

const keyExample = {
  id: ApiKeyId.make("key_0Qm7Zc2Wx9Hs4Pd1"),
  name: "CI",
  prefix: "twk_3xQ9aB",
  scopes: ["tasks:read", "tasks:write"],
  user_id: UserId.make("usr_6Vn1bR9eTy3Ka5Lq"),
  created_at: "2026-11-21T23:43:04.123Z",
  expires_at: null,
  revoked_at: null,
  last_used_at: null
} as const

/** Creation and rotation answer the secret, once. */
export const ApiKeyWithSecret = Schema.Struct({
  ...ApiKey.fields,
  secret: ShapedText(
    /^twk_[0-9A-Za-z]{49}$/,
    53,
    "The key's secret: send it as Authorization: Bearer <secret>. Shown in this answer only."
  )
}).annotations({
  description: "An API key with its secret, which no later answer shows again.",
  examples: [{ ...keyExample, secret: `twk_3xQ9aB${"7".repeat(43)}` }]
})
export type ApiKeyWithSecret = typeof ApiKeyWithSecret.Type

/** `POST /api/keys`: a key for the caller (or, for an admin, for `user_id`), never with more scopes than the caller's credential. */
const scopesMessage = () => "scopes must list 1 to 20 scopes"
export const ApiKeyCreate = Schema.Struct({
  name: TrimmedText("a key name must be 1 to 100 characters long", 100, "What the key is for, 1 to 100 characters."),
  scopes: Schema.Array(Scope).pipe(
    Schema.minItems(1, { message: scopesMessage }),
    Schema.maxItems(20, {
      message: scopesMessage,
      title: "scopes",
      description: "What the key may do: never more than the credential creating it holds."
    })
  ),
  expires_at: Schema.optional(
    Schema.NullOr(TimestampFromInput.annotations({ description: "When the key stops working (never when null)." }))
  ),
  user_id: Schema.optional(UserId.annotations({ description: "Admins: the user the key is for." }))
}).annotations({
  description: "A new API key.",
  examples: [{ name: "CI", scopes: ["tasks:read", "tasks:write"], expires_at: "2027-03-01T00:00:00.000Z" }]
})
export type ApiKeyCreate = typeof ApiKeyCreate.Type

/** `GET /api/keys`: the caller's keys, or (admin) another user's with `user_id`. */
export const ApiKeyListParams = Schema.Struct({ user_id: Schema.optional(UserId), ...PageParams })
export type ApiKeyListParams = typeof ApiKeyListParams.Type
/** {@link ApiKeyListParams} as a query string (the contract). */
export const ApiKeyListQuery = Schema.Struct({
  user_id: Schema.optional(UserId.annotations({ description: "Admins: another user's keys." })),
  ...PageQuery
})

export const ApiKeyList = Schema.Struct({
  keys: Schema.Array(ApiKey).annotations({ jsonSchema: { maxItems: 200 } }),
  ...PageFields
}).annotations({
  description: "A page of API keys, never with their secrets.",
  examples: [{ keys: [keyExample], total: 1, limit: 50, offset: 0 }]
})
export type ApiKeyList = typeof ApiKeyList.Type

/** `GET /api/keys/:id/usage`. */
export const KeyUsageReport = Schema.Struct({
  total_requests: Count("Requests made with the key (and its access tokens)."),
  last_used_at: Schema.NullOr(Timestamp),
  last_used_ip: Schema.NullOr(Text(64, "The client address of the last request (IPv4 or IPv6).")),
  by_day: Schema.Array(
    Schema.Struct({
      date: ShapedText(/^\d{4}-\d{2}-\d{2}$/, 10, "A UTC day."),
      count: Count("Requests that day.")
    })
  ).annotations({ description: "Requests per day over the last 90 days, oldest first.", jsonSchema: { maxItems: 90 } })
}).annotations({
  description: "How the key has been used.",
  examples: [
    {
      total_requests: 1204,
      last_used_at: "2026-11-22T08:59:12.004Z",
      last_used_ip: "203.0.113.7",
      by_day: [{ date: "2026-11-22", count: 311 }]
    }
  ]
})
export type KeyUsageReport = typeof KeyUsageReport.Type
