/**
 * One contract, three faces. The same scenario — every resource's operations, bad inputs among
 * them, as several users and scopes — runs against
 *
 * - the fast HTTP face: the `node:http` listener on a real socket, through the typed client;
 * - the Effect-native HTTP face: the engine's `HttpApp` served by `@effect/platform-node`'s
 *   `NodeHttpServer` on a real socket, through the typed client;
 * - the in-process API: `tw.as(user)`, the same methods with the same arguments;
 *
 * The in-process face's operator operations are in it too: `tw.keys.create` (a key for any user,
 * no credential) answers as the admin's `POST /api/keys` with `user_id` does over HTTP.
 *
 * Each on a fresh engine, and the three transcripts (status, and body or error envelope, of every
 * step) must be identical once ids, secrets, timestamps and temporary paths are normalised. Then
 * requests only HTTP can make (malformed JSON, unknown routes and methods, HEAD, OPTIONS, no
 * credential, the documents) must be answered alike by the two HTTP faces.
 */
import { mkdirSync } from "node:fs"
import { createServer } from "node:http"
import { join } from "node:path"
import { HttpApi, type HttpApp, HttpServer, type HttpServerRequest } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { makeClient, TaskwrightApi, TaskwrightError, type TaskwrightOperations } from "@taskwright/api"
import { createHarness, git, type Harness } from "@taskwright/testing"
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

/** What a user can do: the typed client's resource groups, which `tw.as(user)` must match. */
type Ops = TaskwrightOperations
/** `operator`: the admin over HTTP; in process, the admin with `tw.keys.create` for keys.create. */
type Actor = "ada" | "bob" | "admin" | "adaReadOnly" | "operator"

interface Face {
  readonly name: string
  readonly h: Harness
  ops(actor: Actor): Ops
  /** The HTTP status of the last answer (HTTP faces). */
  readonly lastStatus: () => number | undefined
  readonly url: string | undefined
  close(): Promise<void>
}

/** The status each endpoint answers on success, from the contract. */
const successStatus = new Map<string, number>()
HttpApi.reflect(TaskwrightApi, {
  onGroup: () => {},
  onEndpoint: ({ group, endpoint, successes }) => {
    successStatus.set(`${group.identifier}.${endpoint.name}`, [...successes.keys()][0] ?? 200)
  }
})

/** Serves an `HttpApp` with `@effect/platform-node`'s `NodeHttpServer` on a loopback port. */
const serveEffect = async (app: HttpApp.Default<never, HttpServerRequest.HttpServerRequest>) => {
  const runtime = ManagedRuntime.make(
    HttpServer.serve(app).pipe(Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })))
  )
  const url = await runtime.runPromise(HttpServer.addressFormattedWith((address) => Effect.succeed(address)))
  return { url, close: () => runtime.dispose() }
}

/** A fresh engine with Ada (every user scope), Bob, the admin, and a project directory for Ada. */
const makeFace = async (name: "fast" | "effect" | "in-process"): Promise<Face> => {
  const h = await createHarness({ listen: name === "fast" })
  const bob = await h.createUser()
  const readOnly = await h.tw.keys.create({ user: h.user.id, name: "read only", scopes: ["tasks:read"] })
  const site = join(h.projectsRoot, "site")
  mkdirSync(site)
  git(site, "init", "-q", "-b", "main")
  git(site, "commit", "-q", "--allow-empty", "-m", "initial")
  if (name === "in-process") {
    // The keys endpoint's body as `tw.keys.create` takes it: `user` and `expires` for `user_id` and `expires_at`.
    const operatorCreate: Ops["keys"]["create"] = ({ user_id, expires_at, ...rest }) =>
      h.tw.keys.create(bad({ ...rest, user: user_id, ...(expires_at === undefined ? {} : { expires: expires_at }) }))
    const as: Record<Actor, Ops> = {
      ada: h.as,
      bob: h.tw.as(bob.id),
      admin: h.admin,
      adaReadOnly: h.tw.as(h.user.id, { scopes: ["tasks:read"] }),
      operator: { ...h.admin, keys: { ...h.admin.keys, create: operatorCreate } }
    }
    return { name, h, ops: (actor) => as[actor], lastStatus: () => undefined, url: undefined, close: () => h.close() }
  }
  let status: number | undefined
  const served = name === "effect" ? await serveEffect(h.tw.effect.app) : undefined
  const url = served?.url ?? h.url
  const client = (apiKey: string): Ops =>
    makeClient({
      baseUrl: url,
      apiKey,
      fetch: async (request) => {
        const response = await fetch(request)
        status = response.status
        return response
      }
    })
  const clients: Record<Actor, Ops> = {
    ada: client(h.user.key),
    bob: client(bob.key),
    admin: client(h.adminKey),
    adaReadOnly: client(readOnly.secret),
    operator: client(h.adminKey)
  }
  return {
    name,
    h,
    ops: (actor) => clients[actor],
    lastStatus: () => status,
    url,
    close: async () => {
      await served?.close()
      await h.close()
    }
  }
}

