/**
 * The typed client of the HTTP API, in two faces over one contract:
 *
 * - {@link makeClient}: Promise methods, one per endpoint, grouped as the contract groups them
 *   (`client.tasks.get(id)`, `client.runs.start(taskId, body)`). Inputs and results are the API's
 *   JSON (snake_case, as the in-process API `tw.as(user)` takes and answers them, so code moves
 *   between the two without translating); a failure rejects with {@link TaskwrightError}.
 * - {@link makeEffectClient}: `HttpApiClient.make(TaskwrightApi)` with the base URL and credential
 *   applied, for Effect programs (decoded values, the contract's error classes in the error channel).
 *
 * Nothing here loads a driver or a Node built-in: it runs wherever `fetch` does.
 */
import { HttpApi, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import {
  type AccessTokenResponse,
  type AgentDetail,
  type AgentList,
  type AgentUpdate,
  type ApiKeyCreate,
  type ApiKeyList,
  type ApiKeyListParams,
  type ApiKeyWithSecret,
  type CreatedTask,
  type KeyUsageReport,
  type Label,
  type LabelCreate,
  type LabelList,
  type LabelListParams,
  type LoginRequest,
  type LoginResponse,
  type Project,
  type ProjectCreate,
  type ProjectDeleteParams,
  type ProjectDetail,
  type ProjectList,
  type ProjectListParams,
  type PullRequestReviewCreate,
  type PullRequestReviewStarted,
  type RefreshResponse,
  type ReviewCreate,
  type ReviewResult,
  type Run,
  type RunLogs,
  type RunLogsParams,
  type RunStart,
  type RunStarted,
  type Task,
  type TaskCreate,
  type TaskList,
  type TaskListParams,
  type TaskUpdate,
  TaskwrightError,
  type TokenRequest
} from "@taskwright/domain"
import type { Effect } from "effect"
import { TaskwrightApi } from "./Api.js"
import type { MeResponse, VerifyParams, VerifyResponse } from "./groups/Auth.js"

/** What every client method rejects with (re-exported: a client-only user imports it from here). */
export { TaskwrightError }

/** The JSON form of a schema's values: what goes over the wire. */
export type Json<S extends { readonly Encoded: unknown }> = S["Encoded"]

/** The answer of deletions and of `logout`. */
export interface SuccessBody {
  readonly success: true
}

/**
 * A user's operations on the resources, one method per endpoint, in the API's JSON: what the
 * typed client and the in-process API (`tw.as(user)` in `@taskwright/embedded`) both offer, so code
 * written against this type runs over either.
 */
export interface TaskwrightOperations {
  readonly tasks: {
    list(query?: Json<typeof TaskListParams>): Promise<Json<typeof TaskList>>
    get(id: number): Promise<Json<typeof Task>>
    create(body: Json<typeof TaskCreate>): Promise<Json<typeof CreatedTask>>
    update(id: number, body: Json<typeof TaskUpdate>): Promise<Json<typeof Task>>
    delete(id: number): Promise<SuccessBody>
  }
  readonly projects: {
    list(query?: Json<typeof ProjectListParams>): Promise<Json<typeof ProjectList>>
    get(id: string): Promise<Json<typeof ProjectDetail>>
    create(body: Json<typeof ProjectCreate>): Promise<Json<typeof Project>>
    delete(id: string, query?: Json<typeof ProjectDeleteParams>): Promise<SuccessBody>
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
    revoke(id: string): Promise<SuccessBody>
    usage(id: string): Promise<Json<typeof KeyUsageReport>>
  }
}

/** The operations of one credential over HTTP: {@link TaskwrightOperations}, health and authentication. */
export interface TaskwrightClient extends TaskwrightOperations {
  readonly system: {
    /** `GET /api/health`: `{status: "ok"}` once the store answers. No credential needed. */
    health(): Promise<{ readonly status: "ok" }>
  }
  readonly auth: {
    /** Signs in with a password; answers the session (its token also works as a Bearer credential). */
    login(body: Json<typeof LoginRequest>): Promise<Json<typeof LoginResponse>>
    logout(): Promise<SuccessBody>
    refresh(): Promise<Json<typeof RefreshResponse>>
    /** Exchanges an API key for a one-hour access token (`makeClient({ baseUrl, accessToken })`). */
    token(body: Json<typeof TokenRequest>): Promise<Json<typeof AccessTokenResponse>>
    /** The caller: user, scopes and credential. */
    me(): Promise<Json<typeof MeResponse>>
    verify(query?: Json<typeof VerifyParams>): Promise<Json<typeof VerifyResponse>>
  }
}

/**
 * Who the client is: an API key or an access token (either may be `undefined`, as
 * `process.env.TASKWRIGHT_API_KEY` is), never both; without one only health, login and token answer.
 */
export type ClientCredential =
  | { readonly apiKey?: string | undefined; readonly accessToken?: never }
  | { readonly accessToken?: string | undefined; readonly apiKey?: never }

export type ClientOptions = ClientCredential & {
  /** Where the API is served: `http://127.0.0.1:3000`, or under a prefix, `https://example.com/tasks-api`. */
  readonly baseUrl: string | URL
  /** The `fetch` to use (default: the global one): a mock, `tw.handler`, or a proxy-aware fetch. */
  readonly fetch?: (request: Request) => Promise<Response>
  /** Headers sent with every request. */
  readonly headers?: Readonly<Record<string, string>>
}

/** A route of the contract: `"tasks.get"` → `GET /api/tasks/:id`. */
interface Route {
  readonly method: string
  readonly path: string
}

const routes = new Map<string, Route>()
HttpApi.reflect(TaskwrightApi, {
  onGroup: () => {},
  onEndpoint: ({ group, endpoint }) => {
    routes.set(`${group.identifier}.${endpoint.name}`, { method: endpoint.method, path: endpoint.path })
  }
})

interface CallInput {
  readonly path?: Readonly<Record<string, string | number>>
  readonly query?: object | undefined
  readonly body?: unknown
}

const queryString = (query: object | undefined): string => {
  if (query === undefined) return ""
  const params = new URLSearchParams()
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined) continue
    for (const item of Array.isArray(value) ? value : [value]) params.append(name, String(item))
  }
  const text = params.toString()
  return text === "" ? "" : `?${text}`
}

