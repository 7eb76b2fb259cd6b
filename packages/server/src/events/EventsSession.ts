/**
 * `GET /api/events`: the live event stream over a WebSocket, whatever carries the socket (`ws` on
 * `node:http`, or `@effect/platform`'s sockets for the Effect face).
 *
 * Before the handshake: the credential (the `Authorization` header, the session cookie, or
 * `?access_token=<JWT>` since browsers cannot set headers on a WebSocket) goes through the same
 * gate as every request (rate limits included), a cookie-authenticated upgrade must come from the
 * service's own origin (a cross-site page must not open a socket with the user's cookie), and the
 * credential must hold `tasks:read`. Any refusal is an ordinary HTTP answer in the error envelope,
 * and no socket is opened.
 *
 * After it: `{"type":"subscribe","topics":[...]}` chooses what arrives; `?since=<id>` replays the
 * log first. The credential is checked again every few seconds, and at its expiry: a revoked key,
 * a logged-out session or an expired token closes the socket (1008), and what it may see follows
 * the user's rights as they are now (an admin who lost admin sees only their own). A client that
 * does not keep up is closed (1013) rather than waited for.
 */
import {
  type Actor,
  type Admission,
  Auth,
  defaultAuthSettings,
  Events,
  EventsGone,
  type EventTopic,
  type errorWire,
  Forbidden,
  Gate,
  hasScope,
  type RateState,
  type RequestInfo,
  SubscribeMessage,
  type Subscription,
  TaskwrightConfig,
  Unauthorized
} from "@taskwright/core"
import { sameOrigin } from "@taskwright/core/internal"
import { Cause, Context, Effect, Either, Exit, Option, Runtime, Schema } from "effect"
import type { DispatchServices } from "../http/Dispatcher.js"

/** What a session runs on. */
export type EventsServices = DispatchServices | Events

/** The socket's side of a session, as each transport provides it. */
export interface EventsChannel {
  /** Sends one text frame; answers false when the client is too far behind to send more. */
  send(text: string): boolean
  close(code: number, reason: string): void
}

/** Close codes of the session. */
export const CLOSE = {
  /** The credential was revoked, logged out or expired. */
  credential: 1008,
  /** The client did not keep up with the events sent to it. */
  tooSlow: 1013,
  /** `since` asked for events the log no longer keeps. */
  gone: 4410,
  /** The service is shutting down. */
  goingAway: 1001
} as const

/** Checks of the credential while a socket is open. */
const RECHECK_MS = 5_000

export interface EventsRequest extends RequestInfo {
  /** The query string without `?`. */
  readonly query: string
}

/** An upgrade let through, with what the session needs. */
export interface Admitted {
  readonly actor: Actor
  readonly since: number | undefined
  /** `?topics=a,b`: the subscription from the start (so a `since` replay already has it). */
  readonly topics: ReadonlyArray<EventTopic> | undefined
  /** The credential as sent, to check again while the socket lives. */
  readonly credential: { readonly authorization: string | undefined; readonly cookie: string | undefined }
  readonly admission: Admission
}

/** Why an upgrade is refused: the error to answer, and the budget's state when the gate spoke. */
export interface Refusal {
  readonly _tag: keyof typeof errorWire
  readonly message: string
  readonly details: Record<string, unknown>
  readonly rate?: RateState
}

const decodeSubscribe = Schema.decodeUnknownEither(Schema.parseJson(SubscribeMessage))

/** The request with `?access_token=` standing in for an `Authorization` header (a browser's only way). */
const withQueryToken = (request: EventsRequest, params: URLSearchParams): EventsRequest | Refusal => {
  const token = params.get("access_token")
  if (token === null || request.header("authorization") !== undefined) return request
  if (token.startsWith("twk_")) {
    return new Unauthorized({
      message:
        "an API key may not travel in a URL (it would be logged): send it in the Authorization header, or exchange it for an access token",
      details: { reason: "key_in_url" }
    })
  }
  return {
    ...request,
    header: (name) => (name === "authorization" ? `Bearer ${token}` : request.header(name))
  }
}

