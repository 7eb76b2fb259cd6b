import type { Handlers } from "@taskwright/api"
import { Labels } from "@taskwright/core"
import { Effect } from "effect"

export const labelsHandlers: Handlers<Labels>["labels"] = {
  list: ({ actor, urlParams }) => Effect.flatMap(Labels, (labels) => labels.list(actor, urlParams)),
  create: ({ actor, payload }) => Effect.flatMap(Labels, (labels) => labels.create(actor, payload))
}
