import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import {
  AccessTokenResponse,
  LoginRequest,
  LoginResponse,
  RefreshResponse,
  Scope,
  Timestamp,
  TokenRequest,
  User,
  UserId
} from "@taskwright/core"
import { Schema } from "effect"
import { NotFoundError } from "../Errors.js"
import { Authentication, ForwardAuth, RequiredScope } from "../Security.js"
import { Success } from "./Common.js"

/** `GET /api/auth/me`: who the credential belongs to, what it may do, and what it is. */
export const MeResponse = Schema.Struct({
  user: User,
  scopes: Schema.Array(Scope),
  credential: Schema.Struct({
    kind: Schema.Literal("api_key", "session", "jwt"),
    id: Schema.String,
    expires_at: Schema.NullOr(Timestamp),
    /** The API key behind an API key or an access token. */
    key_id: Schema.optional(Schema.String)
  })
})
export type MeResponse = typeof MeResponse.Type

/** `?scope=` additionally requires that scope (403 without it). */
export const VerifyParams = Schema.Struct({ scope: Schema.optional(Schema.String.pipe(Schema.maxLength(64))) })

/** The body of a verify answer; proxies read the `X-User-Id` and `X-Scopes` headers instead. */
export const VerifyResponse = Schema.Struct({ user_id: UserId, scopes: Schema.Array(Scope) })

export const OAuthPath = Schema.Struct({
  provider: Schema.String.pipe(
    Schema.pattern(/^[a-z0-9-]{1,32}$/, { message: () => "must be a provider name like github" })
  )
})

/** Sessions, access tokens and the proxy check (spec part 5). */
export class AuthGroup extends HttpApiGroup.make("auth")
  .add(
    HttpApiEndpoint.post("login", "/api/auth/login")
      .setPayload(LoginRequest)
      .addSuccess(LoginResponse)
      .annotate(RequiredScope, "public")
      .annotate(
        OpenApi.Summary,
        "Sign in with email and password: answers the session and sets the service_session cookie"
      )
  )
  .add(
    HttpApiEndpoint.post("logout", "/api/auth/logout")
      .addSuccess(Success)
      .middleware(Authentication)
      .annotate(RequiredScope, "authenticated")
      .annotate(OpenApi.Summary, "End the session of the cookie (server-side) and expire the cookie")
  )
  .add(
    HttpApiEndpoint.post("refresh", "/api/auth/refresh")
      .addSuccess(RefreshResponse)
      .middleware(Authentication)
      .annotate(RequiredScope, "authenticated")
      .annotate(OpenApi.Summary, "A new session token and 7-day expiry; the old token stops working")
  )
  .add(
    HttpApiEndpoint.post("token", "/api/auth/token")
      .setPayload(TokenRequest)
      .addSuccess(AccessTokenResponse)
      .annotate(RequiredScope, "public")
      .annotate(OpenApi.Summary, "Exchange an API key for a one-hour access token (JWT, HS256)")
  )
  .add(
    HttpApiEndpoint.get("me", "/api/auth/me")
      .addSuccess(MeResponse)
      .middleware(Authentication)
      .annotate(RequiredScope, "authenticated")
      .annotate(OpenApi.Summary, "The caller: user, scopes and credential")
  )
  .add(
    HttpApiEndpoint.get("verify", "/api/auth/verify")
      .setUrlParams(VerifyParams)
      .addSuccess(VerifyResponse)
      .middleware(Authentication)
      .annotate(RequiredScope, "authenticated")
      .annotate(ForwardAuth, true)
      .annotate(
        OpenApi.Description,
        "For reverse proxies (nginx auth_request, Traefik ForwardAuth): any method, no body read. 200 with X-User-Id and X-Scopes for a valid credential; 401 without one; 403 when ?scope= is not held. Never 429 or a redirect."
      )
  )
  .add(
    HttpApiEndpoint.get("oauth", "/api/auth/oauth/:provider")
      .setPath(OAuthPath)
      .addSuccess(Schema.Struct({}))
      .addError(NotFoundError)
      .annotate(RequiredScope, "public")
      .annotate(OpenApi.Summary, "Third-party sign-in: 404 until a provider is configured")
  ) {}
