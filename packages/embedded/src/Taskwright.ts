/**
 * `createTaskwright(options)`: one engine in the host's process, with three faces over it —
 * typed Promise operations acting as a user (`tw.as(user).tasks.create(...)`), the whole HTTP API
 * as a fetch-style or `node:http` handler, and the Effect runtime and services for Effect hosts.
 *
 * The operations call the same handlers as the HTTP API, behind the same scope check, with the
 * query and body decoded by the same services: a bad input is refused the same way, and a result
 * has the JSON shape the HTTP API answers. Failures reject with {@link TaskwrightError}.
 */
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  type Actor,
  type AgentDetail,
  type AgentList,
  Agents,
  type AgentUpdate,
  type ApiKey,
  type ApiKeyCreate,
  type ApiKeyList,
  type ApiKeyListParams,
  type ApiKeyWithSecret,
  type CreatedTask,
  type EngineRuntime,
  type EngineServices,
  type EngineStarted,
  type EventMessage,
  Events,
  type EventTopic,
  errorWire,
  grantableScopes,
  invalidInput,
  type KeyUsageReport,
  type Label,
  type LabelCreate,
  type LabelList,
  type LabelListParams,
  makeEngineRuntime,
  type NewUser,
  type Project,
  type ProjectCreate,
  type ProjectDeleteParams,
  type ProjectDetail,
  type ProjectList,
  type ProjectListParams,
  type PullRequestReviewCreate,
  type PullRequestReviewStarted,
  type ReviewCreate,
  type ReviewResult,
  type Run,
  type RunLogs,
  type RunLogsParams,
  type RunStart,
  type RunStarted,
  type Scope,
  type StoreError,
  type Task,
  type TaskCreate,
  type TaskList,
  type TaskListParams,
  type TaskUpdate,
  TaskwrightEngine,
  TaskwrightError,
  type User,
  Users
} from "@taskwright/core"
import { requireScope, type UserRow } from "@taskwright/core/internal"
import {
  contractRoutes,
  type HttpFaceOptions,
  handlers,
  makeHttpFaces,
  type RequestContext,
  type TaskwrightHttpFaces
} from "@taskwright/server"
import { Cause, Context, Effect, Exit, Layer, Logger, Option, Redacted, type Runtime } from "effect"
import { chooseDataDir, type LogEntry, type TaskwrightOptions, toSettings } from "./Options.js"

/** The JSON shape of a schema's values. */
type Json<S extends { readonly Encoded: unknown }> = S["Encoded"]

/** A user's operations: the HTTP API's, one method each, with its scopes. */
export interface TaskwrightAs {
  readonly tasks: {
    list(query?: Json<typeof TaskListParams>): Promise<Json<typeof TaskList>>
    get(id: number): Promise<Json<typeof Task>>
    create(body: Json<typeof TaskCreate>): Promise<Json<typeof CreatedTask>>
    update(id: number, body: Json<typeof TaskUpdate>): Promise<Json<typeof Task>>
    delete(id: number): Promise<{ readonly success: true }>
  }
  readonly projects: {
    list(query?: Json<typeof ProjectListParams>): Promise<Json<typeof ProjectList>>
    get(id: string): Promise<Json<typeof ProjectDetail>>
    create(body: Json<typeof ProjectCreate>): Promise<Json<typeof Project>>
    delete(id: string, query?: Json<typeof ProjectDeleteParams>): Promise<{ readonly success: true }>
  }
  readonly labels: {
    list(query?: Json<typeof LabelListParams>): Promise<Json<typeof LabelList>>
    create(body: Json<typeof LabelCreate>): Promise<Json<typeof Label>>
  }
  readonly runs: {
    start(taskId: number, body: Json<typeof RunStart>): Promise<Json<typeof RunStarted>>
    get(runId: string): Promise<Json<typeof Run>>
    logs(runId: string, query?: Json<typeof RunLogsParams>): Promise<Json<typeof RunLogs>>
    stop(runId: string): Promise<Json<typeof Run>>
  }
  readonly reviews: {
    create(taskId: number, body: Json<typeof ReviewCreate>): Promise<Json<typeof ReviewResult>>
    /**
     * `POST /api/review/pr`: an agent's read-only review of a GitHub pull request, on a new task;
     * the review lands in the run's `output.review` (and on the pull request with `post: true`).
     */
    pullRequest(body: Json<typeof PullRequestReviewCreate>): Promise<Json<typeof PullRequestReviewStarted>>
  }
  readonly agents: {
    list(): Promise<Json<typeof AgentList>>
    update(name: string, body: Json<typeof AgentUpdate>): Promise<Json<typeof AgentDetail>>
  }
  readonly keys: {
    list(query?: Json<typeof ApiKeyListParams>): Promise<Json<typeof ApiKeyList>>
    create(body: Json<typeof ApiKeyCreate>): Promise<Json<typeof ApiKeyWithSecret>>
    rotate(id: string): Promise<Json<typeof ApiKeyWithSecret>>
    revoke(id: string): Promise<{ readonly success: true }>
    usage(id: string): Promise<Json<typeof KeyUsageReport>>
  }
  readonly events: {
    /**
     * Calls `listener` with every event this user may see on `topics` (default: every family but run
     * logs; `run:<run_id>` for a run's log), after replaying those after `since` when given. Needs
     * `tasks:read`. Answers how to stop.
     */
    subscribe(
      topics: ReadonlyArray<EventTopic> | undefined,
      listener: (event: EventMessage) => void,
      options?: { readonly since?: number }
    ): Promise<() => void>
  }
}

