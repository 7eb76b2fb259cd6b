import { Effect } from "effect"
import { type Actor, seesAll } from "../auth/Actor.js"
import { Conflict } from "../domain/Errors.js"
import type { Page } from "../domain/Paging.js"
import { now } from "../domain/Timestamp.js"
import { fn } from "../domain/Traced.js"
import type { StoreError } from "../store/Store.js"
import type { LabelCreate, LabelList } from "./Label.js"
import { LabelsRepo } from "./LabelsRepo.js"

/** Labels: listed per owner (admins see all), unique per owner case-insensitively. */
export class Labels extends Effect.Service<Labels>()("@taskwright/core/Labels", {
  effect: Effect.gen(function* () {
    const repo = yield* LabelsRepo
    return {
      list: fn("Labels.list")(function* (actor: Actor, page: Page) {
        const { labels, total } = yield* repo.list(seesAll(actor) ? null : actor.userId, page.limit, page.offset)
        return { labels, total, limit: page.limit, offset: page.offset } satisfies LabelList
      }),
      create: fn("Labels.create")(function* (actor: Actor, input: LabelCreate) {
        const duplicate = () =>
          new Conflict({
            message: `a label named "${input.name}" already exists`,
            details: { field: "name", name: input.name }
          })
        const existing = yield* repo.findByName(actor.userId, input.name)
        if (existing) return yield* duplicate()
        return yield* repo.insert(actor.userId, input.name, input.color, now()).pipe(
          Effect.catchIf(
            (e: StoreError) => e.kind === "unique",
            () => duplicate()
          )
        )
      })
    }
  })
}) {}
