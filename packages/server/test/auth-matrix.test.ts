/**
 * The authorization matrix: every endpoint of the contract (read from it, so a new endpoint is
 * covered the day it is added) × every kind of caller, with the expected status and the common
 * error envelope:
 *
 *   no credential · malformed · unknown key · revoked key · expired key · expired JWT ·
 *   tampered JWT · alg:none JWT · missing scope · other user's resource · admin
 *
 * Protected endpoints answer 401 (with `WWW-Authenticate: Bearer`) to the first eight, 403 to a
 * credential without the endpoint's scope and to another user's resource, and serve an admin.
 * Public endpoints ignore credentials altogether.
 */
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { HttpApi } from "@effect/platform"
import { RequiredScope, TaskwrightApi } from "@taskwright/api"
import { randomBase62 } from "@taskwright/core"
import { newApiKeySecret } from "@taskwright/core/internal"
import { startTestServer, type TestServer, testStores } from "@taskwright/testing"
import { Context, Option } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  accessToken,
  createKey,
  createPasswordUser,
  decodeJwt,
  exec,
  forgeJwt,
  type PasswordUser
} from "./auth-helpers.js"

const SECRET = "matrix-secret-matrix-secret-matrix-secret"

interface Endpoint {
  readonly name: string
  readonly method: string
  readonly path: string
  readonly requirement: string
}

/** Every endpoint of the contract, with its RequiredScope. */
const endpoints: ReadonlyArray<Endpoint> = (() => {
  const out: Array<Endpoint> = []
  HttpApi.reflect(TaskwrightApi, {
    onGroup: () => {},
    onEndpoint: ({ group, endpoint, mergedAnnotations }) => {
      out.push({
        name: `${group.identifier}.${endpoint.name}`,
        method: endpoint.method,
        path: endpoint.path,
        requirement: Option.getOrElse(Context.getOption(mergedAnnotations, RequiredScope), () => "none")
      })
    }
  })
  return out
})()

interface Sample {
  readonly path: string
  readonly body?: unknown
}

/** The world the requests run in: users, their credentials, and resources made per request. */
interface World {
  readonly s: TestServer
  readonly alice: { id: string; key: string }
  readonly bob: { id: string; key: string }
  readonly person: PasswordUser
  readonly projectDir: string
  /** A new directory for a project (a location belongs to one owner, so each project gets its own). */
  freshDir(): Promise<string>
  task(owner: { key: string }): Promise<number>
  project(owner: { key: string }): Promise<string>
  apiKey(owner: { key: string }): Promise<string>
  run(owner: { id: string; key: string }): Promise<string>
}

/**
 * Per endpoint: a request for the credential columns (any well-formed request), the request of
 * another user's resource (alice on bob's), and what an admin gets for bob's resource.
 */
interface Spec {
  readonly sample: (w: World) => Promise<Sample> | Sample
  readonly otherUsers?: (w: World) => Promise<Sample>
  readonly admin: { readonly sample: (w: World) => Promise<Sample> | Sample; readonly status: number }
  /** For `authenticated` endpoints: what a credential holding only `tasks:read` gets. */
  readonly weakStatus?: number
  /** For public endpoints: the answer whatever credential is sent. */
  readonly publicStatus?: number
}

