import { defaultColor, type Label, type LabelId, newLabelId, randomBase62 } from "@taskwright/domain"
import { Effect } from "effect"
import { effectAndNow, StoreTag, statement } from "../store/Store.js"
import * as Unit from "../store/Unit.js"

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
  // A request's labels: the stored spelling of those that exist, in one statement (all of them, as
  // a rule); the new ones inserted in one more (and answered, for their events). SQLite needs the
  // WHERE to parse the upsert.
  insertMissing: statement<LabelRow>(
    "labels.insertMissing",
    `INSERT INTO labels (id, owner_id, name, name_lower, color, created_at)
       SELECT value ->> 0, ?, value ->> 1, value ->> 2, value ->> 3, ? FROM json_each(?) WHERE true
       ON CONFLICT (owner_id, name_lower) DO NOTHING RETURNING ${columns}`,
    `INSERT INTO labels (id, owner_id, name, name_lower, color, created_at)
       SELECT e ->> 0, $1, e ->> 1, e ->> 2, e ->> 3, $2 FROM json_array_elements($3::json) AS e
       ON CONFLICT (owner_id, name_lower) DO NOTHING RETURNING ${columns}`
  ),
  canonical: statement<{ name: string; name_lower: string }>(
    "labels.canonical",
    "SELECT name, name_lower FROM labels WHERE owner_id = ? AND name_lower IN (SELECT value FROM json_each(?))",
    "SELECT name, name_lower FROM labels WHERE owner_id = $1 AND name_lower IN (SELECT json_array_elements_text($2::json))"
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

/**
 * The names a request gives, case-insensitively without repeats (the first spelling wins), becoming
 * the stored spellings as `stored` learns them; `missing` are those not yet found.
 */
const spellings = (names: ReadonlyArray<string>) => {
  const wanted = new Map<string, string>()
  for (const name of names) {
    const lower = name.toLowerCase()
    if (!wanted.has(lower)) wanted.set(lower, name)
  }
  const missing = new Map(wanted)
  return {
    wanted,
    missing,
    stored: (rows: ReadonlyArray<{ name: string; name_lower: string }>) => {
      for (const row of rows) {
        wanted.set(row.name_lower, row.name)
        missing.delete(row.name_lower)
      }
    }
  }
}

const toLabel = (row: LabelRow): Label => ({ id: row.id, name: row.name, color: row.color, created_at: row.created_at })

/** Label rows; names are unique per owner, case-insensitively. */
export class LabelsRepo extends Effect.Service<LabelsRepo>()("@taskwright/core/LabelsRepo", {
  effect: Effect.gen(function* () {
    const store = yield* StoreTag
    return {
      transaction: store.transaction,
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
      /**
       * Makes sure the owner has a label of each name (case-insensitively; the first spelling of a
       * name wins), creating the missing ones with the default colour of their name. Answers each
       * name's stored spelling, in order and without repeats, and the labels it created. A unit step.
       */
      *ensureAll(
        ownerId: string,
        names: ReadonlyArray<string>,
        createdAt: string
      ): Unit.Work<{ readonly names: Array<string>; readonly created: Array<Label> }> {
        const { wanted, missing, stored: storedSpelling } = spellings(names)
        storedSpelling(yield* Unit.all(q.canonical, [ownerId, JSON.stringify([...wanted.keys()])]))
        if (missing.size === 0) return { names: [...wanted.values()], created: [] }
        const ids = randomBase62(16 * missing.size)
        const rows = [...missing].map(([lower, name], i) => [
          `lbl_${ids.slice(16 * i, 16 * i + 16)}`,
          name,
          lower,
          defaultColor(name)
        ])
        const created = (yield* Unit.all(q.insertMissing, [ownerId, createdAt, JSON.stringify(rows)])).map(toLabel)
        // Another transaction (PostgreSQL) made some of them meanwhile: theirs is the spelling.
        if (created.length < missing.size) {
          storedSpelling(yield* Unit.all(q.canonical, [ownerId, JSON.stringify([...missing.keys()])]))
        }
        return { names: [...wanted.values()], created }
      },
      /**
       * {@link ensureAll}'s names, as the JSON a task stores, when the owner has a label of each
       * already; else `undefined` (then `ensureAll` creates the missing ones). One read, on its own.
       */
      storedNames: (ownerId: string, names: ReadonlyArray<string>) => {
        const { wanted, missing, stored } = spellings(names)
        return effectAndNow(store, q.canonical, [ownerId, JSON.stringify([...wanted.keys()])], (rows) => {
          stored(rows)
          return missing.size === 0 ? JSON.stringify([...wanted.values()]) : undefined
        })
      },
      list: (ownerId: string | null, limit: number, offset: number) =>
        Effect.all(
          ownerId === null
            ? [store.all(q.listAll, [limit, offset]), store.get(q.countAll)]
            : [store.all(q.listOwn, [ownerId, limit, offset]), store.get(q.countOwn, [ownerId])]
        ).pipe(Effect.map(([rows, count]) => ({ labels: rows.map(toLabel), total: Number(count?.total ?? 0) })))
    }
  })
}) {}
