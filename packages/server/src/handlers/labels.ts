import { Labels } from "@taskwright/core"
import { Effect } from "effect"
import type { Handlers } from "../http/Handler.js"

export const labelsHandlers: Handlers<Labels>["labels"] = {
  list: ({ actor, urlParams }) => Effect.flatMap(Labels, (labels) => labels.list(actor, urlParams)),
  create: ({ actor, payload }) => Effect.flatMap(Labels, (labels) => labels.create(actor, payload))
}
