/**
 * The event log and its subscribers.
 *
 * Writers call {@link Events.append} last in the transaction of their change; once it commits, the
 * hub reads what is new from the log (the log is the source of truth: PostgreSQL's `NOTIFY` from
 * other processes only says "read now") and hands each event, serialised once, to every
 * subscriber allowed to see it. A subscriber that asks for `since` is replayed from the log up to
 * the hub's position at the moment it subscribed, while what arrives live meanwhile waits in its
 * buffer: no gap and no duplicate at the switch. A subscriber whose transport cannot keep up is
 * dropped (its sink answers false), never waited for. Events older than the retention are pruned
 * in the background, in small batches.
 */
import {
  type Actor,
  type EventDraft,
  type EventFamily,
  type EventMessage,
  type EventTopic,
  type EventType,
  familyOf,
  hasScope,
  seesAll
} from "@taskwright/domain"
import { Effect, Runtime, Schedule, Stream } from "effect"
import { TaskwrightConfig } from "../Config.js"
import { type StoreError, StoreTag } from "../store/Store.js"
import { type EventRow, EventsRepo } from "./EventsRepo.js"

/** Events read from the log per statement. */
const PAGE = 1000
/** Events deleted per statement when pruning, so a prune never holds the store for long. */
const PRUNE_BATCH = 5000
const DEFAULT_RETENTION_HOURS = 7 * 24

/** What a subscriber asked for: every family but run logs (no subscription yet), or these topics. */
interface Selection {
  readonly all: boolean
  readonly families: ReadonlySet<EventFamily>
  readonly runs: ReadonlySet<string>
}

const everything: Selection = { all: true, families: new Set(), runs: new Set() }

/** The selection of a subscribe message's topics. */
export const selectionOf = (topics: ReadonlyArray<EventTopic>): Selection => {
  const families = new Set<EventFamily>()
  const runs = new Set<string>()
  for (const topic of topics) {
    if (topic.startsWith("run:")) runs.add(topic.slice(4))
    else families.add(topic as EventFamily)
  }
  return { all: false, families, runs }
}

/** One subscriber, as the hub keeps it. */
interface Subscriber {
  readonly userId: string
  readonly admin: boolean
  readonly projects: boolean
  selection: Selection
  /** Events waiting while the replay runs; null once live. */
  buffer: Array<EventRow> | null
  readonly sink: (message: string, event: EventRow) => boolean
  readonly onDrop: (reason: "overflow" | "gone") => void
  closed: boolean
}

/** The wire form of an event, built once and shared by every subscriber. */
const serialise = (row: EventRow): string =>
  `{"id":${row.id},"type":${JSON.stringify(row.type)},"timestamp":${JSON.stringify(row.created_at)},"data":${row.data}}`

const visible = (sub: Subscriber, row: EventRow): boolean => {
  if (!sub.admin && row.owner_id !== sub.userId) return false
  const family = familyOf[row.type as EventType]
  if (family === "projects" && !sub.projects) return false
  const { selection } = sub
  // `run:<id>` is the one way to a run's log lines, and brings that run's other events too.
  if (row.run_id !== null && selection.runs.has(row.run_id)) return true
  if (row.type === "run.log") return false
  return selection.all || selection.families.has(family)
}

/** A live subscription. */
export interface Subscription {
  /** Replaces the topics (`subscribe` message). */
  readonly select: (topics: ReadonlyArray<EventTopic>) => void
  readonly close: () => void
}

export interface SubscribeOptions {
  readonly actor: Actor
  /** Replay the stored events after this id first. */
  readonly since?: number
  /** What to receive from the start (default: every family but run logs); `select` changes it later. */
  readonly topics?: ReadonlyArray<EventTopic>
  /** Called with each event's wire form; answers false when it cannot take more (the subscriber is dropped). */
  readonly sink: (message: string, event: EventRow) => boolean
  /** Called once when the hub drops the subscriber (too slow, or the store lost what `since` asked for). */
  readonly onDrop?: (reason: "overflow" | "gone") => void
}

