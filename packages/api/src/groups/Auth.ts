import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import {
  AccessTokenResponse,
  LoginRequest,
  LoginResponse,
  RefreshResponse,
  Scope,
  Text,
  Timestamp,
  TokenRequest,
  User,
  UserId
} from "@taskwright/domain"
import { Schema } from "effect"
import {
  ErrorExamples,
  fieldExample,
  invalidJsonExample,
  operationHeaders,
  verifyRetryAfter
} from "../Documentation.js"
import {
  BadRequestError,
  ForbiddenError,
  InternalServerError,
  NotFoundError,
  RequestErrors,
  ServiceUnavailableError,
  UnauthorizedError
} from "../Errors.js"
import { Authentication, ForwardAuth, RequiredScope } from "../Security.js"
import { Success } from "./Common.js"

const scopes = (description: string) =>
  Schema.Array(Scope).annotations({ description, jsonSchema: { maxItems: Scope.literals.length } })

/** `GET /api/auth/me`: who the credential belongs to, what it may do, and what it is. */
export const MeResponse = Schema.Struct({
  user: User,
  scopes: scopes("The scopes the credential holds."),
  credential: Schema.Struct({
    kind: Schema.Literal("api_key", "session", "jwt", "in_process"),
    id: Text(200, "The credential's id: the API key's, the session's or the token's."),
    expires_at: Schema.NullOr(Timestamp),
    /** The API key behind an API key or an access token. */
    key_id: Schema.optional(Text(21, "The API key behind an access token."))
  }).annotations({ description: "The credential of this request." })
}).annotations({
  description: "The caller.",
  examples: [
    {
      user: { id: UserId.make("usr_6Vn1bR9eTy3Ka5Lq"), email: "ada@example.com", name: "Ada" },
      scopes: ["tasks:read", "tasks:write"],
      credential: { kind: "api_key", id: "key_0Qm7Zc2Wx9Hs4Pd1", expires_at: null }
    }
  ]
})
export type MeResponse = typeof MeResponse.Type

/** `?scope=` additionally requires that scope (403 without it). */
export const VerifyParams = Schema.Struct({
  scope: Schema.optional(
    Schema.String.pipe(
      Schema.maxLength(64, {
        message: () => "scope must be at most 64 characters long",
        title: "scope",
        description: "A scope the credential must also hold (403 without it)."
      })
    )
  )
})

/** The body of a verify answer; proxies read the `X-User-Id` and `X-Scopes` headers instead. */
export const VerifyResponse = Schema.Struct({
  user_id: UserId,
  scopes: scopes("The scopes the credential holds, admin spelled out as every scope.")
}).annotations({
  description: "Whose credential it is and what it may do.",
  examples: [{ user_id: UserId.make("usr_6Vn1bR9eTy3Ka5Lq"), scopes: ["tasks:read"] }]
})

const PROVIDER = /^[a-z0-9-]{1,32}$/
export const OAuthPath = Schema.Struct({
  provider: Schema.String.pipe(
    Schema.pattern(PROVIDER, {
      message: () => "must be a provider name like github",
      description: "An identity provider, like github.",
      jsonSchema: { pattern: PROVIDER.source, maxLength: 32 }
    })
  )
})

const cookieHeader = (description: string) => ({
  "Set-Cookie": {
    description,
    schema: { type: "string", maxLength: 400, pattern: "^service_session=" }
  }
})

/** Why logout or refresh refuses a Bearer credential: the server's answer and the documented example. */
export const sessionOnlyMessage = (what: "logout" | "refresh") =>
  `${what} applies to a browser session: send the service_session cookie, not a Bearer credential`

/** The 400 of logout and refresh sent with a Bearer credential: the header named as the field. */
const sessionOnlyExample = (what: "logout" | "refresh") =>
  fieldExample("A Bearer credential, not a session", "authorization", sessionOnlyMessage(what), {
    reason: "not_a_session"
  })

