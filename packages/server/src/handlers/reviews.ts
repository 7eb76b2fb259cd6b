import type { Handlers } from "@taskwright/api"
import { Reviews } from "@taskwright/core"
import { Effect } from "effect"

export const reviewsHandlers: Handlers<Reviews>["reviews"] = {
  review: ({ actor, path, payload }) => Effect.flatMap(Reviews, (reviews) => reviews.review(actor, path.id, payload))
}
