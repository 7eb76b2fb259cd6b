/**
 * Who may call what. Every endpoint carries a {@link RequiredScope} annotation (the scope
 * table of DECISIONS, next to the endpoint it governs); the servers refuse to start if one is
 * missing, so a new endpoint cannot forget it.
 */
import { HttpApiMiddleware, HttpApiSecurity } from "@effect/platform"
import type { Actor, Scope } from "@taskwright/core"
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
 * Bearer authentication (API key or access token) for the Effect-native server and the OpenAPI
 * document. The fast server also accepts the `service_session` cookie set by login (with its
 * CSRF check); see `Gate` in the core.
 */
export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("@taskwright/api/Authentication", {
  failure: UnauthorizedError,
  provides: CurrentActor,
  security: { bearer: HttpApiSecurity.bearer }
}) {}
