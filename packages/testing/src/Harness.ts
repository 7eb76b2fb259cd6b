/**
 * `createHarness()`: one engine for one test, on an in-memory store (or a fresh PostgreSQL
 * database), with a user and their key, the bootstrap admin key, the scripted agent configured,
 * the whole HTTP API without a socket (`inject`), the typed client over a real socket, and helpers
 * to start an agent run and await its end, and to await an event. `close()` removes everything it made.
 *
 * Built on `@taskwright/embedded`: the engine is the one a host embeds, not a test double.
 */
import { mkdtemp, rm } from "node:fs/promises"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { type Json, makeClient, type TaskwrightClient, TaskwrightError } from "@taskwright/api"
import {
  type AgentUpdate,
  type EngineServices,
  type EventMessage,
  type EventTopic,
  grantableScopes,
  type Run,
  type RunLogEntry,
  type RunStart,
  type RunStarted,
  type Scope,
  type TaskCreate
} from "@taskwright/core"
import { createTaskwright, type Taskwright, type TaskwrightAs, type TaskwrightOptions } from "@taskwright/embedded"
import { Context, Data, Effect, type Scope as EffectScope, Layer } from "effect"
import { type QueryParam, type RequestOptions, sendTestRequest, storeQuery, type TestResponse } from "./Exchange.js"
import { createPgDatabase, type TestDatabase } from "./Postgres.js"
import { waitFor } from "./Processes.js"
import { defaultRepoFiles, makeRepo } from "./Repos.js"
import { type Script, scriptEnv, scriptedAgentPath } from "./scripted-agent.js"
import type { TestStore } from "./TestServer.js"

/** The name of the scripted agent every harness configures. */
export const SCRIPTED_AGENT = "scripted"

/** What the scripted agent does when a test gives no script: one file written, one line printed. */
export const defaultScript: Script = [
  { write: "HARNESS.md", content: "written by the scripted agent\n" },
  { stdout: "done" }
]

export interface HarnessOptions extends Omit<TaskwrightOptions, "database" | "dataDir" | "projectsRoot"> {
  /** `"sqlite"` (default): in memory; `"sqlite-file"`: a file in a temporary directory; `"postgres"`: a fresh database. */
  readonly store?: TestStore
  /** What the scripted agent does (default {@link defaultScript}); `startRun({ script })` overrides it per run. */
  readonly script?: Script
  /** Listen on a loopback port for {@link Harness.client} (default true; `inject` needs no socket). */
  readonly listen?: boolean
}

export interface HarnessUser {
  readonly id: string
  readonly email: string
  /** An API key holding the user's scopes. */
  readonly key: string
}

export interface StartRunOptions {
  /** What the agent does in this run (a scripted agent of its own is configured for it). */
  readonly script?: Script
  /** The task to run on; default: a new task in the harness's project. */
  readonly taskId?: number
  /** The new task's fields (with `taskId` unset). */
  readonly task?: Json<typeof TaskCreate>
  /** Start it as this user (default: {@link Harness.user}). */
  readonly as?: TaskwrightAs
  /** The rest of the start request (`autonomy`, `branch`; `agent` to run another agent). */
  readonly body?: Partial<Json<typeof RunStart>>
}

/** No event matched within the time {@link Harness.awaitEvent} was given. */
export class EventWaitTimeout extends Data.TaggedError("EventWaitTimeout")<{
  readonly message: string
  readonly timeoutMs: number
}> {}

/** An event as {@link Harness.awaitEvent} hands it over: `data` is always a JSON object (the resource, or a log entry). */
export interface HarnessEvent extends Omit<EventMessage, "data"> {
  readonly data: Readonly<Record<string, unknown>>
}

const toHarnessEvent = (event: EventMessage): HarnessEvent => ({
  ...event,
  data: typeof event.data === "object" && event.data !== null ? { ...event.data } : {}
})

export interface AwaitEventOptions {
  /** Whose events (default: {@link Harness.as}): only what that user may see can match. */
  readonly as?: TaskwrightAs
  /** As a subscribe message's (default: every family but run logs; `run:<run_id>` for a run's log lines). */
  readonly topics?: ReadonlyArray<EventTopic>
  /** Only events after this id (default 0: the whole log, so an event that already happened matches too). */
  readonly since?: number
  /** How long to wait (default 10 s), then {@link EventWaitTimeout}. */
  readonly timeoutMs?: number
  /** Stops waiting (the promise rejects with the signal's reason). */
  readonly signal?: AbortSignal
}