export interface Taskwright {
  /** The bootstrap admin's API key, on the start that created it (an empty store). */
  readonly adminKey: string | undefined
  /** What the engine did at start: the bootstrap admin, runs recovered from a previous process. */
  readonly started: EngineStarted
  readonly users: {
    /** Creates a user (`password` for signing in to the web board; `admin` for every scope). */
    create(input: {
      readonly email: string
      readonly name: string
      readonly password?: string | null
      readonly admin?: boolean
    }): Promise<Json<typeof User> & { readonly admin: boolean }>
  }
  readonly keys: {
    /**
     * An API key for a user (id or email), answered with its secret this once. Decoded as the keys
     * endpoint's body (`expires` as its `expires_at`), so it is refused as over HTTP, with the same
     * envelope: `name` 1-100 characters, 1-20 known scopes the user may hold, an expiry in the future.
     */
    create(input: {
      readonly user: string
      readonly name: string
      readonly scopes: ReadonlyArray<Scope>
      /** When it stops working: an ISO timestamp, a `Date`, or a lifetime like `90d` or `12h`. */
      readonly expires?: string | Date
    }): Promise<Json<typeof ApiKeyWithSecret>>
    /** Every key (never their secrets), or a user's. */
    list(user?: string): Promise<ReadonlyArray<Json<typeof ApiKey>>>
  }
  /**
   * The operations of a user (id or email), with the user's scopes, narrowed to `scopes` when
   * given: ownership and scopes are enforced as over HTTP.
   */
  as(user: string, options?: { readonly scopes?: ReadonlyArray<Scope> }): TaskwrightAs
  /**
   * `tw.http().handler`: the whole HTTP API at the root, `(Request) => Promise<Response>`, for
   * fetch-style frameworks. Under a path prefix: `tw.http({ prefix: "/tasks-api" }).handler`.
   */
  readonly handler: (request: Request) => Promise<Response>
  /**
   * `tw.http().nodeHandler`: the whole HTTP API at the root as a `node:http` listener (Express's
   * `app.use("/tasks-api", tw.nodeHandler)` strips its mount path itself). Under a path prefix,
   * for hosts that do not strip it: `tw.http({ prefix: "/tasks-api" }).nodeHandler`.
   */
  readonly nodeHandler: TaskwrightHttpFaces["nodeHandler"]
  /**
   * The HTTP faces of the whole API — `handler` (fetch-style), `nodeHandler` (`node:http`),
   * `nodeUpgrade` (the events socket) and `app` (Effect) — answering at the root, or under
   * `prefix` (`/tasks-api`) and nowhere else. The same faces for the same prefix on every call.
   */
  http(options?: HttpFaceOptions): TaskwrightHttpFaces
  /** The Effect face: the engine's runtime, its services as a layer, and the API as an `HttpApp`. */
  readonly effect: {
    readonly runtime: EngineRuntime
    readonly layer: Layer.Layer<EngineServices>
    readonly context: Context.Context<EngineServices>
    readonly app: TaskwrightHttpFaces["app"]
  }
  /** Stops the engine (runs stopped with their work committed, logs flushed, the store closed). Always settles. */
  close(): Promise<void>
}

