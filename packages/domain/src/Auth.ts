/** What sign-in, sessions and access tokens send and answer. */
import { Schema } from "effect"
import { Count, ShapedText } from "./Bounds.js"
import { UserId } from "./Ids.js"
import { Timestamp } from "./Timestamp.js"
import { User } from "./User.js"

// Messages never quote the value sent: a password must not come back in an error.
const bounded = (what: string, max: number) => {
  const message = () => `must be a non-empty string of at most ${max} characters`
  return Schema.String.annotations({ message: () => `${what} must be a string` }).pipe(
    Schema.minLength(1, { message }),
    Schema.maxLength(max, { message })
  )
}

export const LoginRequest = Schema.Struct({
  email: bounded("email", 320).annotations({ title: "email", description: "The user's email address." }),
  password: bounded("password", 1024).annotations({
    title: "password",
    description: "The user's password.",
    jsonSchema: { maxLength: 1024, format: "password" }
  })
}).annotations({
  description: "Email and password.",
  examples: [{ email: "ada@example.com", password: "correct horse battery staple" }]
})
export type LoginRequest = typeof LoginRequest.Type

export const SessionInfo = Schema.Struct({
  token: ShapedText(
    /^[A-Za-z0-9_-]{43,128}$/,
    128,
    "The session token, also set as the service_session cookie (HttpOnly)."
  ),
  expires_at: Timestamp
}).annotations({ description: "A browser session: 7 days, renewed by refresh." })
export type SessionInfo = typeof SessionInfo.Type

/** The answer of login (spec part 5). */
export const LoginResponse = Schema.Struct({ user: User, session: SessionInfo }).annotations({
  description: "The user and the new session.",
  examples: [
    {
      user: { id: UserId.make("usr_6Vn1bR9eTy3Ka5Lq"), email: "ada@example.com", name: "Ada" },
      session: { token: "Jc8q0Zl2b7WmR1xT9vYp4sKd6hN3aFgE5uQiLoBnMwC", expires_at: "2026-11-28T23:43:04.123Z" }
    }
  ]
})
export type LoginResponse = typeof LoginResponse.Type

/** The answer of refresh: the new token and expiry. */
export const RefreshResponse = Schema.Struct({ session: SessionInfo }).annotations({
  description: "The new session; the old token no longer works.",
  examples: [
    { session: { token: "pX4v0Ty7Qa2Lm9Rb1Kc8Wd3Ne6Hf5Js0Gu7Zi2Ok4Yl", expires_at: "2026-11-29T08:12:40.551Z" } }
  ]
})

/** The body of `POST /api/auth/token`. */
export const TokenRequest = Schema.Struct({
  // The message never quotes the value sent: it may be a secret.
  api_key: Schema.String.annotations({ message: () => "api_key must be a string" }).pipe(
    Schema.maxLength(8192, {
      message: () => "api_key is too long to be an API key",
      title: "API key",
      description: "An API key secret (twk_...)."
    })
  )
}).annotations({ description: "The API key to exchange.", examples: [{ api_key: `twk_3xQ9aB${"7".repeat(43)}` }] })
export type TokenRequest = typeof TokenRequest.Type

/** The answer of `POST /api/auth/token`. */
export const AccessTokenResponse = Schema.Struct({
  access_token: ShapedText(
    /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/,
    4096,
    "A JWT (HS256) carrying the key's scopes: send it as Authorization: Bearer <token>."
  ),
  token_type: Schema.Literal("Bearer"),
  expires_in: Count("Seconds until the token expires.", 1, 3600)
}).annotations({
  description: "A short-lived access token.",
  examples: [
    {
      access_token: "eyJhbGciOiJIUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiJ1c3JfNlZuMWJSOWVUeTNLYTVMcSJ9.c2lnbmF0dXJl",
      token_type: "Bearer",
      expires_in: 3600
    }
  ]
})
export type AccessTokenResponse = typeof AccessTokenResponse.Type