export interface Harness {
  /** The engine, as a host embeds it. */
  readonly tw: Taskwright
  readonly store: TestStore
  /** The bootstrap admin's API key (every scope). */
  readonly adminKey: string
  /** A non-admin user holding every non-admin scope, with a key. */
  readonly user: HarnessUser
  /** The in-process operations of {@link user}. */
  readonly as: TaskwrightAs
  /** The in-process operations of the bootstrap admin. */
  readonly admin: TaskwrightAs
  /** Where user projects may live (a temporary directory). */
  readonly projectsRoot: string
  /** The loopback URL serving the API (`listen: false` leaves it empty). */
  readonly url: string
  /** The typed client as {@link user}, over the socket at {@link url}. */
  readonly client: TaskwrightClient
  /** The typed client with another credential; `{ socket: false }` sends through `tw.handler` instead. */
  clientFor(key: string | undefined, options?: { readonly socket?: boolean }): TaskwrightClient
  /**
   * One request through the whole HTTP pipeline (gate, scope check, envelope) without a socket:
   * a `Request`, or a path (`/api/tasks`) and its `init`.
   */
  inject(request: Request | string, init?: RequestInit): Promise<Response>
  /** {@link inject} with a key and a JSON body, answering the parsed body (the same shape as `TestServer.request`). */
  request<T = unknown>(method: string, path: string, options?: RequestOptions): Promise<TestResponse<T>>
  /** Another user, with a key carrying `scopes` (default: every scope they can hold, `admin` for an admin). */
  createUser(options?: {
    readonly admin?: boolean
    readonly scopes?: ReadonlyArray<Scope>
    readonly password?: string
  }): Promise<HarnessUser>
  /** A git repository under {@link projectsRoot} and a project over it, owned by `as` (default {@link user}). */
  project(options?: {
    readonly files?: Readonly<Record<string, string>>
    readonly as?: TaskwrightAs
  }): Promise<{ readonly id: string; readonly path: string }>
  /** Starts a run of the scripted agent (on a new task in a new project unless `taskId` is given). */
  startRun(options?: StartRunOptions): Promise<Json<typeof RunStarted>>
  /** Waits until the run is no longer `running` and answers it. */
  awaitRun(
    runId: string,
    options?: { readonly timeoutMs?: number; readonly as?: TaskwrightAs }
  ): Promise<Json<typeof Run>>
  /**
   * The first event matching `predicate`, replayed from the log or live: it does not matter whether
   * the change happened before the call or after. Fails with {@link EventWaitTimeout} (or the
   * `TaskwrightError` of a bad `topics`/`since`).
   */
  awaitEvent(predicate: (event: HarnessEvent) => boolean, options?: AwaitEventOptions): Promise<HarnessEvent>
  /** {@link startRun} then {@link awaitRun}. */
  run(options?: StartRunOptions & { readonly timeoutMs?: number }): Promise<Json<typeof Run>>
  /** Every log entry of a run, oldest first. */
  logs(runId: string, options?: { readonly as?: TaskwrightAs }): Promise<ReadonlyArray<Json<typeof RunLogEntry>>>
  /** A query straight on the store, to check what a request left behind. */
  query<Row = Record<string, unknown>>(sql: string, params?: ReadonlyArray<QueryParam>): Promise<ReadonlyArray<Row>>
  /** Stops the engine and removes the store, the directories and the socket. Always settles. */
  close(): Promise<void>
}

const ORIGIN = "http://taskwright.test"

/** The email of the admin every empty store starts with; {@link Harness.adminKey} is theirs. */
export const BOOTSTRAP_ADMIN = "admin@localhost"

const scriptedAgent = (script: Script): Json<typeof AgentUpdate> => ({
  enabled: true,
  command: [process.execPath, scriptedAgentPath],
  env: scriptEnv(script),
  // A sandboxed agent is shown the scripted agent's directory wherever this package is installed.
  read_only_paths: [dirname(scriptedAgentPath)]
})

const listen = (handler: Taskwright["nodeHandler"]) =>
  new Promise<Server>((resolve, reject) => {
    const server = createServer(handler)
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => resolve(server))
  })

const closeServer = (server: Server) =>
  new Promise<void>((resolve) => {
    server.close(() => resolve())
    server.closeAllConnections()
  })