const levels: Record<string, LogEntry["level"]> = {
  TRACE: "trace",
  DEBUG: "debug",
  INFO: "info",
  WARN: "warn",
  ERROR: "error",
  FATAL: "fatal"
}

const hostLogger = (write: (entry: LogEntry) => void) =>
  Logger.make(({ logLevel, message, cause, annotations }) => {
    const text = Array.isArray(message) ? message.map(String).join(" ") : String(message)
    const entry: LogEntry = {
      level: levels[logLevel.label] ?? "info",
      message: text,
      annotations: Object.fromEntries(annotations),
      ...(Cause.isEmpty(cause) ? {} : { cause: Cause.pretty(cause).split("\n")[0] ?? "" })
    }
    write(entry)
  })

const noStore: RequestContext = {
  method: "POST",
  header: () => undefined,
  clientAddress: "in-process",
  secure: false,
  setHeader: () => {}
}

const lifetime = /^([1-9][0-9]{0,4})([dh])$/

/** An expiry as the keys endpoint takes it: a lifetime (`90d`, `12h`) or a `Date` turned into an instant. */
const expiryOf = (expires: unknown): unknown => {
  if (expires instanceof Date) return Number.isNaN(expires.getTime()) ? String(expires) : expires.toISOString()
  if (typeof expires !== "string") return expires
  const m = lifetime.exec(expires)
  if (m === null) return expires
  const hours = Number(m[1]) * (m[2] === "d" ? 24 : 1)
  return new Date(Date.now() + hours * 3_600_000).toISOString()
}

const isRecord = (input: unknown): input is Readonly<Record<string, unknown>> =>
  typeof input === "object" && input !== null && !Array.isArray(input)

/** `input` with `defaults` for the fields it leaves out; anything but an object is left for the service to refuse. */
const withDefaults = (input: unknown, defaults: Readonly<Record<string, unknown>>): unknown => {
  if (!isRecord(input)) return input
  const out: Record<string, unknown> = { ...input }
  for (const [key, value] of Object.entries(defaults)) if (out[key] === undefined) out[key] = value
  return out
}

/** The error a caller sees for a failed exit, as the HTTP API would answer it. */
const toTaskwrightError = (cause: Cause.Cause<unknown>): TaskwrightError => {
  const failure = Option.getOrUndefined(Cause.failureOption(cause))
  if (typeof failure === "object" && failure !== null && "_tag" in failure) {
    const tag = failure._tag
    if (typeof tag === "string" && tag in errorWire) {
      return TaskwrightError.fromTagged(failure as Parameters<typeof TaskwrightError.fromTagged>[0])
    }
    if (tag === "StoreError" && (failure as StoreError).kind === "unavailable") {
      return new TaskwrightError("SERVICE_UNAVAILABLE", 503, "the service's store cannot be reached; try again soon", {
        reason: "store_unavailable"
      })
    }
  }
  return new TaskwrightError("INTERNAL_ERROR", 500, "internal server error", {})
}