/** Ids and values a step keeps for later ones, per face. */
type Context = Record<string, string | number>

interface Step {
  readonly name: string
  /** The contract's endpoint (`group.endpoint`): its success status is the in-process status. */
  readonly endpoint: string
  readonly actor: Actor
  readonly run: (ops: Ops, ctx: Context) => Promise<unknown>
  /** Keeps what later steps need. */
  readonly keep?: (result: Record<string, unknown>, ctx: Context) => void
  /** The part of a success to compare (default: all of it). */
  readonly pick?: (result: Record<string, unknown>) => unknown
}

/** Bad inputs, passed where the types would refuse them: the point is what each face answers. */
const bad = <T>(value: unknown): T => value as T

const num = (ctx: Context, key: string): number => Number(ctx[key])

/** A list in name order: items made in the same millisecond have no other order to compare. */
const byName = (items: unknown) =>
  [...(items as ReadonlyArray<{ readonly name: string; readonly scopes?: unknown }>)].sort((a, b) =>
    a.name.localeCompare(b.name)
  )
const str = (ctx: Context, key: string): string => String(ctx[key])

const scenario: ReadonlyArray<Step> = [
  // Tasks: create, with every way a body can be wrong.
  {
    name: "create a task",
    endpoint: "tasks.create",
    actor: "ada",
    run: (o) => o.tasks.create({ title: "  First  ", priority: "high", labels: ["a", "b"] }),
    keep: (r, ctx) => {
      ctx.task = Number(r.id)
    }
  },
  { name: "empty title", endpoint: "tasks.create", actor: "ada", run: (o) => o.tasks.create({ title: "" }) },
  {
    name: "title too long",
    endpoint: "tasks.create",
    actor: "ada",
    run: (o) => o.tasks.create({ title: "x".repeat(501) })
  },
  {
    name: "unknown priority",
    endpoint: "tasks.create",
    actor: "ada",
    run: (o) => o.tasks.create(bad({ title: "t", priority: "bogus" }))
  },
  {
    name: "read-only status",
    endpoint: "tasks.create",
    actor: "ada",
    run: (o) => o.tasks.create(bad({ title: "t", status: "done" }))
  },
  {
    name: "unknown field",
    endpoint: "tasks.create",
    actor: "ada",
    run: (o) => o.tasks.create(bad({ title: "t", extra: 1 }))
  },
  { name: "title not a string", endpoint: "tasks.create", actor: "ada", run: (o) => o.tasks.create(bad({ title: 5 })) },
  { name: "no title", endpoint: "tasks.create", actor: "ada", run: (o) => o.tasks.create(bad({})) },
  {
    name: "labels not an array",
    endpoint: "tasks.create",
    actor: "ada",
    run: (o) => o.tasks.create(bad({ title: "t", labels: "a" }))
  },
  {
    name: "a body that is not an object",
    endpoint: "tasks.create",
    actor: "ada",
    run: (o) => o.tasks.create(bad([1, 2]))
  },
  {
    name: "malformed project id",
    endpoint: "tasks.create",
    actor: "ada",
    run: (o) => o.tasks.create(bad({ title: "t", project_id: "proj_x" }))
  },
  {
    name: "missing project",
    endpoint: "tasks.create",
    actor: "ada",
    run: (o) => o.tasks.create({ title: "t", project_id: "proj_0000000000000000" })
  },
  { name: "NUL in a title", endpoint: "tasks.create", actor: "ada", run: (o) => o.tasks.create({ title: "a\u0000b" }) },
  {
    name: "a lone surrogate in a label",
    endpoint: "tasks.create",
    actor: "ada",
    run: (o) => o.tasks.create({ title: "t", labels: ["ok", "x\udfff"] })
  },
  {
    name: "second task",
    endpoint: "tasks.create",
    actor: "ada",
    run: (o) => o.tasks.create({ title: "Second", description: "more" })
  },
  { name: "bob's task", endpoint: "tasks.create", actor: "bob", run: (o) => o.tasks.create({ title: "Bob's" }) },
  // Tasks: list, paging and filters.
  { name: "list, defaults", endpoint: "tasks.list", actor: "ada", run: (o) => o.tasks.list() },
  {
    name: "list, a page",
    endpoint: "tasks.list",
    actor: "ada",
    run: (o) => o.tasks.list({ limit: 1, offset: 1, status: "backlog" })
  },
  { name: "list, limit as text", endpoint: "tasks.list", actor: "ada", run: (o) => o.tasks.list({ limit: "1" }) },
  { name: "list, limit too big", endpoint: "tasks.list", actor: "ada", run: (o) => o.tasks.list({ limit: 100_000 }) },
  { name: "list, negative offset", endpoint: "tasks.list", actor: "ada", run: (o) => o.tasks.list({ offset: -5 }) },
  {
    name: "list, limit not a number",
    endpoint: "tasks.list",
    actor: "ada",
    run: (o) => o.tasks.list({ limit: "abc" })
  },
  {
    name: "list, unknown status",
    endpoint: "tasks.list",
    actor: "ada",
    run: (o) => o.tasks.list(bad({ status: "bogus" }))
  },
  { name: "list, unknown parameter", endpoint: "tasks.list", actor: "ada", run: (o) => o.tasks.list(bad({ x: "1" })) },
  { name: "bob's list", endpoint: "tasks.list", actor: "bob", run: (o) => o.tasks.list() },
  // Tasks: get, update, ownership, scopes.
  { name: "get", endpoint: "tasks.get", actor: "ada", run: (o, c) => o.tasks.get(num(c, "task")) },
  { name: "get a missing task", endpoint: "tasks.get", actor: "ada", run: (o) => o.tasks.get(999) },
  { name: "get a malformed id", endpoint: "tasks.get", actor: "ada", run: (o) => o.tasks.get(bad("abc")) },
  { name: "get id 0", endpoint: "tasks.get", actor: "ada", run: (o) => o.tasks.get(0) },
  { name: "get 1e3", endpoint: "tasks.get", actor: "ada", run: (o) => o.tasks.get(bad("1e3")) },
  { name: "another user's task", endpoint: "tasks.get", actor: "bob", run: (o, c) => o.tasks.get(num(c, "task")) },
  {
    name: "update",
    endpoint: "tasks.update",
    actor: "ada",
    run: (o, c) => o.tasks.update(num(c, "task"), { status: "in_progress", labels: ["c"] })
  },
  {
    name: "update nothing",
    endpoint: "tasks.update",
    actor: "ada",
    run: (o, c) => o.tasks.update(num(c, "task"), bad({}))
  },
  {
    name: "update to a bad status",
    endpoint: "tasks.update",
    actor: "ada",
    run: (o, c) => o.tasks.update(num(c, "task"), bad({ status: "bogus" }))
  },
  {
    name: "update an unknown field",
    endpoint: "tasks.update",
    actor: "ada",
    run: (o, c) => o.tasks.update(num(c, "task"), bad({ id: 5 }))
  },
  {
    name: "update a missing task",
    endpoint: "tasks.update",
    actor: "ada",
    run: (o) => o.tasks.update(999, { status: "todo" })
  },
  {
    name: "update another user's task",
    endpoint: "tasks.update",
    actor: "bob",
    run: (o, c) => o.tasks.update(num(c, "task"), { status: "todo" })
  },
  {
    name: "read-only scope lists",
    endpoint: "tasks.list",
    actor: "adaReadOnly",
    run: (o) => o.tasks.list({ limit: 1 })
  },
  {
    name: "read-only scope cannot create",
    endpoint: "tasks.create",
    actor: "adaReadOnly",
    run: (o) => o.tasks.create({ title: "no" })
  },
  {
    name: "read-only scope cannot see projects",
    endpoint: "projects.list",
    actor: "adaReadOnly",
    run: (o) => o.projects.list()
  },
  // Labels.
  {
    name: "create a label",
    endpoint: "labels.create",
    actor: "ada",
    run: (o) => o.labels.create({ name: "bug", color: "#ff0000" })
  },
  {
    name: "the same label again",
    endpoint: "labels.create",
    actor: "ada",
    run: (o) => o.labels.create({ name: "bug", color: "#00ff00" })
  },
  {
    name: "a bad colour",
    endpoint: "labels.create",
    actor: "ada",
    run: (o) => o.labels.create({ name: "x", color: "red" })
  },
  { name: "list labels", endpoint: "labels.list", actor: "ada", run: (o) => o.labels.list() },
  // Projects.
  {
    name: "create a project",
    endpoint: "projects.create",
    actor: "ada",
    run: (o, c) => o.projects.create({ name: "Site", path: str(c, "site") }),
    keep: (r, ctx) => {
      ctx.project = String(r.id)
    }
  },
  {
    name: "the same directory again",
    endpoint: "projects.create",
    actor: "ada",
    run: (o, c) => o.projects.create({ name: "Again", path: str(c, "site") })
  },
  {
    name: "a relative path",
    endpoint: "projects.create",
    actor: "ada",
    run: (o) => o.projects.create({ name: "Rel", path: "relative/dir" })
  },
  {
    name: "a path outside the projects root",
    endpoint: "projects.create",
    actor: "ada",
    run: (o) => o.projects.create({ name: "Etc", path: "/etc" })
  },
  {
    name: "no name",
    endpoint: "projects.create",
    actor: "ada",
    run: (o, c) => o.projects.create(bad({ path: str(c, "site") }))
  },
  { name: "get the project", endpoint: "projects.get", actor: "ada", run: (o, c) => o.projects.get(str(c, "project")) },
  {
    name: "another user's project",
    endpoint: "projects.get",
    actor: "bob",
    run: (o, c) => o.projects.get(str(c, "project"))
  },
  {
    name: "a missing project",
    endpoint: "projects.get",
    actor: "ada",
    run: (o) => o.projects.get("proj_0000000000000000")
  },
  { name: "a malformed project id", endpoint: "projects.get", actor: "ada", run: (o) => o.projects.get("nope") },
  {
    name: "list projects",
    endpoint: "projects.list",
    actor: "ada",
    run: (o) => o.projects.list(),
    // Newest first; two made in the same millisecond come in the order of their random ids.
    pick: (r) => ({ ...r, projects: byName(r.projects) })
  },
  {
    name: "a task in the project",
    endpoint: "tasks.create",
    actor: "ada",
    run: (o, c) => o.tasks.create({ title: "Add HARNESS.md", project_id: str(c, "project") }),
    keep: (r, ctx) => {
      ctx.projectTask = Number(r.id)
    }
  },
  {
    name: "delete a project with tasks",
    endpoint: "projects.delete",
    actor: "ada",
    run: (o, c) => o.projects.delete(str(c, "project"))
  },
  {
    name: "delete with a bad cascade",
    endpoint: "projects.delete",
    actor: "ada",
    run: (o, c) => o.projects.delete(str(c, "project"), bad({ cascade: "yes" }))
  },
  // Agents.
  { name: "list agents", endpoint: "agents.list", actor: "ada", run: (o) => o.agents.list() },
  {
    name: "configure an agent without admin",
    endpoint: "agents.update",
    actor: "ada",
    run: (o) => o.agents.update("codex", { enabled: false })
  },
  {
    name: "configure an agent with a bad value",
    endpoint: "agents.update",
    actor: "admin",
    run: (o) => o.agents.update("codex", bad({ enabled: "yes" }))
  },
  {
    name: "configure an agent with a bad name",
    endpoint: "agents.update",
    actor: "admin",
    run: (o) => o.agents.update("Bad Name", { enabled: false })
  },
  {
    name: "configure nothing",
    endpoint: "agents.update",
    actor: "admin",
    run: (o) => o.agents.update("codex", bad({}))
  },
  {
    name: "configure an agent",
    endpoint: "agents.update",
    actor: "admin",
    run: (o) => o.agents.update("codex", { model: "gpt-x", timeout_s: 60 })
  },
  // Runs and reviews.
  {
    name: "run an unknown agent",
    endpoint: "runs.start",
    actor: "ada",
    run: (o, c) => o.runs.start(num(c, "projectTask"), { agent: "nope" })
  },
  {
    name: "run with a bad branch",
    endpoint: "runs.start",
    actor: "ada",
    run: (o, c) => o.runs.start(num(c, "projectTask"), { agent: "scripted", branch: "a..b" })
  },
  {
    name: "run on a task without a project",
    endpoint: "runs.start",
    actor: "ada",
    run: (o, c) => o.runs.start(num(c, "task"), { agent: "scripted" })
  },
  {
    name: "run on a missing task",
    endpoint: "runs.start",
    actor: "ada",
    run: (o) => o.runs.start(999, { agent: "scripted" })
  },
  {
    name: "run without a body's agent",
    endpoint: "runs.start",
    actor: "ada",
    run: (o, c) => o.runs.start(num(c, "projectTask"), bad({}))
  },
  {
    name: "run on another user's task",
    endpoint: "runs.start",
    actor: "bob",
    run: (o, c) => o.runs.start(num(c, "projectTask"), { agent: "scripted" })
  },
  {
    name: "run the scripted agent",
    endpoint: "runs.start",
    actor: "ada",
    run: (o, c) => o.runs.start(num(c, "projectTask"), { agent: "scripted", autonomy: "workspace-write" }),
    keep: (r, ctx) => {
      ctx.run = String(r.run_id)
    }
  },
  {
    name: "a second run on a busy task",
    endpoint: "runs.start",
    actor: "ada",
    run: (o, c) => o.runs.start(num(c, "projectTask"), { agent: "scripted" })
  },
  {
    name: "the run, once it has ended",
    endpoint: "runs.get",
    actor: "ada",
    run: async (o, c) => {
      const deadline = Date.now() + 20_000
      for (;;) {
        const run = await o.runs.get(str(c, "run"))
        if (run.status !== "running" || Date.now() > deadline) return run
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
    }
  },
  {
    name: "the run's log",
    endpoint: "runs.logs",
    actor: "ada",
    run: (o, c) => o.runs.logs(str(c, "run"), { limit: "1000" }),
    // Process groups differ from run to run; the sequence of entries does not.
    pick: (r) =>
      (r.logs as ReadonlyArray<{ level: string; message: string }>).map(
        (l) => `${l.level} ${l.message.replace(/process group \d+/, "process group <n>")}`
      )
  },
  {
    name: "the log, limit too big",
    endpoint: "runs.logs",
    actor: "ada",
    run: (o, c) => o.runs.logs(str(c, "run"), { limit: "5000" })
  },
  {
    name: "the log since a bad time",
    endpoint: "runs.logs",
    actor: "ada",
    run: (o, c) => o.runs.logs(str(c, "run"), { since: "yesterday" })
  },
  { name: "another user's run", endpoint: "runs.get", actor: "bob", run: (o, c) => o.runs.get(str(c, "run")) },
  { name: "a missing run", endpoint: "runs.get", actor: "ada", run: (o) => o.runs.get("run_0000000000000000") },
  { name: "a malformed run id", endpoint: "runs.get", actor: "ada", run: (o) => o.runs.get("run_!") },
  { name: "stop an ended run", endpoint: "runs.stop", actor: "ada", run: (o, c) => o.runs.stop(str(c, "run")) },
  {
    name: "stop without agents:run",
    endpoint: "runs.stop",
    actor: "adaReadOnly",
    run: (o, c) => o.runs.stop(str(c, "run"))
  },
  {
    name: "review with a bad action",
    endpoint: "reviews.review",
    actor: "ada",
    run: (o, c) => o.reviews.create(num(c, "projectTask"), bad({ action: "bogus" }))
  },
  {
    name: "review a task not in review",
    endpoint: "reviews.review",
    actor: "ada",
    run: (o, c) => o.reviews.create(num(c, "task"), { action: "approve" })
  },
  {
    name: "review a missing task",
    endpoint: "reviews.review",
    actor: "ada",
    run: (o) => o.reviews.create(999, { action: "approve" })
  },
  {
    name: "approve the run's work",
    endpoint: "reviews.review",
    actor: "ada",
    run: (o, c) => o.reviews.create(num(c, "projectTask"), { action: "approve" })
  },
  {
    name: "review a pull request named badly",
    endpoint: "reviews.pullRequest",
    actor: "ada",
    run: (o) => o.reviews.pullRequest(bad({ repo: "not a repo", pr_number: 0, agent: "scripted", extra: 1 }))
  },
  {
    name: "review a pull request without agents:run",
    endpoint: "reviews.pullRequest",
    actor: "adaReadOnly",
    run: (o) => o.reviews.pullRequest({ repo: "octo-org/hello", pr_number: 1, agent: "scripted" })
  },
  // Keys.
  {
    name: "create a key",
    endpoint: "keys.create",
    actor: "ada",
    run: (o) => o.keys.create({ name: "ci", scopes: ["tasks:read"] }),
    keep: (r, ctx) => {
      ctx.key = String(r.id)
    }
  },
  {
    name: "a key with admin",
    endpoint: "keys.create",
    actor: "ada",
    run: (o) => o.keys.create({ name: "x", scopes: ["admin"] })
  },
  {
    name: "a key with an unknown scope",
    endpoint: "keys.create",
    actor: "ada",
    run: (o) => o.keys.create(bad({ name: "x", scopes: ["bogus"] }))
  },
  {
    name: "a key that expired",
    endpoint: "keys.create",
    actor: "ada",
    run: (o) => o.keys.create({ name: "x", scopes: ["tasks:read"], expires_at: "2000-01-01T00:00:00.000Z" })
  },
  {
    name: "a key with an empty name",
    endpoint: "keys.create",
    actor: "ada",
    run: (o) => o.keys.create(bad({ name: "", scopes: ["tasks:read"] }))
  },
  {
    name: "a key with scopes as a string",
    endpoint: "keys.create",
    actor: "ada",
    run: (o) => o.keys.create(bad({ name: "x", scopes: "tasks:read" }))
  },
  {
    name: "a key with an expiry that is not a time",
    endpoint: "keys.create",
    actor: "ada",
    run: (o) => o.keys.create({ name: "x", scopes: ["tasks:read"], expires_at: "bogus" })
  },
  {
    name: "a key expiring at a time without milliseconds",
    endpoint: "keys.create",
    actor: "ada",
    run: (o) => o.keys.create({ name: "no ms", scopes: ["tasks:read"], expires_at: "2099-01-01T02:00:00+02:00" })
  },
  // Keys made by the operator: the admin's POST /api/keys with user_id, in process tw.keys.create.
  {
    name: "the operator makes Ada a key",
    endpoint: "keys.create",
    actor: "operator",
    run: (o, c) => o.keys.create({ user_id: str(c, "ada"), name: "  deploy  ", scopes: ["tasks:read", "tasks:write"] })
  },
  {
    name: "the operator gives Ada admin",
    endpoint: "keys.create",
    actor: "operator",
    run: (o, c) => o.keys.create({ user_id: str(c, "ada"), name: "x", scopes: ["admin"] })
  },
  {
    name: "the operator's key with a NUL in its name",
    endpoint: "keys.create",
    actor: "operator",
    run: (o, c) => o.keys.create({ user_id: str(c, "ada"), name: "a\u0000b", scopes: ["tasks:read"] })
  },
  {
    name: "the operator's key with a 5,000-character name",
    endpoint: "keys.create",
    actor: "operator",
    run: (o, c) => o.keys.create({ user_id: str(c, "ada"), name: "x".repeat(5000), scopes: ["tasks:read"] })
  },
  {
    name: "the operator's key with scopes as a string",
    endpoint: "keys.create",
    actor: "operator",
    run: (o, c) => o.keys.create(bad({ user_id: str(c, "ada"), name: "x", scopes: "tasks:read" }))
  },
  {
    name: "the operator's key with an expiry that is not a time",
    endpoint: "keys.create",
    actor: "operator",
    run: (o, c) => o.keys.create({ user_id: str(c, "ada"), name: "x", scopes: ["tasks:read"], expires_at: "bogus" })
  },
  {
    name: "the operator's key that expired",
    endpoint: "keys.create",
    actor: "operator",
    run: (o, c) =>
      o.keys.create({ user_id: str(c, "ada"), name: "x", scopes: ["tasks:read"], expires_at: "2000-01-01T00:00:00Z" })
  },
  {
    name: "the operator's key with an unknown field",
    endpoint: "keys.create",
    actor: "operator",
    run: (o, c) => o.keys.create(bad({ user_id: str(c, "ada"), name: "x", scopes: ["tasks:read"], extra: 1 }))
  },
  {
    name: "the operator's key for a malformed user id",
    endpoint: "keys.create",
    actor: "operator",
    run: (o) => o.keys.create({ user_id: "usr_!", name: "x", scopes: ["tasks:read"] })
  },
  {
    name: "the operator's key for a missing user",
    endpoint: "keys.create",
    actor: "operator",
    run: (o) => o.keys.create({ user_id: "usr_0000000000000000", name: "x", scopes: ["tasks:read"] })
  },
  {
    name: "list keys",
    endpoint: "keys.list",
    actor: "ada",
    run: (o) => o.keys.list(),
    // Usage differs by design: an HTTP request is made with a key, an in-process call with none.
    pick: (r) => byName(r.keys).map((k) => ({ name: k.name, scopes: k.scopes }))
  },
  { name: "the new key's usage", endpoint: "keys.usage", actor: "ada", run: (o, c) => o.keys.usage(str(c, "key")) },
  { name: "another user's key", endpoint: "keys.usage", actor: "bob", run: (o, c) => o.keys.usage(str(c, "key")) },
  { name: "rotate the key", endpoint: "keys.rotate", actor: "ada", run: (o, c) => o.keys.rotate(str(c, "key")) },
  { name: "revoke the key", endpoint: "keys.revoke", actor: "ada", run: (o, c) => o.keys.revoke(str(c, "key")) },
  { name: "revoke it again", endpoint: "keys.revoke", actor: "ada", run: (o, c) => o.keys.revoke(str(c, "key")) },
  { name: "a malformed key id", endpoint: "keys.revoke", actor: "ada", run: (o) => o.keys.revoke("key") },
  // Deletion last.
  { name: "delete a task", endpoint: "tasks.delete", actor: "ada", run: (o, c) => o.tasks.delete(num(c, "task")) },
  { name: "delete it again", endpoint: "tasks.delete", actor: "ada", run: (o, c) => o.tasks.delete(num(c, "task")) },
  {
    name: "delete the project and its tasks",
    endpoint: "projects.delete",
    actor: "ada",
    run: (o, c) => o.projects.delete(str(c, "project"), { cascade: "true" })
  },
  {
    name: "the project is gone",
    endpoint: "projects.get",
    actor: "ada",
    run: (o, c) => o.projects.get(str(c, "project"))
  },
  { name: "the end of the board", endpoint: "tasks.list", actor: "ada", run: (o) => o.tasks.list() }
]

interface Outcome {
  readonly step: string
  readonly status: number | undefined
  readonly body: unknown
}

const runScenario = async (face: Face): Promise<ReadonlyArray<Outcome>> => {
  const ctx: Context = { site: join(face.h.projectsRoot, "site"), ada: face.h.user.id }
  const out: Array<Outcome> = []
  for (const step of scenario) {
    try {
      const result = (await step.run(face.ops(step.actor), ctx)) as Record<string, unknown>
      step.keep?.(result, ctx)
      const status = face.lastStatus() ?? successStatus.get(step.endpoint)
      out.push({ step: step.name, status, body: JSON.parse(JSON.stringify(step.pick?.(result) ?? result)) })
    } catch (error) {
      if (!(error instanceof TaskwrightError)) {
        out.push({ step: step.name, status: undefined, body: { unexpected: String(error) } })
        continue
      }
      out.push({ step: step.name, status: error.status, body: JSON.parse(JSON.stringify(error)) })
    }
  }
  return out
}

/**
 * The transcript with what differs between engines replaced: ids by their order of appearance,
 * secrets, timestamps, commit hashes, and the face's temporary directories.
 */
const normalise = (value: unknown, face: Face): unknown => {
  const seen = new Map<string, string>()
  const text = JSON.stringify(value)
    .split(face.h.projectsRoot)
    .join("<projects>")
    .replace(/\b([a-z]{2,4})_[0-9A-Za-z]{16}\b/g, (id, kind: string) => {
      if (!seen.has(id)) seen.set(id, `<${kind}:${[...seen.keys()].filter((k) => k.startsWith(kind)).length + 1}>`)
      return seen.get(id) ?? id
    })
    .replace(/twk_[0-9A-Za-z]+/g, "<secret>")
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, "<time>")
    .replace(/\b[0-9a-f]{40}\b|\b[0-9a-f]{12}\b/g, "<sha>")
  return JSON.parse(text)
}