/** Sessions, access tokens and the proxy check (spec part 5). */
export class AuthGroup extends HttpApiGroup.make("auth")
  .add(
    HttpApiEndpoint.post("login", "/api/auth/login")
      .setPayload(LoginRequest)
      .addSuccess(LoginResponse)
      .addError(RequestErrors)
      .addError(UnauthorizedError)
      .addError(ForbiddenError)
      .annotate(RequiredScope, "public")
      .annotate(ErrorExamples, {
        400: [fieldExample("No password", "password", "password is required")],
        403: [
          {
            summary: "A login form of another origin",
            message: "cross-origin login refused: the Origin is not this service's",
            details: { reason: "csrf" }
          }
        ]
      })
      .annotate(OpenApi.Summary, "Sign in")
      .annotate(
        OpenApi.Description,
        "Signs in with email and password: answers the user and a 7-day session, and sets the service_session cookie (HttpOnly; SameSite=Lax; Secure over HTTPS). A wrong email and a wrong password get the same 401; a login form of another origin is 403; too many attempts on one account are 429."
      )
      .annotate(OpenApi.Transform, operationHeaders({ 200: cookieHeader("The session cookie.") }))
  )
  .add(
    HttpApiEndpoint.post("logout", "/api/auth/logout")
      .addSuccess(Success)
      .middleware(Authentication)
      .addError(RequestErrors)
      .addError(ForbiddenError)
      .annotate(RequiredScope, "authenticated")
      .annotate(ErrorExamples, {
        400: [sessionOnlyExample("logout")],
        403: [
          {
            summary: "A cookie-authenticated change from another origin",
            message: "cross-site request refused: a cookie-authenticated change must come from this service's origin",
            details: { reason: "csrf" }
          }
        ]
      })
      .annotate(OpenApi.Summary, "Sign out")
      .annotate(
        OpenApi.Description,
        "Ends the session of the service_session cookie on the server and expires the cookie. A Bearer credential is 400: it is not a session."
      )
      .annotate(OpenApi.Transform, operationHeaders({ 200: cookieHeader("The session cookie, expired.") }))
  )
  .add(
    HttpApiEndpoint.post("refresh", "/api/auth/refresh")
      .addSuccess(RefreshResponse)
      .middleware(Authentication)
      .addError(RequestErrors)
      .addError(ForbiddenError)
      .annotate(RequiredScope, "authenticated")
      .annotate(ErrorExamples, {
        400: [sessionOnlyExample("refresh")],
        403: [
          {
            summary: "A cookie-authenticated change from another origin",
            message: "cross-site request refused: a cookie-authenticated change must come from this service's origin",
            details: { reason: "csrf" }
          }
        ]
      })
      .annotate(OpenApi.Summary, "Renew the session")
      .annotate(
        OpenApi.Description,
        "A new session token and a new 7-day expiry for the session of the cookie, which is replaced; the old token stops working at once."
      )
      .annotate(OpenApi.Transform, operationHeaders({ 200: cookieHeader("The new session cookie.") }))
  )
  .add(
    HttpApiEndpoint.post("token", "/api/auth/token")
      .setPayload(TokenRequest)
      .addSuccess(AccessTokenResponse)
      .addError(RequestErrors)
      .addError(UnauthorizedError)
      .annotate(RequiredScope, "public")
      .annotate(ErrorExamples, { 400: [fieldExample("No key", "api_key", "api_key is required")] })
      .annotate(OpenApi.Summary, "Get an access token")
      .annotate(
        OpenApi.Description,
        "Exchanges an API key for a one-hour access token (a JWT signed HS256) with the key's scopes. Revoking or rotating the key ends its tokens too."
      )
  )
  .add(
    HttpApiEndpoint.get("me", "/api/auth/me")
      .addSuccess(MeResponse)
      .middleware(Authentication)
      .addError(RequestErrors)
      .annotate(RequiredScope, "authenticated")
      .annotate(ErrorExamples, { 400: [invalidJsonExample] })
      .annotate(OpenApi.Summary, "Who am I")
      .annotate(OpenApi.Description, "The caller's user, the scopes the credential holds, and the credential itself.")
  )
  .add(
    HttpApiEndpoint.get("verify", "/api/auth/verify")
      .setUrlParams(VerifyParams)
      .addSuccess(VerifyResponse)
      .middleware(Authentication)
      .addError(BadRequestError)
      .addError(ForbiddenError)
      .addError(InternalServerError)
      .addError(ServiceUnavailableError)
      .annotate(RequiredScope, "authenticated")
      .annotate(ForwardAuth, true)
      .annotate(ErrorExamples, {
        400: [
          fieldExample("A scope parameter too long", "scope", "scope must be at most 64 characters long", {
            bounds: { maxLength: 64 }
          })
        ],
        403: [
          {
            summary: "The credential lacks ?scope=",
            message: "this credential lacks the admin scope",
            details: { required_scope: "admin" }
          }
        ]
      })
      .annotate(OpenApi.Summary, "Check a credential (for reverse proxies)")
      .annotate(
        OpenApi.Description,
        "For nginx auth_request and Traefik ForwardAuth: answers any method and never reads a body. 200 with X-User-Id and X-Scopes for a valid credential; 401 without one; 403 when ?scope= is not held, or when a valid credential's budget is spent. Never 429 (proxies turn it into 500) and never a redirect."
      )
      .annotate(
        OpenApi.Transform,
        operationHeaders({
          200: {
            "X-User-Id": {
              description: "The credential's user.",
              schema: { type: "string", maxLength: 20, pattern: "^usr_[0-9A-Za-z]{16}$" }
            },
            "X-Scopes": {
              description: "The credential's scopes, comma-separated.",
              schema: { type: "string", maxLength: 100, pattern: "^[a-z:,]*$" }
            }
          },
          401: verifyRetryAfter,
          403: verifyRetryAfter
        })
      )
  )
  .add(
    HttpApiEndpoint.get("oauth", "/api/auth/oauth/:provider")
      .setPath(OAuthPath)
      .addSuccess(
        HttpApiSchema.Empty(302).annotations({
          description: "Redirects to the provider (Location), once one is configured; until then every answer is 404."
        })
      )
      .addError(RequestErrors)
      .addError(NotFoundError)
      .annotate(RequiredScope, "public")
      .annotate(ErrorExamples, {
        400: [
          fieldExample("Not a provider name", "provider", "provider must be a provider name like github", {
            bounds: { maxLength: 32 }
          })
        ],
        404: [
          {
            summary: "The provider is not configured",
            message: "sign-in with github is not configured",
            details: { resource: "oauth provider", id: "github" }
          }
        ]
      })
      .annotate(OpenApi.Summary, "Sign in with an identity provider")
      .annotate(
        OpenApi.Description,
        "Announced for a later release: will redirect to the provider. Answers 404 until a provider is configured."
      )
  )
  .annotate(OpenApi.Description, "Sign-in, sessions, access tokens and the check reverse proxies call.") {}