/** Opens an engine and answers its faces once it has started. */
export const createTaskwright = async (options: TaskwrightOptions = {}): Promise<Taskwright> => {
  const choice = chooseDataDir(options)
  const dataDir = choice.path ?? (await mkdtemp(join(tmpdir(), "taskwright-")))
  const log = options.log ?? "silent"
  const managed = makeEngineRuntime(toSettings(options, dataDir), {
    log: typeof log === "function" ? hostLogger(log) : log,
    ...(options.tracing === undefined ? {} : { tracing: options.tracing })
  })
  const removeTemporary = () => (choice.temporary ? rm(dataDir, { recursive: true, force: true }) : Promise.resolve())
  let runtime: Runtime.Runtime<EngineServices>
  try {
    runtime = await managed.runtime()
    const agents = Object.entries(options.agents ?? {})
    if (agents.length > 0) {
      await managed.runPromise(
        Effect.forEach(agents, ([name, update]) => Effect.flatMap(Agents, (a) => a.update(name, update)))
      )
    }
  } catch (error) {
    await managed.dispose().catch(() => {})
    await removeTemporary()
    throw error
  }
  const started = Context.get(runtime.context, TaskwrightEngine)

  const run = <A>(effect: Effect.Effect<A, unknown, EngineServices>): Promise<A> =>
    managed.runPromiseExit(effect).then((exit) => {
      if (Exit.isSuccess(exit)) return exit.value
      const error = toTaskwrightError(exit.cause)
      if (error.status === 500) void managed.runPromise(Effect.logError("in-process call failed", exit.cause))
      throw error
    })

  const byGroup = handlers as unknown as Record<string, Record<string, unknown> | undefined>
  const routes = new Map(
    contractRoutes((group, endpoint) => byGroup[group]?.[endpoint] as never).map((r) => [r.route.name, r])
  )

  const findUser = (ref: string) =>
    Effect.flatMap(Users, (users) => (ref.includes("@") ? users.findByEmail(ref) : users.findUser(ref)))

  /** One operation of the contract, as `actor`, through the endpoint's handler. */
  const invoke = <A>(
    actor: Actor,
    name: string,
    input: { readonly path?: Record<string, string | number>; readonly query?: unknown; readonly body?: unknown }
  ): Promise<A> => {
    const entry = routes.get(name)
    if (entry === undefined) return Promise.reject(new Error(`no operation ${name}`))
    const { route } = entry
    const program = Effect.zipRight(
      requireScope(actor, route.requirement),
      Effect.suspend(() => {
        let path: unknown
        if (route.decodePath !== undefined) {
          const raw = Object.fromEntries(Object.entries(input.path ?? {}).map(([k, v]) => [k, String(v)]))
          const decoded = route.decodePath(raw)
          // The same 400 the HTTP API answers for a malformed id.
          if (decoded._tag === "Left") return Effect.fail(invalidInput(decoded.left, "path"))
          path = decoded.right
        }
        const handler = route.handler
        if (handler === undefined) return Effect.die(new Error(`no handler for ${name}`))
        return handler({
          actor,
          path,
          urlParams: input.query ?? {},
          payload: input.body,
          request: { ...noStore, method: entry.method }
        })
      })
    )
    return run(program as Effect.Effect<A, unknown, EngineServices>)
  }

  const as = (user: string, asOptions: { readonly scopes?: ReadonlyArray<Scope> } = {}): TaskwrightAs => {
    // The lookup is kept once it succeeds; a failed one (no such user yet, the store away) is not.
    let actor: Promise<Actor> | undefined
    const resolveActor = () => {
      if (actor !== undefined) return actor
      const lookup = run(findUser(user)).then((row: UserRow): Actor => {
        const own = grantableScopes(Boolean(row.is_admin))
        const narrowed = asOptions.scopes === undefined ? own : own.filter((s) => asOptions.scopes?.includes(s))
        return {
          userId: row.id,
          scopes: new Set(narrowed),
          credential: { kind: "in_process", id: `in_process:${row.id}`, expiresAt: null }
        }
      })
      actor = lookup
      lookup.catch(() => {
        if (actor === lookup) actor = undefined
      })
      return lookup
    }
    const op =
      <A>(name: string) =>
      (input: { readonly path?: Record<string, string | number>; readonly query?: unknown; readonly body?: unknown }) =>
        resolveActor().then((a) => invoke<A>(a, name, input))
    return {
      tasks: {
        list: (query) => op<never>("tasks.list")({ query }),
        get: (id) => op<never>("tasks.get")({ path: { id } }),
        create: (body) => op<never>("tasks.create")({ body }),
        update: (id, body) => op<never>("tasks.update")({ path: { id }, body }),
        delete: (id) => op<never>("tasks.delete")({ path: { id } })
      },
      projects: {
        list: (query) => op<never>("projects.list")({ query }),
        get: (id) => op<never>("projects.get")({ path: { id } }),
        create: (body) => op<never>("projects.create")({ body }),
        delete: (id, query) => op<never>("projects.delete")({ path: { id }, query })
      },
      labels: {
        list: (query) => op<never>("labels.list")({ query }),
        create: (body) => op<never>("labels.create")({ body })
      },
      runs: {
        start: (taskId, body) => op<never>("runs.start")({ path: { id: taskId }, body }),
        get: (runId) => op<never>("runs.get")({ path: { run_id: runId } }),
        logs: (runId, query) => op<never>("runs.logs")({ path: { run_id: runId }, query }),
        stop: (runId) => op<never>("runs.stop")({ path: { run_id: runId } })
      },
      reviews: {
        create: (taskId, body) => op<never>("reviews.review")({ path: { id: taskId }, body }),
        pullRequest: (body) => op<never>("reviews.pullRequest")({ body })
      },
      agents: {
        list: () => op<never>("agents.list")({}),
        update: (name, body) => op<never>("agents.update")({ path: { name }, body })
      },
      events: {
        subscribe: (topics, listener, subscribeOptions = {}) =>
          resolveActor().then((actor) =>
            run(
              Effect.zipRight(
                requireScope(actor, "tasks:read"),
                Effect.flatMap(Events, (events) =>
                  events.subscribe({
                    actor,
                    ...(topics === undefined ? {} : { topics }),
                    ...(subscribeOptions.since === undefined ? {} : { since: subscribeOptions.since }),
                    sink: (message) => {
                      listener(JSON.parse(message) as EventMessage)
                      return true
                    }
                  })
                )
              )
            ).then((subscription) => subscription.close)
          )
      },
      keys: {
        list: (query) => op<never>("keys.list")({ query }),
        create: (body) => op<never>("keys.create")({ body }),
        rotate: (id) => op<never>("keys.rotate")({ path: { id } }),
        revoke: (id) => op<never>("keys.revoke")({ path: { id } }),
        usage: (id) => op<never>("keys.usage")({ path: { id } })
      }
    }
  }

  // One set of faces per prefix, made on first use: `tw.handler` is `tw.http().handler`.
  const facesByPrefix = new Map<string, TaskwrightHttpFaces>()
  const http = (httpOptions: HttpFaceOptions = {}): TaskwrightHttpFaces => {
    if (httpOptions.site !== undefined) return makeHttpFaces(runtime, httpOptions)
    const key = httpOptions.prefix ?? ""
    const made = facesByPrefix.get(key) ?? makeHttpFaces(runtime, httpOptions)
    facesByPrefix.set(key, made)
    return made
  }
  const faces = http()
  let closing: Promise<void> | undefined

  return {
    adminKey: Option.getOrUndefined(Option.map(started.bootstrap.adminKey, Redacted.value)),
    started,
    users: {
      create: (input) =>
        run(
          Effect.flatMap(Users, (users) =>
            // The service decodes what it is given: a host's bad input is refused there, as over the CLI.
            users.create(withDefaults(input, { password: null, admin: false }) as NewUser)
          )
        )
    },
    keys: {
      create: (input) =>
        run(
          Effect.gen(function* () {
            const users = yield* Users
            if (!isRecord(input)) return yield* users.createKeyFor(input)
            // The keys endpoint's body, decoded by the service: what HTTP refuses is refused here, alike.
            const { user, expires, ...body } = input
            const userId = typeof user === "string" && user.includes("@") ? (yield* users.findByEmail(user)).id : user
            return yield* users.createKeyFor({
              ...body,
              user_id: userId,
              ...(expires === undefined ? {} : { expires_at: expiryOf(expires) })
            })
          })
        ),
      list: (user) =>
        run(
          Effect.gen(function* () {
            const users = yield* Users
            const owner = user === undefined ? null : (yield* findUser(user)).id
            return yield* users.listKeys(owner)
          })
        )
    },
    as,
    handler: faces.handler,
    nodeHandler: faces.nodeHandler,
    http,
    effect: {
      runtime: managed,
      layer: Layer.succeedContext(runtime.context),
      context: runtime.context,
      app: faces.app
    },
    close: () => {
      closing ??= managed
        .dispose()
        .catch(() => {})
        .then(removeTemporary)
      return closing
    }
  }
}
