/**
 * The event log and its subscribers.
 *
 * Writers call {@link Events.append} last in the transaction of their change; once it commits, the
 * hub reads what is new from the log (the log is the source of truth: PostgreSQL's `NOTIFY` from
 * other processes only says "read now") and hands each event, serialised once, to every
 * subscriber allowed to see it.
 *
 * Each subscriber has a cursor, the newest id it was handed or passed over, and is never handed an
 * id at or below it: a duplicate is impossible whatever the timing (a `since` ahead of this
 * process, a replay overlapping what went live). A subscriber with `since` reads the log after its
 * cursor, page by page, until it has reached what the hub has dispatched, and turns live in the
 * same synchronous step that sees it caught up: no gap. What is dispatched meanwhile stays in the
 * log, not in memory. A subscriber whose transport cannot keep up is dropped (its sink answers
 * false), never waited for.
 *
 * The hub follows the log only while someone listens. The first subscriber starts it at the log's
 * newest id (subscribers arriving meanwhile share that one query) and it then reads what was
 * committed while the query ran. Events older than the retention are pruned in the background, in
 * small batches; the newest event is always kept, so the log still says how far it went.
 */
import {
  type Actor,
  type BadRequest,
  decoder,
  type EventDraft,
  type EventFamily,
  type EventMessage,
  EventSubscription,
  EventsGone,
  EventsOverflow,
  type EventTopic,
  type EventType,
  Forbidden,
  familyOf,
  hasScope,
  seesAll
} from "@taskwright/domain"
import { Deferred, Effect, Exit, FiberId, Runtime, Schedule, Stream } from "effect"
import { TaskwrightConfig } from "../Config.js"
import { type StoreError, StoreTag } from "../store/Store.js"
import * as Unit from "../store/Unit.js"
import { type EventRow, EventsRepo } from "./EventsRepo.js"

/** Events read from the log per statement. */
const PAGE = 1000
/** Events deleted per statement when pruning, so a prune never holds the store for long. */
const PRUNE_BATCH = 5000
const DEFAULT_RETENTION_HOURS = 7 * 24
/** Events an {@link Events.stream} consumer may leave untaken before it fails with {@link EventsOverflow}. */
const STREAM_BUFFER = 10_000

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

/** Why the hub let a subscriber go: it did not keep up, or the hub itself stopped (the service is closing). */
export type DropReason = "overflow" | "closed"

/** One subscriber, as the hub keeps it. */
interface Subscriber {
  readonly userId: string
  admin: boolean
  projects: boolean
  selection: Selection
  /** The newest id handed out or passed over: nothing at or below it is handed out again. */
  cursor: number
  /**
   * How it is joining, the hub's dispatches passing it by meanwhile: at the hub's start (no
   * `since`), or by reading the log after its cursor (`since`); null once live.
   */
  joining: "start" | "replay" | null
  readonly sink: (message: string, event: EventRow) => boolean
  readonly onDrop: (reason: DropReason) => void
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
  /** What the subscriber may see, from its credential checked again (an admin who lost admin sees only their own). */
  readonly refresh: (actor: Actor) => void
  readonly close: () => void
}

export interface SubscribeOptions {
  readonly actor: Actor
  /** Replay the stored events after this id first: a whole number from 0 (or its digits, as a query carries it). */
  readonly since?: unknown
  /** What to receive from the start (default: every family but run logs); `select` changes it later. */
  readonly topics?: unknown
  /** Called with each event's wire form; answers false when it cannot take more (the subscriber is dropped). */
  readonly sink: (message: string, event: EventRow) => boolean
  /** Called once when the hub drops the subscriber (too slow, or the hub stopped). */
  readonly onDrop?: (reason: DropReason) => void
}

/** Why a subscription cannot start: a bad `since` or topic (400), no `tasks:read` (403), a `since` the log no longer holds. */
export type SubscribeError = BadRequest | Forbidden | EventsGone | StoreError

const decodeSubscription = decoder(EventSubscription, "query")

const missingScope = new Forbidden({
  message: "this credential lacks the tasks:read scope",
  details: { required_scope: "tasks:read" }
})