/** A fresh engine for one test; `close()` it after (in `afterEach`, or use {@link harness} in Effect tests). */
export const createHarness = async (options: HarnessOptions = {}): Promise<Harness> => {
  const { store = "sqlite", script = defaultScript, listen: shouldListen = true, ...engineOptions } = options
  const projectsRoot = await mkdtemp(join(tmpdir(), "taskwright-harness-"))
  const cleanups: Array<() => Promise<void>> = [() => rm(projectsRoot, { recursive: true, force: true })]
  const cleanUp = async () => {
    for (const step of cleanups.reverse()) await step().catch(() => {})
  }
  let tw: Taskwright
  try {
    let database = ":memory:"
    let dataDir: string | undefined
    if (store === "postgres") {
      const db: TestDatabase = await createPgDatabase()
      cleanups.push(db.drop)
      database = db.url
    }
    if (store !== "sqlite") {
      const dir = await mkdtemp(join(tmpdir(), "taskwright-harness-data-"))
      cleanups.push(() => rm(dir, { recursive: true, force: true }))
      dataDir = dir
      if (store === "sqlite-file") database = join(dir, "taskwright.db")
    }
    tw = await createTaskwright({
      ...engineOptions,
      database,
      ...(dataDir === undefined ? {} : { dataDir }),
      projectsRoot,
      agents: { [SCRIPTED_AGENT]: scriptedAgent(script), ...engineOptions.agents }
    })
  } catch (error) {
    await cleanUp()
    throw error
  }
  cleanups.push(() => tw.close())

  try {
    const adminKey = tw.adminKey
    if (adminKey === undefined) throw new Error("the harness's store was not empty: no bootstrap admin key")
    let users = 0
    const createUser: Harness["createUser"] = async (o = {}) => {
      users += 1
      // Deterministic: each harness has a store of its own, so answers compare across runs.
      const email = `user${users}@example.test`
      const created = await tw.users.create({
        email,
        name: `User ${users}`,
        admin: o.admin ?? false,
        ...(o.password === undefined ? {} : { password: o.password })
      })
      const key = await tw.keys.create({
        user: created.id,
        name: "harness key",
        scopes: o.scopes ?? grantableScopes(o.admin ?? false)
      })
      return { id: created.id, email, key: key.secret }
    }
    const user = await createUser()
    const as = tw.as(user.id)
    // The bootstrap admin (`admin@localhost`) configures the per-run scripted agents.
    const admin = tw.as(BOOTSTRAP_ADMIN)

    const server = shouldListen ? await listen(tw.nodeHandler) : undefined
    if (server !== undefined) cleanups.push(() => closeServer(server))
    const url = server === undefined ? "" : `http://127.0.0.1:${(server.address() as AddressInfo).port}`

    const inject: Harness["inject"] = (request, init) =>
      tw.handler(typeof request === "string" ? new Request(new URL(request, ORIGIN), init) : request)

    const clientFor: Harness["clientFor"] = (key, o = {}) => {
      const credential = key === undefined ? {} : { apiKey: key }
      if (o.socket === false || url === "") return makeClient({ baseUrl: ORIGIN, fetch: tw.handler, ...credential })
      return makeClient({ baseUrl: url, ...credential })
    }

    let agents = 0
    const startRun: Harness["startRun"] = async (o = {}) => {
      const who = o.as ?? as
      let agent = o.body?.agent ?? SCRIPTED_AGENT
      if (o.script !== undefined) {
        agents += 1
        agent = `${SCRIPTED_AGENT}-${agents}`
        await admin.agents.update(agent, scriptedAgent(o.script))
      }
      let taskId = o.taskId
      if (taskId === undefined) {
        const project = await harness.project({ as: who })
        const task = await who.tasks.create({
          title: "Make the change",
          description: "Edit the files.",
          ...o.task,
          project_id: project.id
        })
        taskId = task.id
      }
      return who.runs.start(taskId, { ...o.body, agent })
    }

    const awaitRun: Harness["awaitRun"] = (runId, o = {}) =>
      waitFor(
        () => (o.as ?? as).runs.get(runId),
        (run) => run.status !== "running",
        { timeoutMs: o.timeoutMs ?? 30_000, intervalMs: 5, what: `run ${runId} to end` }
      )

    const awaitEvent: Harness["awaitEvent"] = (predicate, o = {}) =>
      new Promise((resolve, reject) => {
        const timeoutMs = o.timeoutMs ?? 10_000
        let unsubscribe: (() => void) | undefined
        let settled = false
        const settle = (then: () => void) => {
          if (settled) return
          settled = true
          clearTimeout(timer)
          o.signal?.removeEventListener("abort", onAbort)
          unsubscribe?.()
          then()
        }
        const timer = setTimeout(
          () =>
            settle(() =>
              reject(new EventWaitTimeout({ message: `no matching event within ${timeoutMs} ms`, timeoutMs }))
            ),
          timeoutMs
        )
        const onAbort = () => settle(() => reject(o.signal?.reason))
        if (o.signal?.aborted === true) return onAbort()
        o.signal?.addEventListener("abort", onAbort, { once: true })
        ;(o.as ?? as).events
          .subscribe(
            o.topics,
            (message) => {
              const event = toHarnessEvent(message)
              if (predicate(event)) settle(() => resolve(event))
            },
            { since: o.since ?? 0 }
          )
          .then(
            (stop) => {
              // A replayed event may have matched before the subscription was handed back.
              if (settled) stop()
              else unsubscribe = stop
            },
            (error: unknown) => settle(() => reject(error))
          )
      })

    const harness: Harness = {
      tw,
      store,
      adminKey,
      user,
      as,
      admin,
      projectsRoot,
      url,
      client: clientFor(user.key),
      clientFor,
      inject,
      request: (method, path, o) => sendTestRequest(inject, method, path, o),
      createUser,
      project: async (o = {}) => {
        const path = await makeRepo(o.files ?? defaultRepoFiles, projectsRoot)
        const project = await (o.as ?? as).projects.create({ name: "Harness project", path })
        return { id: project.id, path }
      },
      startRun,
      awaitRun,
      awaitEvent,
      run: async (o = {}) => {
        const started = await startRun(o)
        return awaitRun(started.run_id, {
          ...(o.as === undefined ? {} : { as: o.as }),
          ...(o.timeoutMs === undefined ? {} : { timeoutMs: o.timeoutMs })
        })
      },
      logs: async (runId, o = {}) => {
        const out: Array<Json<typeof RunLogEntry>> = []
        for (;;) {
          const page = await (o.as ?? as).runs.logs(runId, { after: String(out.at(-1)?.seq ?? 0), limit: "1000" })
          out.push(...page.logs)
          if (page.logs.length < 1000) return out
        }
      },
      query: <Row>(sql: string, params: ReadonlyArray<QueryParam> = []) =>
        tw.effect.runtime.runPromise(storeQuery<Row>(sql, params)),
      close: () => {
        closing ??= cleanUp()
        return closing
      }
    }
    let closing: Promise<void> | undefined
    return harness
  } catch (error) {
    await cleanUp()
    throw error
  }
}