describe("one contract across the fast HTTP face, the Effect-native HTTP face and the in-process API", () => {
  const faces: Array<Face> = []
  const transcripts = new Map<string, unknown>()

  beforeAll(async () => {
    for (const name of ["fast", "effect", "in-process"] as const) {
      const face = await makeFace(name)
      faces.push(face)
      transcripts.set(name, normalise(await runScenario(face), face))
    }
  }, 120_000)
  afterAll(async () => {
    for (const face of faces) await face.close()
  })

  it("the in-process API has the typed client's shape", () => {
    // A compile-time check as much as a run-time one: `tw.as(user)` is assignable to the client's groups.
    const ops: Ops | undefined = faces.find((f) => f.name === "in-process")?.ops("ada")
    expect(Object.keys(ops ?? {})).toEqual(
      expect.arrayContaining(["agents", "keys", "labels", "projects", "reviews", "runs", "tasks"])
    )
  })

  it("covers every operation of the in-process API", () => {
    const used = new Set(scenario.map((s) => s.endpoint))
    const missing = [...successStatus.keys()].filter(
      (name) => !used.has(name) && !name.startsWith("auth.") && !name.startsWith("system.")
    )
    expect(missing).toEqual([])
  })

  it("succeeds and fails where it should (sanity of the scenario on the fast face)", () => {
    const fast = transcripts.get("fast") as ReadonlyArray<Outcome>
    const status = (name: string) => fast.find((o) => o.step === name)?.status
    expect(status("create a task")).toBe(201)
    expect(status("empty title")).toBe(400)
    expect(status("another user's task")).toBe(403)
    expect(status("read-only scope cannot create")).toBe(403)
    expect(status("get a missing task")).toBe(404)
    expect(status("the same label again")).toBe(409)
    expect(status("run the scripted agent")).toBe(201)
    expect(status("the operator makes Ada a key")).toBe(201)
    expect(status("the operator gives Ada admin")).toBe(400)
    expect(status("the operator's key with scopes as a string")).toBe(400)
    expect(status("the operator's key that expired")).toBe(400)
    expect(status("the operator's key for a missing user")).toBe(404)
    expect(fast.find((o) => o.step === "the run, once it has ended")?.body).toMatchObject({ status: "completed" })
    expect(fast.filter((o) => o.status === undefined)).toEqual([])
  })

  it.each(["effect", "in-process"])("the %s face answers exactly as the fast face", (name) => {
    const fast = transcripts.get("fast") as ReadonlyArray<Outcome>
    const other = transcripts.get(name) as ReadonlyArray<Outcome>
    // Step by step, so that a failure names the step.
    for (const [i, outcome] of fast.entries()) expect(other[i], outcome.step).toEqual(outcome)
    expect(other.length).toBe(fast.length)
  })

  describe("requests only HTTP can make", () => {
    const httpFaces = () => faces.filter((f) => f.url !== undefined)

    const exchange = async (face: Face, method: string, path: string, init: RequestInit = {}) => {
      const response = await fetch(`${face.url}${path}`, { method, ...init })
      const text = await response.text()
      let body: unknown = text
      try {
        body = text === "" ? "" : JSON.parse(text)
      } catch {
        // not JSON
      }
      return normalise(
        {
          status: response.status,
          type: response.headers.get("content-type"),
          allow: response.headers.get("allow"),
          limit: response.headers.get("x-ratelimit-limit"),
          body: typeof body === "string" && body.length > 200 ? `${body.length} characters` : body
        },
        face
      )
    }
    const json = (face: Face) => ({ authorization: `Bearer ${face.h.user.key}`, "content-type": "application/json" })

    const cases: ReadonlyArray<readonly [string, (face: Face) => Promise<unknown>]> = [
      ["malformed JSON", (f) => exchange(f, "POST", "/api/tasks", { headers: json(f), body: '{"title":' })],
      [
        "a body that is not JSON",
        (f) =>
          exchange(f, "POST", "/api/tasks", { headers: { ...json(f), "content-type": "text/plain" }, body: "title" })
      ],
      [
        "JSON nested too deep",
        (f) => exchange(f, "POST", "/api/tasks", { headers: json(f), body: `${"[".repeat(200)}${"]".repeat(200)}` })
      ],
      [
        "a body over the limit",
        (f) =>
          exchange(f, "POST", "/api/tasks", {
            headers: json(f),
            body: JSON.stringify({ title: "t", description: "x".repeat(2_000_000) })
          })
      ],
      ["no credential", (f) => exchange(f, "GET", "/api/tasks")],
      [
        "a wrong credential",
        (f) => exchange(f, "GET", "/api/tasks", { headers: { authorization: "Bearer twk_nope" } })
      ],
      ["an unknown route", (f) => exchange(f, "GET", "/api/nope", { headers: json(f) })],
      ["a method the route does not have", (f) => exchange(f, "DELETE", "/api/labels", { headers: json(f) })],
      ["HEAD", (f) => exchange(f, "HEAD", "/api/health")],
      ["OPTIONS", (f) => exchange(f, "OPTIONS", "/api/tasks")],
      ["health", (f) => exchange(f, "GET", "/api/health")],
      ["the OpenAPI document", (f) => exchange(f, "GET", "/api/openapi.json")],
      ["the API reference", (f) => exchange(f, "GET", "/api/docs")],
      ["who am I", (f) => exchange(f, "GET", "/api/auth/me", { headers: json(f) })],
      ["verify for a proxy", (f) => exchange(f, "GET", "/api/auth/verify?scope=admin", { headers: json(f) })],
      [
        "login with a bad body",
        (f) => exchange(f, "POST", "/api/auth/login", { headers: { "content-type": "application/json" }, body: "{}" })
      ],
      ["a percent-encoded NUL in a path", (f) => exchange(f, "GET", "/api/tasks/%00", { headers: json(f) })]
    ]

    it.each(cases)("%s", async (_, request) => {
      const [fast, effect] = httpFaces()
      if (fast === undefined || effect === undefined) throw new Error("two HTTP faces expected")
      expect(await request(effect)).toEqual(await request(fast))
    })
  })
})
