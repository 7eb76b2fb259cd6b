import { Users } from "@taskwright/core"
import { Effect } from "effect"
import type { Handlers } from "../http/Handler.js"

/** Answers that carry a secret are never cached. */
const noStore = (request: { setHeader(name: string, value: string): void }) => {
  request.setHeader("cache-control", "no-store")
}

export const keysHandlers: Handlers<Users>["keys"] = {
  list: ({ actor, urlParams }) => Effect.flatMap(Users, (users) => users.listKeysAs(actor, urlParams)),
  create: ({ actor, payload, request }) =>
    Effect.flatMap(Users, (users) => Effect.tap(users.createKeyAs(actor, payload), () => noStore(request))),
  rotate: ({ actor, path, request }) =>
    Effect.flatMap(Users, (users) => Effect.tap(users.rotateKeyAs(actor, path.id), () => noStore(request))),
  revoke: ({ actor, path }) =>
    Effect.flatMap(Users, (users) => Effect.as(users.revokeKeyAs(actor, path.id), { success: true as const })),
  usage: ({ actor, path }) => Effect.flatMap(Users, (users) => users.usageAs(actor, path.id))
}