/**
 * {@link createHarness} as a scoped Effect, closed with its scope: one harness per test with
 * `@effect/vitest`'s `it.scoped`.
 */
export const harness = (options: HarnessOptions = {}): Effect.Effect<Harness, never, EffectScope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(() => createHarness(options)),
    (h) => Effect.promise(() => h.close())
  )

/** The harness in an Effect test's context, beside the engine's services (`yield* Tasks`). */
export class TestHarness extends Context.Tag("@taskwright/testing/TestHarness")<TestHarness, Harness>() {
  /** {@link Harness.awaitEvent} as an Effect (interrupting it stops the wait): `yield* TestHarness.awaitEvent(...)`. */
  static awaitEvent(
    predicate: (event: HarnessEvent) => boolean,
    options: Omit<AwaitEventOptions, "signal"> = {}
  ): Effect.Effect<HarnessEvent, EventWaitTimeout | TaskwrightError, TestHarness> {
    return Effect.flatMap(TestHarness, (h) =>
      Effect.tryPromise({
        try: (signal) => h.awaitEvent(predicate, { ...options, signal }),
        catch: (error) =>
          error instanceof EventWaitTimeout || error instanceof TaskwrightError
            ? error
            : new TaskwrightError("INTERNAL_ERROR", 500, String(error), {})
      })
    )
  }

  /** A harness for the layer's lifetime (`layer(TestHarness.layer())(...)` in `@effect/vitest`), with the engine's services. */
  static layer(options: HarnessOptions = {}): Layer.Layer<TestHarness | EngineServices> {
    return Layer.unwrapScoped(
      Effect.map(harness(options), (h) => Layer.merge(Layer.succeed(TestHarness, h), h.tw.effect.layer))
    )
  }
}
