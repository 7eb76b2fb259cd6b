import { Effect } from "effect"
import type { LabelId } from "../domain/Ids.js"
import { newLabelId } from "../domain/Ids.js"
import { StoreTag, statement } from "../store/Store.js"
import type { Label } from "./Label.js"

interface LabelRow {
  readonly id: LabelId
  readonly owner_id: string
  readonly name: string
  readonly color: string
  readonly created_at: string
}

const columns = "id, owner_id, name, color, created_at"
const q = {
  byName: statement<LabelRow>("labels.byName", `SELECT ${columns} FROM labels WHERE owner_id = ? AND name_lower = ?`),
  insert: statement(
    "labels.insert",
    "INSERT INTO labels (id, owner_id, name, name_lower, color, created_at) VALUES (?, ?, ?, ?, ?, ?)"
  ),
  insertIfAbsent: statement(
    "labels.insertIfAbsent",
    "INSERT INTO labels (id, owner_id, name, name_lower, color, created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (owner_id, name_lower) DO NOTHING"
  ),
  listOwn: statement<LabelRow>(
    "labels.listOwn",
    `SELECT ${columns} FROM labels WHERE owner_id = ? ORDER BY name_lower, id LIMIT ? OFFSET ?`
  ),
  listAll: statement<LabelRow>(
    "labels.listAll",
    `SELECT ${columns} FROM labels ORDER BY name_lower, id LIMIT ? OFFSET ?`
  ),
  countOwn: statement<{ total: number }>("labels.countOwn", "SELECT COUNT(*) AS total FROM labels WHERE owner_id = ?"),
  countAll: statement<{ total: number }>("labels.countAll", "SELECT COUNT(*) AS total FROM labels")
}

const toLabel = (row: LabelRow): Label => ({ id: row.id, name: row.name, color: row.color, created_at: row.created_at })

/** Label rows; names are unique per owner, case-insensitively. */
export class LabelsRepo extends Effect.Service<LabelsRepo>()("@taskwright/core/LabelsRepo", {
  effect: Effect.gen(function* () {
    const store = yield* StoreTag
    return {
      findByName: (ownerId: string, name: string) =>
        Effect.map(store.get(q.byName, [ownerId, name.toLowerCase()]), (row) => (row ? toLabel(row) : undefined)),
      insert: (ownerId: string, name: string, color: string, createdAt: string) => {
        const id = newLabelId()
        return Effect.as(store.run(q.insert, [id, ownerId, name, name.toLowerCase(), color, createdAt]), {
          id,
          name,
          color,
          created_at: createdAt
        } satisfies Label)
      },
      /** Creates the label unless one of that name exists; answers the stored one either way. */
      ensure: (ownerId: string, name: string, color: string, createdAt: string) =>
        Effect.gen(function* () {
          yield* store.run(q.insertIfAbsent, [newLabelId(), ownerId, name, name.toLowerCase(), color, createdAt])
          const row = yield* store.get(q.byName, [ownerId, name.toLowerCase()])
          return row ? toLabel(row) : undefined
        }),
      list: (ownerId: string | null, limit: number, offset: number) =>
        Effect.all(
          ownerId === null
            ? [store.all(q.listAll, [limit, offset]), store.get(q.countAll)]
            : [store.all(q.listOwn, [ownerId, limit, offset]), store.get(q.countOwn, [ownerId])]
        ).pipe(Effect.map(([rows, count]) => ({ labels: rows.map(toLabel), total: Number(count?.total ?? 0) })))
    }
  })
}) {}
