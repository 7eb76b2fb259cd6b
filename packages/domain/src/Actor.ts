/**
 * Who is making a request: the authenticated user, the credential used and the scopes it
 * carries. Services take the actor explicitly and decide ownership from it.
 */
import type { UserId } from "./Ids.js"
import type { Scope } from "./Scopes.js"

/** How the caller authenticated; `in_process` is a host calling the engine directly (`tw.as(user)`). */
export type CredentialKind = "api_key" | "session" | "jwt" | "in_process"

export interface Actor {
  readonly userId: UserId
  readonly scopes: ReadonlySet<Scope>
  readonly credential: {
    readonly kind: CredentialKind
    readonly id: string
    readonly expiresAt: string | null
    /** The API key behind the credential: the key itself, or the key an access token was made from. */
    readonly keyId?: string
  }
}

/** `admin` implies every scope. */
export const hasScope = (actor: Actor, scope: Scope): boolean => actor.scopes.has("admin") || actor.scopes.has(scope)

/** Admins see and manage every user's resources. */
export const seesAll = (actor: Actor): boolean => actor.scopes.has("admin")

/** May this actor touch a resource owned by `ownerId`? */
export const owns = (actor: Actor, ownerId: string): boolean => seesAll(actor) || actor.userId === ownerId