export class Events extends Effect.Service<Events>()("@taskwright/core/Events", {
  scoped: Effect.gen(function* () {
    const repo = yield* EventsRepo
    const store = yield* StoreTag
    const config = yield* TaskwrightConfig
    const runtime = yield* Effect.runtime<never>()
    const runFork = Runtime.runFork(runtime)
    const subscribers = new Set<Subscriber>()
    /** The newest event handed to subscribers. */
    let position = 0
    let reading = false
    let again = false

    const deliver = (sub: Subscriber, row: EventRow, message: string) => {
      if (sub.closed || !visible(sub, row)) return
      if (!sub.sink(message, row)) drop(sub, "overflow")
    }

    const drop = (sub: Subscriber, reason: "overflow" | "gone") => {
      if (sub.closed) return
      sub.closed = true
      subscribers.delete(sub)
      sub.onDrop(reason)
    }

    const dispatch = (rows: ReadonlyArray<EventRow>) => {
      for (const row of rows) {
        const message = serialise(row)
        for (const sub of subscribers) {
          if (sub.buffer !== null) sub.buffer.push(row)
          else deliver(sub, row, message)
        }
        position = row.id
      }
    }

    /** Reads everything after `position`, page by page, while anyone listens. */
    const read: Effect.Effect<void> = Effect.gen(function* () {
      while (subscribers.size > 0) {
        const rows = yield* repo.after(position, PAGE)
        dispatch(rows)
        if (rows.length === PAGE) continue
        if (!again) break
        again = false
      }
    }).pipe(
      Effect.catchAll((error) =>
        // The store blinked: try again shortly (what was not read is still in the log).
        Effect.zipRight(Effect.logDebug(`reading events failed: ${error.message}`), Effect.sleep("1 second")).pipe(
          Effect.zipRight(
            Effect.sync(() => {
              again = true
            })
          )
        )
      ),
      Effect.ensuring(
        Effect.sync(() => {
          reading = false
          if (again && subscribers.size > 0) wake()
        })
      )
    )

    const wake = () => {
      if (subscribers.size === 0) return
      if (reading) {
        again = true
        return
      }
      reading = true
      again = false
      runFork(read)
    }
    store.onEventsAppended(wake)

    /** Replays `(since, upTo]` to a subscriber, then hands it what waited meanwhile and makes it live. */
    const replay = (sub: Subscriber, since: number, upTo: number) =>
      Effect.gen(function* () {
        let after = since
        while (after < upTo && !sub.closed) {
          const rows = yield* repo.between(after, upTo, PAGE)
          if (rows.length === 0) break
          for (const row of rows) deliver(sub, row, serialise(row))
          after = rows[rows.length - 1]?.id ?? upTo
        }
        const waiting = sub.buffer ?? []
        sub.buffer = null
        for (const row of waiting) deliver(sub, row, serialise(row))
      })

    const subscribe = (options: SubscribeOptions) =>
      Effect.gen(function* () {
        if (subscribers.size === 0 && !reading) {
          // Nobody was listening, so nothing was read: start from the newest event now.
          position = (yield* repo.bounds).newest
        }
        const { actor } = options
        const sub: Subscriber = {
          userId: actor.userId,
          admin: seesAll(actor),
          projects: hasScope(actor, "projects:read"),
          selection: options.topics === undefined ? everything : selectionOf(options.topics),
          buffer: options.since === undefined ? null : [],
          sink: options.sink,
          onDrop: (reason) => options.onDrop?.(reason),
          closed: false
        }
        subscribers.add(sub)
        if (options.since !== undefined && options.since < position) {
          const since = options.since
          const { oldest } = yield* repo.bounds
          if (oldest !== null && since < oldest - 1) {
            // What was asked for is gone (older than the retention): say so rather than leave a gap.
            sub.closed = true
            subscribers.delete(sub)
            options.onDrop?.("gone")
            return { select: () => {}, close: () => {} } satisfies Subscription
          }
          yield* replay(sub, since, position)
        } else if (sub.buffer !== null) {
          const waiting = sub.buffer
          sub.buffer = null
          for (const row of waiting) deliver(sub, row, serialise(row))
        }
        return {
          select: (topics) => {
            sub.selection = selectionOf(topics)
          },
          close: () => {
            sub.closed = true
            subscribers.delete(sub)
          }
        } satisfies Subscription
      })

    // Pruning: events older than the retention go, a batch at a time, in the background.
    const retentionMs = (config.eventRetentionHours ?? DEFAULT_RETENTION_HOURS) * 3_600_000
    const prune = Effect.gen(function* () {
      const before = new Date(Date.now() - retentionMs).toISOString()
      while ((yield* repo.prune(before, PRUNE_BATCH)) === PRUNE_BATCH) yield* Effect.sleep("10 millis")
    }).pipe(Effect.catchAll((error) => Effect.logWarning(`pruning old events failed: ${error.message}`)))
    yield* Effect.forkScoped(Effect.repeat(prune, Schedule.spaced("10 minutes")))
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        for (const sub of subscribers) drop(sub, "gone")
      })
    )

    return {
      /**
       * Appends events for a change; call it last in the change's transaction. Subscribers hear of
       * them once (and only if) the transaction commits.
       */
      append: (drafts: ReadonlyArray<EventDraft>, at: string) =>
        Effect.zipRight(repo.append(drafts, at), store.afterCommit(wake)),
      /** Appends `run.log` events for a batch of a run's log entries (their JSON, as the log stores them). */
      appendLogs: (ownerId: string, runId: string, entries: string) =>
        Effect.zipRight(repo.appendLogs(ownerId, runId, entries), store.afterCommit(wake)),
      subscribe,
      /** The events an actor may see, as a stream (`since` replays first); `topics` as a subscribe message's. */
      stream: (
        actor: Actor,
        options: { readonly since?: number; readonly topics?: ReadonlyArray<EventTopic>; readonly buffer?: number } = {}
      ): Stream.Stream<EventMessage, StoreError> =>
        Stream.asyncScoped<EventMessage, StoreError>(
          (emit) =>
            Effect.acquireRelease(
              subscribe({
                actor,
                ...(options.since === undefined ? {} : { since: options.since }),
                ...(options.topics === undefined ? {} : { topics: options.topics }),
                sink: (message) => {
                  void emit.single(JSON.parse(message) as EventMessage)
                  return true
                },
                onDrop: () => {
                  void emit.end()
                }
              }),
              (subscription) => Effect.sync(subscription.close)
            ),
          options.buffer ?? 10_000
        ),
      /** The newest event id handed out (0 when none). */
      position: Effect.sync(() => position)
    }
  })
}) {}
