/**
 * Rows of the event log. Appends are one statement per transaction (the drafts as one JSON array).
 * On PostgreSQL the append first takes a transaction-scoped advisory lock, held until commit: the
 * appends of concurrent transactions are thereby serialised from that point, so ids are handed out
 * in commit order and a reader that has seen id N has seen every id below it. Only the end of each
 * transaction waits, not its other statements. SQLite has one writer at a time anyway.
 */
import type { EventDraft } from "@taskwright/domain"
import { Effect } from "effect"
import { StoreTag, statement, toPgPlaceholders } from "../store/Store.js"
import * as Unit from "../store/Unit.js"

export interface EventRow {
  readonly id: number
  readonly type: string
  readonly owner_id: string
  readonly run_id: string | null
  /** The resource as JSON text. */
  readonly data: string
  readonly created_at: string
}

const columns = "id, type, owner_id, run_id, data, created_at"

/** PostgreSQL: the CTE that takes the event log's order lock, held until commit (see above). */
const ORDER_LOCK = "ordered AS (SELECT pg_advisory_xact_lock(727002))"

/**
 * PostgreSQL: the CTEs that append one event for each row of the CTE `rows`, for a statement that
 * writes a row and its event at once; `type`, `data` and `at` are SQL expressions (`data` over the
 * row's columns as `rows.<column>`, with its `owner_id`). Follow it with the statement's SELECT.
 */
export const pgAppendEventsOf = (rows: string, type: string, data: string, at: string): string =>
  `${ORDER_LOCK}, appended AS (INSERT INTO events (type, owner_id, run_id, data, created_at) SELECT ${type}, ${rows}.owner_id, NULL, ${data}, ${at} FROM ${rows}, ordered)`

/** The oldest events before a time, up to a count; `hint` names SQLite's index (PostgreSQL has none). */
const pruneOldest = (hint: string) =>
  `DELETE FROM events WHERE id IN (SELECT id FROM events${hint} WHERE created_at < ? AND id < (SELECT MAX(id) FROM events) ORDER BY id LIMIT ?)`

/** The log's statements; exported for the tests that read their plans. */
export const eventStatements = {
  append: statement(
    "events.append",
    "INSERT INTO events (type, owner_id, run_id, data, created_at) SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4 FROM json_each(?)",
    `WITH ${ORDER_LOCK}
     INSERT INTO events (type, owner_id, run_id, data, created_at)
     SELECT e ->> 0, e ->> 1, e ->> 2, e ->> 3, e ->> 4 FROM ordered, json_array_elements($1::json) AS e`
  ),
  // The common case, one event: its values as they are, no JSON array to build and take apart.
  appendOne: statement(
    "events.appendOne",
    "INSERT INTO events (type, owner_id, run_id, data, created_at) VALUES (?, ?, ?, ?, ?)",
    `WITH ${ORDER_LOCK}
     INSERT INTO events (type, owner_id, run_id, data, created_at) SELECT $1, $2, $3, $4, $5 FROM ordered`
  ),
  // A batch of a run's log lines as `run.log` events, from the same JSON as the lines' own insert:
  // one more statement per batch, not per line.
  appendLogs: statement(
    "events.appendLogs",
    `INSERT INTO events (type, owner_id, run_id, data, created_at)
       SELECT 'run.log', ?, ?, json_object('run_id', ?, 'seq', value ->> 0, 'timestamp', value ->> 1, 'level', value ->> 2, 'message', value ->> 3), value ->> 1
       FROM json_each(?)`,
    `WITH ${ORDER_LOCK}
     INSERT INTO events (type, owner_id, run_id, data, created_at)
     SELECT 'run.log', $1, $2, json_build_object('run_id', $2::text, 'seq', (e ->> 0)::bigint, 'timestamp', e ->> 1, 'level', e ->> 2, 'message', e ->> 3)::text, e ->> 1
     FROM ordered, json_array_elements($3::json) AS e`
  ),
  after: statement<EventRow>("events.after", `SELECT ${columns} FROM events WHERE id > ? ORDER BY id LIMIT ?`),
  between: statement<EventRow>(
    "events.between",
    `SELECT ${columns} FROM events WHERE id > ? AND id <= ? ORDER BY id LIMIT ?`
  ),
  bounds: statement<{ oldest: number | null; newest: number | null }>(
    "events.bounds",
    "SELECT MIN(id) AS oldest, MAX(id) AS newest FROM events"
  ),
  // The newest event always stays: the log then still says how far it went, so a `since` from
  // before a prune that emptied it is known to have missed events. SQLite, left to itself, walks the
  // whole log by id to honour the ORDER BY (60 ms and its 16 MB page cache filled at 76,000 events,
  // at every start and every ten minutes, when nothing is old); from the time index it reads only
  // the old events' ids (0.2 ms when there are none) and sorts those.
  prune: statement("events.prune", pruneOldest(" INDEXED BY events_created"), toPgPlaceholders(pruneOldest("")))
}

const q = eventStatements

const toRow = (row: EventRow): EventRow => (typeof row.id === "number" ? row : { ...row, id: Number(row.id) })

export class EventsRepo extends Effect.Service<EventsRepo>()("@taskwright/core/EventsRepo", {
  effect: Effect.gen(function* () {
    const store = yield* StoreTag
    return {
      /** Appends the drafts, in order, stamped `at` (last in the change's unit of work). A unit step. */
      *append(drafts: ReadonlyArray<EventDraft>, at: string): Unit.Work<void> {
        if (drafts.length === 0) return
        const [only] = drafts
        if (drafts.length === 1 && only !== undefined) {
          yield* Unit.run(q.appendOne, [only.type, only.ownerId, only.runId ?? null, JSON.stringify(only.data), at])
          return
        }
        yield* Unit.run(q.append, [
          JSON.stringify(drafts.map((d) => [d.type, d.ownerId, d.runId ?? null, JSON.stringify(d.data), at]))
        ])
      },
      /** Appends `run.log` events for log entries (`[seq, timestamp, level, message]` tuples, as JSON). */
      appendLogs: (ownerId: string, runId: string, entries: string) =>
        Effect.asVoid(
          store.run(q.appendLogs, store.dialect === "pg" ? [ownerId, runId, entries] : [ownerId, runId, runId, entries])
        ),
      after: (id: number, limit: number) => Effect.map(store.all(q.after, [id, limit]), (rows) => rows.map(toRow)),
      between: (after: number, upTo: number, limit: number) =>
        Effect.map(store.all(q.between, [after, upTo, limit]), (rows) => rows.map(toRow)),
      bounds: Effect.map(store.get(q.bounds), (row) => ({
        oldest: row?.oldest === null || row?.oldest === undefined ? null : Number(row.oldest),
        newest: row?.newest === null || row?.newest === undefined ? 0 : Number(row.newest)
      })),
      /** Deletes up to `limit` events older than `before`, never the newest; answers how many. */
      prune: (before: string, limit: number) => store.run(q.prune, [before, limit])
    }
  })
}) {}