const specs: Record<string, Spec> = {
  "tasks.list": {
    sample: () => ({ path: "/api/tasks" }),
    admin: { sample: () => ({ path: "/api/tasks" }), status: 200 }
  },
  "tasks.get": {
    sample: () => ({ path: "/api/tasks/1" }),
    otherUsers: async (w) => ({ path: `/api/tasks/${await w.task(w.bob)}` }),
    admin: { sample: async (w) => ({ path: `/api/tasks/${await w.task(w.bob)}` }), status: 200 }
  },
  "tasks.create": {
    sample: () => ({ path: "/api/tasks", body: { title: "m" } }),
    otherUsers: async (w) => ({ path: "/api/tasks", body: { title: "m", project_id: await w.project(w.bob) } }),
    admin: {
      sample: async (w) => ({ path: "/api/tasks", body: { title: "m", project_id: await w.project(w.bob) } }),
      status: 201
    }
  },
  "tasks.update": {
    sample: () => ({ path: "/api/tasks/1", body: { status: "done" } }),
    otherUsers: async (w) => ({ path: `/api/tasks/${await w.task(w.bob)}`, body: { status: "done" } }),
    admin: {
      sample: async (w) => ({ path: `/api/tasks/${await w.task(w.bob)}`, body: { status: "done" } }),
      status: 200
    }
  },
  "tasks.delete": {
    sample: () => ({ path: "/api/tasks/1" }),
    otherUsers: async (w) => ({ path: `/api/tasks/${await w.task(w.bob)}` }),
    admin: { sample: async (w) => ({ path: `/api/tasks/${await w.task(w.bob)}` }), status: 200 }
  },
  "projects.list": {
    sample: () => ({ path: "/api/projects" }),
    admin: { sample: () => ({ path: "/api/projects" }), status: 200 }
  },
  "projects.get": {
    sample: () => ({ path: "/api/projects/proj_AAAAAAAAAAAAAAAA" }),
    otherUsers: async (w) => ({ path: `/api/projects/${await w.project(w.bob)}` }),
    admin: { sample: async (w) => ({ path: `/api/projects/${await w.project(w.bob)}` }), status: 200 }
  },
  "projects.create": {
    sample: async (w) => ({ path: "/api/projects", body: { name: "p", path: await w.freshDir() } }),
    admin: {
      sample: async (w) => ({ path: "/api/projects", body: { name: "p", path: await w.freshDir() } }),
      status: 201
    }
  },
  "projects.delete": {
    sample: () => ({ path: "/api/projects/proj_AAAAAAAAAAAAAAAA" }),
    otherUsers: async (w) => ({ path: `/api/projects/${await w.project(w.bob)}` }),
    admin: { sample: async (w) => ({ path: `/api/projects/${await w.project(w.bob)}` }), status: 200 }
  },
  "labels.list": {
    sample: () => ({ path: "/api/labels" }),
    admin: { sample: () => ({ path: "/api/labels" }), status: 200 }
  },
  "labels.create": {
    sample: () => ({ path: "/api/labels", body: { name: `l${randomBase62(8)}`, color: "#123456" } }),
    admin: {
      sample: () => ({ path: "/api/labels", body: { name: `l${randomBase62(8)}`, color: "#123456" } }),
      status: 201
    }
  },
  "runs.start": {
    sample: () => ({ path: "/api/tasks/1/run", body: { agent: "gemini" } }),
    otherUsers: async (w) => ({ path: `/api/tasks/${await w.task(w.bob)}/run`, body: { agent: "gemini" } }),
    // Authorised, then refused for the task's state: it has no project to run in.
    admin: {
      sample: async (w) => ({ path: `/api/tasks/${await w.task(w.bob)}/run`, body: { agent: "gemini" } }),
      status: 400
    }
  },
  "runs.get": {
    sample: () => ({ path: "/api/runs/run_AAAAAAAAAAAAAAAA" }),
    otherUsers: async (w) => ({ path: `/api/runs/${await w.run(w.bob)}` }),
    admin: { sample: async (w) => ({ path: `/api/runs/${await w.run(w.bob)}` }), status: 200 }
  },
  "runs.logs": {
    sample: () => ({ path: "/api/runs/run_AAAAAAAAAAAAAAAA/logs" }),
    otherUsers: async (w) => ({ path: `/api/runs/${await w.run(w.bob)}/logs` }),
    admin: { sample: async (w) => ({ path: `/api/runs/${await w.run(w.bob)}/logs` }), status: 200 }
  },
  "runs.stop": {
    sample: () => ({ path: "/api/runs/run_AAAAAAAAAAAAAAAA/stop" }),
    otherUsers: async (w) => ({ path: `/api/runs/${await w.run(w.bob)}/stop` }),
    // Authorised, then refused for the run's state: it has ended.
    admin: { sample: async (w) => ({ path: `/api/runs/${await w.run(w.bob)}/stop` }), status: 409 }
  },
  "reviews.review": {
    sample: () => ({ path: "/api/tasks/1/review", body: { action: "approve" } }),
    otherUsers: async (w) => ({ path: `/api/tasks/${await w.task(w.bob)}/review`, body: { action: "approve" } }),
    // Authorised, then refused for the task's state: it is not in review.
    admin: {
      sample: async (w) => ({ path: `/api/tasks/${await w.task(w.bob)}/review`, body: { action: "approve" } }),
      status: 409
    }
  },
  "reviews.pullRequest": {
    sample: () => ({ path: "/api/review/pr", body: { repo: "octo-org/hello", pr_number: 1, agent: "gemini" } }),
    // Authorised, then refused for the body (nothing reaches GitHub): it names no pull request.
    admin: {
      sample: () => ({ path: "/api/review/pr", body: { repo: "octo-org/hello", agent: "gemini" } }),
      status: 400
    }
  },
  "agents.list": {
    sample: () => ({ path: "/api/agents" }),
    admin: { sample: () => ({ path: "/api/agents" }), status: 200 }
  },
  "agents.update": {
    sample: () => ({ path: "/api/agents/gemini", body: { model: "gemini-matrix" } }),
    admin: { sample: () => ({ path: "/api/agents/gemini", body: { model: "gemini-matrix" } }), status: 200 }
  },
  "auth.login": {
    sample: (w) => ({ path: "/api/auth/login", body: { email: w.person.email, password: w.person.password } }),
    admin: {
      sample: (w) => ({ path: "/api/auth/login", body: { email: w.person.email, password: w.person.password } }),
      status: 200
    },
    publicStatus: 200
  },
  "auth.token": {
    sample: (w) => ({ path: "/api/auth/token", body: { api_key: w.alice.key } }),
    admin: { sample: (w) => ({ path: "/api/auth/token", body: { api_key: w.alice.key } }), status: 200 },
    publicStatus: 200
  },
  "auth.oauth": {
    sample: () => ({ path: "/api/auth/oauth/github" }),
    admin: { sample: () => ({ path: "/api/auth/oauth/github" }), status: 404 },
    publicStatus: 404
  },
  // Logout and refresh end or renew a browser session: a Bearer credential is a 400.
  "auth.logout": {
    sample: () => ({ path: "/api/auth/logout" }),
    admin: { sample: () => ({ path: "/api/auth/logout" }), status: 400 },
    weakStatus: 400
  },
  "auth.refresh": {
    sample: () => ({ path: "/api/auth/refresh" }),
    admin: { sample: () => ({ path: "/api/auth/refresh" }), status: 400 },
    weakStatus: 400
  },
  "auth.me": {
    sample: () => ({ path: "/api/auth/me" }),
    admin: { sample: () => ({ path: "/api/auth/me" }), status: 200 },
    weakStatus: 200
  },
  "auth.verify": {
    sample: () => ({ path: "/api/auth/verify" }),
    otherUsers: async () => ({ path: "/api/auth/verify?scope=admin" }),
    admin: { sample: () => ({ path: "/api/auth/verify?scope=admin" }), status: 200 },
    weakStatus: 200
  },
  "keys.list": {
    sample: () => ({ path: "/api/keys" }),
    otherUsers: async (w) => ({ path: `/api/keys?user_id=${w.bob.id}` }),
    admin: { sample: (w) => ({ path: `/api/keys?user_id=${w.bob.id}` }), status: 200 },
    weakStatus: 200
  },
  "keys.create": {
    sample: () => ({ path: "/api/keys", body: { name: "m", scopes: ["tasks:read"] } }),
    otherUsers: async (w) => ({ path: "/api/keys", body: { name: "m", scopes: ["tasks:read"], user_id: w.bob.id } }),
    admin: {
      sample: (w) => ({ path: "/api/keys", body: { name: "m", scopes: ["tasks:read"], user_id: w.bob.id } }),
      status: 201
    },
    weakStatus: 201
  },
  "keys.rotate": {
    sample: () => ({ path: "/api/keys/key_AAAAAAAAAAAAAAAA/rotate" }),
    otherUsers: async (w) => ({ path: `/api/keys/${await w.apiKey(w.bob)}/rotate` }),
    admin: { sample: async (w) => ({ path: `/api/keys/${await w.apiKey(w.bob)}/rotate` }), status: 200 },
    weakStatus: 404
  },
  "keys.revoke": {
    sample: () => ({ path: "/api/keys/key_AAAAAAAAAAAAAAAA" }),
    otherUsers: async (w) => ({ path: `/api/keys/${await w.apiKey(w.bob)}` }),
    admin: { sample: async (w) => ({ path: `/api/keys/${await w.apiKey(w.bob)}` }), status: 200 },
    weakStatus: 404
  },
  "keys.usage": {
    sample: () => ({ path: "/api/keys/key_AAAAAAAAAAAAAAAA/usage" }),
    otherUsers: async (w) => ({ path: `/api/keys/${await w.apiKey(w.bob)}/usage` }),
    admin: { sample: async (w) => ({ path: `/api/keys/${await w.apiKey(w.bob)}/usage` }), status: 200 },
    weakStatus: 404
  }
}

