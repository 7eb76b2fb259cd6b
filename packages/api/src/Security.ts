/**
 * Who may call what. Every endpoint carries a {@link RequiredScope} annotation (the scope
 * table of DECISIONS, next to the endpoint it governs); the servers refuse to start if one is
 * missing, so a new endpoint cannot forget it.
 */
import { HttpApiMiddleware, HttpApiSecurity, OpenApi } from "@effect/platform"
import type { Actor, Scope } from "@taskwright/domain"
import { Context } from "effect"
import { UnauthorizedError } from "./Errors.js"

/** A scope, `authenticated` (any valid credential) or `public` (no credential). */
export type Requirement = Scope | "authenticated" | "public"

export class RequiredScope extends Context.Tag("@taskwright/api/RequiredScope")<RequiredScope, Requirement>() {}

/** The authenticated caller of the current request. */
export class CurrentActor extends Context.Tag("@taskwright/api/CurrentActor")<CurrentActor, Actor>() {}

/**
 * Marks the endpoint reverse proxies call (`/api/auth/verify`, nginx `auth_request`, Traefik
 * ForwardAuth): servers answer it for any method, never read a body, and never answer 429 or a
 * redirect.
 */
export class ForwardAuth extends Context.Tag("@taskwright/api/ForwardAuth")<ForwardAuth, true>() {}

/**
 * The credentials every authenticated endpoint takes, any one of them: an API key or an access
 * token as a Bearer credential, or the `service_session` cookie set by login (a cookie-authenticated
 * change must come from the service's own origin). The `Gate` in the core checks them, for every
 * face; the schemes here name them in the OpenAPI document.
 */
export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("@taskwright/api/Authentication", {
  failure: UnauthorizedError,
  provides: CurrentActor,
  security: {
    apiKey: HttpApiSecurity.bearer.pipe(
      HttpApiSecurity.annotate(
        OpenApi.Description,
        "An API key (twk_...) as Authorization: Bearer <key>. Create one on the settings page or with taskwright keys create; it carries the scopes chosen at creation."
      )
    ),
    accessToken: HttpApiSecurity.bearer.pipe(
      HttpApiSecurity.annotate(OpenApi.Format, "JWT"),
      HttpApiSecurity.annotate(
        OpenApi.Description,
        "A one-hour access token from POST /api/auth/token, as Authorization: Bearer <token>: a JWT signed HS256 that carries its key's scopes, issued and checked as RFC8725 advises (the algorithm pinned, exp, iat and sub required, revoked with its key)."
      )
    ),
    session: HttpApiSecurity.apiKey({ in: "cookie", key: "service_session" }).pipe(
      HttpApiSecurity.annotate(
        OpenApi.Description,
        "The browser session cookie set by POST /api/auth/login (HttpOnly, SameSite=Lax, 7 days). A change it authenticates must carry this service's Origin."
      )
    )
  }
}) {}
