import { Reviews } from "@taskwright/core"
import { Effect } from "effect"
import type { Handlers } from "../http/Handler.js"

export const reviewsHandlers: Handlers<Reviews>["reviews"] = {
  review: ({ actor, path, payload }) => Effect.flatMap(Reviews, (reviews) => reviews.review(actor, path.id, payload)),
  pullRequest: ({ actor, payload }) => Effect.flatMap(Reviews, (reviews) => reviews.pullRequest(actor, payload))
}
