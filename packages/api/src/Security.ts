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

/** Bearer authentication (API key or access token) for the Effect-native server and the OpenAPI document. */
export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("@taskwright/api/Authentication", {
  failure: UnauthorizedError,
  provides: CurrentActor,
  security: { bearer: HttpApiSecurity.bearer }
}) {}