/** The event sessions of one runtime. */
export const makeEventsSessions = (runtime: Runtime.Runtime<EventsServices>) => {
  const gate = Context.get(runtime.context, Gate)
  const auth = Context.get(runtime.context, Auth)
  const events = Context.get(runtime.context, Events)
  const settings = Context.get(runtime.context, TaskwrightConfig).auth ?? defaultAuthSettings
  const runPromise = Runtime.runPromiseExit(runtime)
  const runFork = Runtime.runFork(runtime)
  const open = new Set<() => void>()

  /** Decides an upgrade: the actor and `since`, or the error to answer instead of a handshake. */
  const admit = async (request: EventsRequest): Promise<Either.Either<Admitted, Refusal>> => {
    const params = new URLSearchParams(request.query)
    const since = params.get("since") ?? undefined
    const topics = params
      .get("topics")
      ?.split(",")
      .filter((t) => t !== "")
    const effective = withQueryToken(request, params)
    if ("_tag" in effective) return Either.left(effective)
    const exit = await runPromise(gate.admit(effective, "required"))
    if (Exit.isFailure(exit)) {
      return Either.left({ _tag: "ServiceUnavailable", message: "the store cannot be reached", details: {} })
    }
    const admission = exit.value
    if (admission.refusal !== undefined) {
      const { _tag, message, details } = admission.refusal
      return Either.left({ _tag, message, details, rate: admission.rate })
    }
    const actor = admission.actor
    if (actor === undefined) return Either.left(new Unauthorized({ message: "authentication required", details: {} }))
    if (actor.credential.kind === "session" && !sameOrigin(settings, effective, true)) {
      return Either.left(
        new Forbidden({
          message: "a cookie-authenticated event socket must be opened from this service's own pages",
          details: { reason: "csrf" }
        })
      )
    }
    if (!hasScope(actor, "tasks:read")) {
      return Either.left(
        new Forbidden({
          message: "this credential lacks the tasks:read scope",
          details: { required_scope: "tasks:read" }
        })
      )
    }
    // Decoded as every face decodes them, so the 400 is the one an in-process subscriber gets.
    const asked = Effect.runSync(Effect.either(events.decodeSubscription({ since, topics })))
    if (Either.isLeft(asked)) return Either.left(asked.left)
    return Either.right({
      actor,
      since: asked.right.since,
      topics: asked.right.topics,
      credential: { authorization: effective.header("authorization"), cookie: effective.header("cookie") },
      admission
    })
  }

  /** Runs a session on an opened socket; answers what the transport calls on a message and on close. */
  const start = (channel: EventsChannel, admitted: Admitted) => {
    let subscription: Subscription | undefined
    // Topics asked for before the subscription was ready, applied once it is.
    let requested: ReadonlyArray<EventTopic> | undefined
    let closed = false
    const timers: Array<NodeJS.Timeout> = []
    const close = (code: number, reason: string) => {
      if (closed) return
      closed = true
      end()
      channel.close(code, reason)
    }
    const end = () => {
      closed = true
      subscription?.close()
      for (const timer of timers) clearTimeout(timer)
      open.delete(shutdown)
    }
    const shutdown = () => close(CLOSE.goingAway, "the service is shutting down")
    open.add(shutdown)

    // The credential, checked again while the socket lives (from the stored rows, so a change made
    // in SQL counts too), and at the moment it expires. The user's rights as they are now (admin
    // lost or regained), for a subscription not made yet.
    let current = admitted.actor
    const recheck = () => {
      runFork(
        Effect.match(auth.reauthenticate(admitted.credential), {
          onFailure: (error) => {
            if (error._tag === "Unauthorized") close(CLOSE.credential, "the credential was revoked or has expired")
          },
          onSuccess: (actor) => {
            if (!hasScope(actor, "tasks:read"))
              return close(CLOSE.credential, "the credential lost the tasks:read scope")
            current = actor
            subscription?.refresh(actor)
          }
        })
      )
    }
    const interval = setInterval(recheck, RECHECK_MS)
    interval.unref()
    timers.push(interval)
    const expiresAt = admitted.actor.credential.expiresAt
    if (expiresAt !== null) {
      const expiry = setTimeout(
        () => close(CLOSE.credential, "the credential has expired"),
        Math.max(0, Math.min(Date.parse(expiresAt) - Date.now(), 2_147_000_000))
      )
      expiry.unref()
      timers.push(expiry)
    }

    void runPromise(
      events.subscribe({
        actor: admitted.actor,
        ...(admitted.since === undefined ? {} : { since: admitted.since }),
        ...(admitted.topics === undefined ? {} : { topics: admitted.topics }),
        sink: (message) => closed || channel.send(message),
        onDrop: (reason) =>
          reason === "overflow"
            ? close(CLOSE.tooSlow, "the client did not keep up with its events")
            : close(CLOSE.goingAway, "the service is shutting down")
      })
    ).then((exit) => {
      if (Exit.isSuccess(exit)) {
        subscription = exit.value
        if (closed) return subscription.close()
        if (current !== admitted.actor) subscription.refresh(current)
        if (requested !== undefined) subscription.select(requested)
        return
      }
      const failure = Option.getOrUndefined(Cause.failureOption(exit.cause))
      if (failure instanceof EventsGone) {
        close(CLOSE.gone, "the events after this since are no longer kept; reload and subscribe without since")
      } else {
        close(1011, "the event log cannot be read right now")
      }
    })

    return {
      /** A message from the client. */
      message: (text: string) => {
        const decoded = decodeSubscribe(text)
        if (Either.isLeft(decoded)) {
          channel.send(
            JSON.stringify({
              type: "error",
              code: "BAD_REQUEST",
              message:
                'send {"type":"subscribe","topics":[...]} with topics tasks, projects, labels, runs or run:<run_id>'
            })
          )
          return
        }
        requested = decoded.right.topics
        subscription?.select(requested)
        channel.send(JSON.stringify({ type: "subscribed", topics: decoded.right.topics }))
      },
      /** The socket closed from the other side (or was terminated). */
      closed: end
    }
  }

  return {
    admit,
    start,
    /** Closes every open session (the service is going away). */
    closeAll: () => {
      for (const shutdown of [...open]) shutdown()
    }
  }
}