export class Events extends Effect.Service<Events>()("@taskwright/core/Events", {
  scoped: Effect.gen(function* () {
    const repo = yield* EventsRepo
    const store = yield* StoreTag
    const config = yield* TaskwrightConfig
    const runtime = yield* Effect.runtime<never>()
    const runFork = Runtime.runFork(runtime)
    const subscribers = new Set<Subscriber>()
    /** The newest event dispatched; null while nobody listens (the hub follows nothing then). */
    let position: number | null = null
    /** The query that starts the hub following, shared by the subscribers that arrive meanwhile. */
    let starting: Deferred.Deferred<void, StoreError> | undefined
    let reading = false
    let again = false

    const deliver = (sub: Subscriber, row: EventRow, message: string) => {
      if (sub.closed || row.id <= sub.cursor) return
      sub.cursor = row.id
      if (visible(sub, row) && !sub.sink(message, row)) drop(sub, "overflow")
    }

    const remove = (sub: Subscriber) => {
      sub.closed = true
      subscribers.delete(sub)
      // Nobody listens: stop following, so the next subscriber starts from the newest event, not from here.
      if (subscribers.size === 0) position = null
    }

    const drop = (sub: Subscriber, reason: DropReason) => {
      if (sub.closed) return
      remove(sub)
      sub.onDrop(reason)
    }

    const dispatch = (rows: ReadonlyArray<EventRow>) => {
      for (const row of rows) {
        const message = serialise(row)
        for (const sub of subscribers) if (sub.joining === null) deliver(sub, row, message)
        position = row.id
      }
    }

    /** Reads everything after `position`, page by page, while anyone listens. */
    const read: Effect.Effect<void> = Effect.gen(function* () {
      while (subscribers.size > 0 && position !== null) {
        const from = position
        const rows = yield* repo.after(from, PAGE)
        // The hub stopped and started again meanwhile: read from where it stands now.
        if (position !== from) continue
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
      // Not following yet: the start reads what was committed meanwhile once it knows where it stands.
      if (subscribers.size === 0 || position === null) return
      if (reading) {
        again = true
        return
      }
      reading = true
      again = false
      runFork(read)
    }
    store.onEventsAppended(wake)

    function* appendWork(drafts: ReadonlyArray<EventDraft>, at: string): Unit.Work<void> {
      yield* repo.append(drafts, at)
      yield* Unit.onCommit(wake)
    }

    /** Makes the hub follow the log, from its newest event, if it does not already. */
    const follow: Effect.Effect<void, StoreError> = Effect.suspend(() => {
      if (position !== null) return Effect.void
      if (starting !== undefined) return Deferred.await(starting)
      const started = Deferred.unsafeMake<void, StoreError>(FiberId.none)
      starting = started
      return repo.bounds.pipe(
        Effect.tap(({ newest }) => {
          if (subscribers.size === 0) return Effect.void
          position = newest
          // Those without `since` go live here, in the step that fixes where the hub starts.
          for (const sub of subscribers) {
            if (sub.joining === "start") {
              sub.cursor = newest
              sub.joining = null
            }
          }
          wake()
          return Effect.void
        }),
        Effect.onExit((exit) =>
          Effect.suspend(() => {
            starting = undefined
            return Deferred.done(started, Exit.asVoid(exit))
          })
        ),
        // Others wait on this answer: the caller going away must not take it from them.
        Effect.uninterruptible
      )
    })

    /** Hands a subscriber the log after its cursor until it has reached what the hub dispatched, then makes it live. */
    const catchUp = (sub: Subscriber) =>
      Effect.gen(function* () {
        while (!sub.closed) {
          const upTo = position ?? sub.cursor
          if (sub.cursor >= upTo) {
            // No await between this check and the switch: nothing is dispatched in between.
            sub.joining = null
            return
          }
          const rows = yield* repo.between(sub.cursor, upTo, PAGE)
          for (const row of rows) deliver(sub, row, serialise(row))
          if (rows.length < PAGE) sub.cursor = Math.max(sub.cursor, upTo)
        }
      })

    const start = (sub: Subscriber, since: number | undefined) =>
      Effect.gen(function* () {
        yield* follow
        // Without `since` it went live when the hub started, or when it was listed.
        if (since === undefined) return
        const { oldest, newest } = yield* repo.bounds
        // Pruned past it (the log no longer starts right after it), or past the newest event: the
        // client read another log, or one since emptied. Either way it would miss events unawares.
        if ((oldest !== null && since < oldest - 1) || since > newest) {
          return yield* new EventsGone({
            message:
              since > newest
                ? `the event log ends at ${newest}; since=${since} is not from it: start again without since`
                : `the events after ${since} are no longer kept (the oldest is ${oldest}): start again without since`,
            since,
            oldest
          })
        }
        sub.cursor = since
        yield* catchUp(sub)
      })

    const subscribe = (options: SubscribeOptions): Effect.Effect<Subscription, SubscribeError> =>
      Effect.gen(function* () {
        const { actor } = options
        if (!hasScope(actor, "tasks:read")) return yield* missingScope
        const asked = yield* decodeSubscription({ since: options.since, topics: options.topics })
        const sub: Subscriber = {
          userId: actor.userId,
          admin: seesAll(actor),
          projects: hasScope(actor, "projects:read"),
          selection: asked.topics === undefined ? everything : selectionOf(asked.topics),
          cursor: position ?? 0,
          // Already following: live from here at once (nothing can be dispatched before it is listed).
          joining: asked.since !== undefined ? "replay" : position === null ? "start" : null,
          sink: options.sink,
          onDrop: (reason) => options.onDrop?.(reason),
          closed: false
        }
        // Listed before anything is awaited, so the hub keeps following while it starts.
        subscribers.add(sub)
        yield* Effect.onExit(start(sub, asked.since), (exit) =>
          Exit.isSuccess(exit) ? Effect.void : Effect.sync(() => remove(sub))
        )
        return {
          select: (topics) => {
            sub.selection = selectionOf(topics)
          },
          refresh: (current) => {
            sub.admin = seesAll(current)
            sub.projects = hasScope(current, "projects:read")
          },
          close: () => {
            if (!sub.closed) remove(sub)
          }
        } satisfies Subscription
      })

    // Pruning: events older than the retention go, a batch at a time, in the background.
    const retentionMs = (config.eventRetentionHours ?? DEFAULT_RETENTION_HOURS) * 3_600_000
    const prune = Effect.gen(function* () {
      const before = new Date(Date.now() - retentionMs).toISOString()
      let removed = 0
      for (;;) {
        const batch = yield* repo.prune(before, PRUNE_BATCH)
        removed += batch
        if (batch < PRUNE_BATCH) return removed
        yield* Effect.sleep("10 millis")
      }
    }).pipe(Effect.catchAll((error) => Effect.as(Effect.logWarning(`pruning old events failed: ${error.message}`), 0)))
    yield* Effect.forkScoped(Effect.repeat(prune, Schedule.spaced("10 minutes")))
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        for (const sub of subscribers) drop(sub, "closed")
      })
    )

    return {
      /**
       * Appends events for a change; call it last in the change's transaction. Subscribers hear of
       * them once (and only if) the transaction commits.
       */
      append: (drafts: ReadonlyArray<EventDraft>, at: string) => store.unit(() => appendWork(drafts, at)),
      /** {@link append} as a step of a unit of work (`store/Unit.ts`). */
      appendWork,
      /**
       * Tells subscribers of events a statement appended itself (`TasksRepo`'s one-statement
       * writes): at once, or when the transaction it ran in commits.
       */
      appended: store.afterCommit(wake),
      /** {@link appended} for a statement that committed on its own. */
      appendedNow: wake,
      /** Appends `run.log` events for a batch of a run's log entries (their JSON, as the log stores them). */
      appendLogs: (ownerId: string, runId: string, entries: string) =>
        Effect.zipRight(repo.appendLogs(ownerId, runId, entries), store.afterCommit(wake)),
      /**
       * Subscribes a sink. Fails with `BadRequest` for a bad `since` or topic, `Forbidden` without
       * `tasks:read`, {@link EventsGone} when the log no longer holds what `since` asks for.
       */
      subscribe,
      /** `since` and `topics` as a subscriber gives them, decoded as {@link subscribe} decodes them (the 400 it would fail with). */
      decodeSubscription,
      /**
       * The events an actor may see, as a stream (`since` replays first; `topics` as a subscribe
       * message's). A consumer that leaves more than `buffer` events (default 10,000) untaken fails
       * with {@link EventsOverflow} after the ones it has; the stream ends when the service closes.
       */
      stream: (
        actor: Actor,
        options: { readonly since?: unknown; readonly topics?: unknown; readonly buffer?: number } = {}
      ): Stream.Stream<EventMessage, SubscribeError | EventsOverflow> => {
        const limit = options.buffer ?? STREAM_BUFFER
        return Stream.asyncPush<EventMessage, SubscribeError | EventsOverflow>(
          (emit) =>
            Effect.acquireRelease(
              subscribe({
                actor,
                since: options.since,
                topics: options.topics,
                sink: (_, row) =>
                  emit.single({
                    id: row.id,
                    type: row.type as EventType,
                    timestamp: row.created_at,
                    data: JSON.parse(row.data)
                  }),
                onDrop: (reason) =>
                  reason === "overflow"
                    ? emit.fail(
                        new EventsOverflow({
                          message: `more than ${limit} events waited for this stream's consumer`,
                          limit
                        })
                      )
                    : emit.end()
              }),
              (subscription) => Effect.sync(subscription.close)
            ),
          { bufferSize: limit, strategy: "dropping" }
        )
      },
      /** Deletes the events older than the retention (the newest always stays); answers how many. The service runs it every 10 minutes. */
      prune,
      /** The newest event id dispatched to subscribers (0 while nobody listens). */
      position: Effect.sync(() => position ?? 0)
    }
  })
}) {}
