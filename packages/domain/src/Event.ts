/**
 * Live events: what the service tells subscribers when something changes. Every change to a task,
 * project, label, run or review appends one to the event log in the same transaction as the change,
 * so a subscriber that reconnects with `?since=<id>` misses nothing and sees nothing invented.
 */
import { Schema } from "effect"
import type { ErrorDetails } from "./Errors.js"
import { RunId } from "./Ids.js"
import { WholeNumber } from "./Paging.js"
import { Timestamp } from "./Timestamp.js"

export const EventType = Schema.Literal(
  "task.created",
  "task.updated",
  "task.deleted",
  "project.created",
  "project.deleted",
  "label.created",
  "run.started",
  "run.log",
  "run.completed",
  "run.failed",
  "run.stopped",
  "review.created"
)
export type EventType = typeof EventType.Type

/** The family an event belongs to; a subscription names families, and `run:<run_id>` for one run's log. */
export type EventFamily = "tasks" | "projects" | "labels" | "runs"

/** The family of each event type (`review.created` belongs with the task it moves). */
export const familyOf: Record<EventType, EventFamily> = {
  "task.created": "tasks",
  "task.updated": "tasks",
  "task.deleted": "tasks",
  "review.created": "tasks",
  "project.created": "projects",
  "project.deleted": "projects",
  "label.created": "labels",
  "run.started": "runs",
  "run.log": "runs",
  "run.completed": "runs",
  "run.failed": "runs",
  "run.stopped": "runs"
}

/** A topic a client subscribes to. */
export const EventTopic = Schema.Union(
  Schema.Literal("tasks", "projects", "labels", "runs"),
  Schema.TemplateLiteral(Schema.Literal("run:"), Schema.String).pipe(
    Schema.filter((topic) => RunId.pipe(Schema.is)(topic.slice(4)), {
      message: () => "a run topic is run:<run_id>, like run:run_0123456789abcdef"
    })
  )
).annotations({ message: () => "must be tasks, projects, labels, runs or run:<run_id>" })
export type EventTopic = typeof EventTopic.Type

/** The topics of a subscription, replacing what it had: at most 100. */
export const EventTopics = Schema.Array(EventTopic).pipe(Schema.maxItems(100))

/** The newest event id a client has (it receives those after it); 0 for the whole log. */
export const EventSince = WholeNumber("since", 0, Number.MAX_SAFE_INTEGER)

/**
 * What a subscriber asks for, decoded the same for every face: `since` as a number (in process) or
 * the digits of `?since=` (HTTP); `topics` as a list (HTTP splits `?topics=a,b` into one).
 */
export const EventSubscription = Schema.Struct({
  since: Schema.optional(EventSince),
  topics: Schema.optional(EventTopics)
})
export type EventSubscription = typeof EventSubscription.Type

/** `{"type":"subscribe","topics":[...]}`: what the client wants from now on (replacing what it had). */
export const SubscribeMessage = Schema.Struct({
  type: Schema.Literal("subscribe"),
  topics: EventTopics
})
export type SubscribeMessage = typeof SubscribeMessage.Type

/**
 * `since` asks for events the log does not hold: older than its retention, or newer than its
 * newest (a log other than the one the client read). The subscriber must start again without it.
 */
export class EventsGone extends Schema.TaggedError<EventsGone>()("EventsGone", {
  message: Schema.String,
  since: Schema.Number,
  /** The oldest event the log keeps (null when it holds none). */
  oldest: Schema.NullOr(Schema.Number)
}) {
  /** What the error envelope carries (410 `GONE` in the error table). */
  get details(): ErrorDetails {
    return { since: this.since, oldest: this.oldest }
  }
}

/** A subscriber did not take its events as fast as they came: more than `limit` waited for it. */
export class EventsOverflow extends Schema.TaggedError<EventsOverflow>()("EventsOverflow", {
  message: Schema.String,
  limit: Schema.Number
}) {}

/** An event as it is sent: `{"id", "type", "timestamp", "data"}`; `data` is the resource as the REST API shows it. */
export const EventMessage = Schema.Struct({
  id: Schema.Number,
  type: EventType,
  timestamp: Timestamp,
  data: Schema.Unknown
})
export type EventMessage = typeof EventMessage.Type

/** What a writer appends: the event, whose resource it is (who may see it), and the run it is about. */
export interface EventDraft {
  readonly type: EventType
  /** The owner of the resource: only they (and admins) receive it. */
  readonly ownerId: string
  /** For `run.*` events, the run (what a `run:<id>` topic selects). */
  readonly runId?: string | null
  readonly data: unknown
}