const parse = (text: string): unknown => {
  if (text === "") return undefined
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/**
 * A Promise client of the HTTP API. Each method sends one request and answers the response's
 * JSON; an answer outside 2xx rejects with {@link TaskwrightError} (the envelope's `code`,
 * `message` and `details`, with the response's `status`), and so does a request that never got an
 * answer (`code: "NETWORK_ERROR"`, `status: 0`, the underlying error as `cause`).
 *
 * @example
 * const client = makeClient({ baseUrl: "http://127.0.0.1:3000", apiKey: process.env.TASKWRIGHT_API_KEY })
 * const task = await client.tasks.create({ title: "Write the docs", priority: "high" })
 * const { tasks } = await client.tasks.list({ status: "backlog", limit: 10 })
 */
export const makeClient = (options: ClientOptions): TaskwrightClient => {
  const base = String(options.baseUrl).replace(/\/+$/, "")
  const doFetch = options.fetch ?? ((request: Request) => fetch(request))
  const credential = options.apiKey ?? options.accessToken
  const fixedHeaders: Record<string, string> = { accept: "application/json", ...options.headers }
  if (credential !== undefined) fixedHeaders.authorization = `Bearer ${credential}`

  const call = async <A>(name: string, input: CallInput = {}): Promise<A> => {
    const route = routes.get(name)
    if (route === undefined) throw new TaskwrightError("INTERNAL_ERROR", 0, `the contract has no operation ${name}`)
    const path = route.path.replace(/:([A-Za-z_]+)/g, (_, param: string) =>
      encodeURIComponent(String(input.path?.[param] ?? ""))
    )
    const url = `${base}${path}${queryString(input.query)}`
    const headers = new Headers(fixedHeaders)
    let body: string | undefined
    if (input.body !== undefined) {
      body = JSON.stringify(input.body)
      headers.set("content-type", "application/json")
    }
    let response: Response
    let text: string
    try {
      response = await doFetch(
        new Request(url, { method: route.method, headers, ...(body === undefined ? {} : { body }) })
      )
      text = await response.text()
    } catch (cause) {
      const error = new TaskwrightError(
        "NETWORK_ERROR",
        0,
        `${route.method} ${url} got no answer: ${cause instanceof Error ? cause.message : String(cause)}`
      )
      error.cause = cause
      throw error
    }
    const parsed = parse(text)
    if (!response.ok) throw TaskwrightError.fromEnvelope(response.status, parsed)
    return parsed as A
  }

  return {
    system: {
      health: () => call("system.health")
    },
    tasks: {
      list: (query) => call("tasks.list", { query }),
      get: (id) => call("tasks.get", { path: { id } }),
      create: (body) => call("tasks.create", { body }),
      update: (id, body) => call("tasks.update", { path: { id }, body }),
      delete: (id) => call("tasks.delete", { path: { id } })
    },
    projects: {
      list: (query) => call("projects.list", { query }),
      get: (id) => call("projects.get", { path: { id } }),
      create: (body) => call("projects.create", { body }),
      delete: (id, query) => call("projects.delete", { path: { id }, query })
    },
    labels: {
      list: (query) => call("labels.list", { query }),
      create: (body) => call("labels.create", { body })
    },
    runs: {
      start: (taskId, body) => call("runs.start", { path: { id: taskId }, body }),
      get: (runId) => call("runs.get", { path: { run_id: runId } }),
      logs: (runId, query) => call("runs.logs", { path: { run_id: runId }, query }),
      stop: (runId) => call("runs.stop", { path: { run_id: runId } })
    },
    reviews: {
      create: (taskId, body) => call("reviews.review", { path: { id: taskId }, body }),
      pullRequest: (body) => call("reviews.pullRequest", { body })
    },
    agents: {
      list: () => call("agents.list"),
      update: (name, body) => call("agents.update", { path: { name }, body })
    },
    keys: {
      list: (query) => call("keys.list", { query }),
      create: (body) => call("keys.create", { body }),
      rotate: (id) => call("keys.rotate", { path: { id } }),
      revoke: (id) => call("keys.revoke", { path: { id } }),
      usage: (id) => call("keys.usage", { path: { id } })
    },
    auth: {
      login: (body) => call("auth.login", { body }),
      logout: () => call("auth.logout"),
      refresh: () => call("auth.refresh"),
      token: (body) => call("auth.token", { body }),
      me: () => call("auth.me"),
      verify: (query) => call("auth.verify", { query })
    }
  }
}

/**
 * The Effect face: `HttpApiClient.make(TaskwrightApi)` against `baseUrl` with the credential sent
 * as a Bearer token. Provide an `HttpClient` (`FetchHttpClient.layer`, or `NodeHttpClient`'s).
 * Inputs and results are the schemas' decoded values; failures are the contract's error classes
 * (`NotFound`, `BadRequest`, ...), `HttpClientError` or `ParseError`.
 *
 * @example
 * const program = Effect.gen(function* () {
 *   const client = yield* makeEffectClient({ baseUrl: "http://127.0.0.1:3000", apiKey })
 *   return yield* client.tasks.list({ urlParams: {} })
 * }).pipe(Effect.provide(FetchHttpClient.layer))
 */
export const makeEffectClient = (options: ClientCredential & { readonly baseUrl: string | URL }) => {
  const credential = options.apiKey ?? options.accessToken
  return HttpApiClient.make(TaskwrightApi, {
    baseUrl: options.baseUrl,
    transformClient: (client) =>
      credential === undefined ? client : HttpClient.mapRequest(client, HttpClientRequest.bearerToken(credential))
  })
}

/** The client {@link makeEffectClient} answers. */
export type TaskwrightEffectClient = Effect.Effect.Success<ReturnType<typeof makeEffectClient>>
