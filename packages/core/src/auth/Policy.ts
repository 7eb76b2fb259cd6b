import { type Actor, Forbidden, NotFound, owns } from "@taskwright/domain"
import { Effect } from "effect"

/**
 * The ownership rule of every resource: 404 when it does not exist, 403 when it is another
 * user's (unless the actor is an admin), otherwise the row.
 */
export const authorizeOwned = <Row extends { readonly owner_id: string }>(
  actor: Actor,
  resource: string,
  id: string | number,
  row: Row | undefined
): Effect.Effect<Row, NotFound | Forbidden> =>
  row === undefined
    ? Effect.fail(NotFound.of(resource, id))
    : owns(actor, row.owner_id)
      ? Effect.succeed(row)
      : Effect.fail(new Forbidden({ message: `${resource} ${id} belongs to another user`, details: { resource, id } }))
