import {
  type Actor,
  Conflict,
  decoder,
  LabelCreate,
  type LabelList,
  LabelListParams,
  now,
  seesAll
} from "@taskwright/domain"
import { Effect } from "effect"
import { fn } from "../domain/Traced.js"
import { Events } from "../events/Events.js"
import type { StoreError } from "../store/Store.js"
import { LabelsRepo } from "./LabelsRepo.js"

const decodeCreate = decoder(LabelCreate, "body")
const decodeList = decoder(LabelListParams, "query")

/** Labels: listed per owner (admins see all), unique per owner case-insensitively. */
export class Labels extends Effect.Service<Labels>()("@taskwright/core/Labels", {
  effect: Effect.gen(function* () {
    const repo = yield* LabelsRepo
    const events = yield* Events
    return {
      /** `GET /api/labels`; `query` as a client sends it ({@link LabelListParams}). */
      list: fn("Labels.list")(function* (actor: Actor, query: unknown) {
        const page = yield* decodeList(query)
        const { labels, total } = yield* repo.list(seesAll(actor) ? null : actor.userId, page.limit, page.offset)
        return { labels, total, limit: page.limit, offset: page.offset } satisfies LabelList
      }),
      /** `POST /api/labels`; `body` as a client sends it ({@link LabelCreate}). */
      create: fn("Labels.create")(function* (actor: Actor, body: unknown) {
        const input = yield* decodeCreate(body)
        const duplicate = () =>
          new Conflict({
            message: `a label named "${input.name}" already exists`,
            details: { field: "name", name: input.name }
          })
        const existing = yield* repo.findByName(actor.userId, input.name)
        if (existing) return yield* duplicate()
        const at = now()
        return yield* repo
          .transaction(
            Effect.tap(repo.insert(actor.userId, input.name, input.color, at), (label) =>
              events.append([{ type: "label.created", ownerId: actor.userId, data: label }], at)
            )
          )
          .pipe(
            Effect.catchIf(
              (e: StoreError) => e.kind === "unique",
              () => duplicate()
            )
          )
      })
    }
  })
}) {}
