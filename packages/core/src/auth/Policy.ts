import { type Actor, Forbidden, hasScope, NotFound, owns, type Scope } from "@taskwright/domain"
import { Effect } from "effect"

/**
 * The ownership rule of every resource: 404 when it does not exist, 403 when it is another
 * user's (unless the actor is an admin); `undefined` when the actor may touch it.
 */
export const ownershipError = (
  actor: Actor,
  resource: string,
  id: string | number,
  row: { readonly owner_id: string } | undefined
): NotFound | Forbidden | undefined =>
  row === undefined
    ? NotFound.of(resource, id)
    : owns(actor, row.owner_id)
      ? undefined
      : new Forbidden({ message: `${resource} ${id} belongs to another user`, details: { resource, id } })

/** {@link ownershipError} as an Effect answering the row. */
export const authorizeOwned = <Row extends { readonly owner_id: string }>(
  actor: Actor,
  resource: string,
  id: string | number,
  row: Row | undefined
): Effect.Effect<Row, NotFound | Forbidden> => {
  if (row === undefined) return Effect.fail(NotFound.of(resource, id))
  const error = ownershipError(actor, resource, id, row)
  return error === undefined ? Effect.succeed(row) : Effect.fail(error)
}

/**
 * The scope rule of every operation: `"authenticated"` and `"public"` need none; otherwise the
 * credential must hold the scope (`admin` holds them all), or it is a 403 naming the scope.
 */
export const requireScope = (
  actor: Actor,
  requirement: Scope | "authenticated" | "public"
): Effect.Effect<void, Forbidden> =>
  requirement === "authenticated" || requirement === "public" || hasScope(actor, requirement)
    ? Effect.void
    : Effect.fail(
        new Forbidden({
          message: `this credential lacks the ${requirement} scope`,
          details: { required_scope: requirement }
        })
      )