/** A well-formed request for an endpoint the table does not know yet: path parameters filled in. */
const genericSample = (e: Endpoint): Sample => ({
  path: e.path.replace(/:([A-Za-z_]+)/g, "x"),
  ...(e.method === "GET" || e.method === "DELETE" ? {} : { body: {} })
})

const CODES: Record<number, string> = {
  400: "BAD_REQUEST",
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  409: "CONFLICT",
  429: "RATE_LIMITED"
}

const expectAnswer = (
  r: { status: number; body: unknown; headers: Headers; text: string },
  status: number,
  what: string
) => {
  expect(r.status, `${what}: ${r.text.slice(0, 300)}`).toBe(status)
  if (status >= 400) {
    const body = r.body as { error?: { code?: unknown; message?: unknown; details?: unknown } }
    expect(Object.keys(body), what).toEqual(["error"])
    expect(body.error?.code, what).toBe(CODES[status])
    expect(typeof body.error?.message, what).toBe("string")
    expect(body.error?.details, what).toBeTypeOf("object")
    expect(body.error?.details, what).not.toBeNull()
  }
  if (status === 401) expect(r.headers.get("www-authenticate"), what).toMatch(/^Bearer/)
  expect(r.headers.get("x-ratelimit-limit"), what).not.toBeNull()
}

const COLUMNS = [
  "no credential",
  "malformed",
  "unknown key",
  "revoked key",
  "expired key",
  "expired JWT",
  "tampered JWT",
  "alg:none JWT",
  "missing scope",
  "other user's resource",
  "admin"
] as const
type Column = (typeof COLUMNS)[number]

describe("the matrix covers the whole contract", () => {
  it("has a row for every endpoint", () => {
    const unknown = endpoints.map((e) => e.name).filter((n) => specs[n] === undefined && n !== "system.health")
    // Endpoints missing here still get the credential columns (generic request); add a row to
    // check their scope, ownership and admin answers too.
    expect(unknown, "add these endpoints to specs in auth-matrix.test.ts").toEqual([])
    expect(endpoints.every((e) => e.requirement !== "none")).toBe(true)
  })
})

describe.each(testStores())("authorization matrix on %s", (store) => {
  let w: World
  const credential: Partial<Record<Column, Record<string, string>>> = {}
  let weakForTasksRead: string
  let weak: string

  beforeAll(async () => {
    const s = await startTestServer({
      store,
      env: {
        TASKWRIGHT_JWT_SECRET: SECRET,
        TASKWRIGHT_RATE_LIMIT: "1000000",
        TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "1000000",
        TASKWRIGHT_LOGIN_ATTEMPTS: "1000000"
      }
    })
    const alice = await s.createUser()
    const bob = await s.createUser()
    const person = await createPasswordUser(s)
    const projectDir = await mkdtemp(join(tmpdir(), "tw-matrix-"))
    w = {
      s,
      alice,
      bob,
      person,
      projectDir,
      freshDir: () => mkdtemp(join(projectDir, "p-")),
      task: async (owner) => {
        const r = await s.request<{ id: number }>("POST", "/api/tasks", { key: owner.key, body: { title: "t" } })
        return r.body.id
      },
      project: async (owner) => {
        const r = await s.request<{ id: string }>("POST", "/api/projects", {
          key: owner.key,
          body: { name: "p", path: await mkdtemp(join(projectDir, "p-")) }
        })
        if (r.status !== 201) throw new Error(r.text)
        return r.body.id
      },
      apiKey: async (owner) => (await createKey(s, owner.key, { scopes: ["tasks:read"] })).id,
      run: async (owner) => {
        const task = await w.task(owner)
        const id = `run_${randomBase62(16)}`
        const at = new Date().toISOString()
        await exec(
          s,
          `INSERT INTO runs (id, task_id, owner_id, agent, autonomy, branch, status, started_at, completed_at, output) VALUES ('${id}', ${task}, '${owner.id}', 'gemini', 'read-only', 'taskwright/task-${task}', 'completed', '${at}', '${at}', '{"files_modified":[],"lines_added":0,"lines_removed":0}')`
        )
        return id
      }
    }

    const bearer = (token: string) => ({ authorization: `Bearer ${token}` })
    const revoked = await createKey(s, alice.key, { scopes: ["tasks:read"] })
    await s.request("DELETE", `/api/keys/${revoked.id}`, { key: alice.key })
    const expiring = await createKey(s, alice.key, {
      scopes: ["tasks:read", "tasks:write", "projects:read", "projects:write", "agents:run"],
      expires_at: new Date(Date.now() + 1000).toISOString()
    })
    const token = await accessToken(s, alice.key)
    const { header, payload } = decodeJwt(token)
    const now = Math.floor(Date.now() / 1000)
    credential["no credential"] = {}
    credential.malformed = bearer("not-a-credential")
    credential["unknown key"] = bearer(newApiKeySecret())
    credential["revoked key"] = bearer(revoked.secret)
    credential["expired key"] = bearer(expiring.secret)
    credential["expired JWT"] = bearer(forgeJwt(header, { ...payload, iat: now - 4000, exp: now - 400 }, SECRET))
    credential["tampered JWT"] = bearer(
      `${token.split(".")[0]}.${Buffer.from(JSON.stringify({ ...payload, scope: ["admin"] })).toString("base64url")}.${token.split(".")[2]}`
    )
    credential["alg:none JWT"] = bearer(forgeJwt({ ...header, alg: "none" }, payload, undefined))
    weak = (await createKey(s, alice.key, { scopes: ["tasks:read"] })).secret
    weakForTasksRead = (await createKey(s, alice.key, { scopes: ["projects:read"] })).secret
    await new Promise((resolve) => setTimeout(resolve, 1100))
  })
  afterAll(async () => {
    await w.s.close()
    await rm(w.projectDir, { recursive: true, force: true })
  })

  const send = (e: Endpoint, sample: Sample, headers: Record<string, string>) =>
    w.s.request(e.method, sample.path, {
      headers,
      ...(sample.body === undefined ? {} : { body: sample.body })
    })

  for (const e of endpoints.filter((x) => x.name !== "system.health")) {
    describe(`${e.method} ${e.path} (${e.name}, ${e.requirement})`, () => {
      const spec = specs[e.name]
      const isPublic = e.requirement === "public"

      for (const column of COLUMNS.slice(0, 8)) {
        it(column, async () => {
          const sample = spec === undefined ? genericSample(e) : await spec.sample(w)
          const r = await send(e, sample, credential[column] ?? {})
          expectAnswer(r, isPublic ? (spec?.publicStatus ?? 0) : 401, `${e.name} × ${column}`)
        })
      }

      it("missing scope", async () => {
        const sample = spec === undefined ? genericSample(e) : await spec.sample(w)
        if (isPublic) {
          return expectAnswer(
            await send(e, sample, { authorization: `Bearer ${weak}` }),
            spec?.publicStatus ?? 0,
            e.name
          )
        }
        if (e.requirement === "authenticated") {
          // Any valid credential will do: the weakest key is served.
          if (spec?.weakStatus === undefined) return
          return expectAnswer(await send(e, sample, { authorization: `Bearer ${weak}` }), spec.weakStatus, e.name)
        }
        const key = e.requirement === "tasks:read" ? weakForTasksRead : weak
        const r = await send(e, sample, { authorization: `Bearer ${key}` })
        expectAnswer(r, 403, `${e.name} × missing scope`)
        expect((r.body as { error: { details: Record<string, unknown> } }).error.details.required_scope).toBe(
          e.requirement
        )
      })

      it.skipIf(spec?.otherUsers === undefined && !isPublic)("other user's resource", async () => {
        if (spec === undefined) return
        if (isPublic) {
          return expectAnswer(
            await send(e, await spec.sample(w), { authorization: `Bearer ${w.bob.key}` }),
            spec.publicStatus ?? 0,
            e.name
          )
        }
        const sample = await spec.otherUsers?.(w)
        if (sample === undefined) return
        expectAnswer(await send(e, sample, { authorization: `Bearer ${w.alice.key}` }), 403, `${e.name} × other user's`)
      })

      it.skipIf(spec === undefined)("admin", async () => {
        if (spec === undefined) return
        const r = await send(e, await spec.admin.sample(w), { authorization: `Bearer ${w.s.adminKey}` })
        expectAnswer(r, spec.admin.status, `${e.name} × admin`)
      })
    })
  }
})
