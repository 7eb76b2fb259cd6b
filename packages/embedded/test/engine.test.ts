/**
 * The embedded engine's own operations and start-up, as a host meets them: `tw.users.create` and
 * `tw.keys.create` refuse what the HTTP API refuses, with the same envelope, and store none of it;
 * `tw.as(user)` recovers from a failed lookup; the HTTP faces at the root and under a prefix; a run
 * left `running` by a killed host is recovered as `failed` when the next engine starts on the same
 * store, and old events are pruned after `eventRetentionHours` (on SQLite and PostgreSQL).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtemp, rm, writeFile } from "node:fs/promises"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { StoreTag, statement } from "@taskwright/core/internal"
import { createTaskwright, type Taskwright } from "@taskwright/embedded"
import {
  createPgDatabase,
  defaultRepoFiles,
  makeRepo,
  scriptEnv,
  scriptedAgentPath,
  testStores
} from "@taskwright/testing"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { rejection } from "./rejection.js"

const ROOT = resolve(__dirname, "..", "..", "..")

/** Values passed where the types would refuse them: what a JavaScript host can send. */
const bad = <T>(value: unknown): T => value as T

/** One query on the engine's store. */
const query = <Row>(tw: Taskwright, sql: string, params: ReadonlyArray<string> = []) =>
  tw.effect.runtime.runPromise(
    Effect.flatMap(StoreTag, (store) => store.all(statement<Row>(`test:${sql}`, sql), params))
  )

/** One change to the engine's store. */
const change = (tw: Taskwright, sql: string, params: ReadonlyArray<string> = []) =>
  tw.effect.runtime.runPromise(Effect.flatMap(StoreTag, (store) => store.run(statement(`test:${sql}`, sql), params)))

const count = async (tw: Taskwright, table: string): Promise<number> =>
  Number((await query<{ n: number }>(tw, `SELECT COUNT(*) AS n FROM ${table}`))[0]?.n)

describe("the operator's operations (users.create, keys.create)", () => {
  let tw: Taskwright
  let ada: string

  beforeAll(async () => {
    tw = await createTaskwright({ database: ":memory:" })
    ada = (await tw.users.create({ email: "ada@example.test", name: "Ada" })).id
  })
  afterAll(() => tw.close())

  /** The admin's `POST /api/keys` for `body`, through the HTTP handler: the envelope HTTP answers. */
  const overHttp = async (body: unknown) => {
    const r = await tw.handler(
      new Request("http://localhost/api/keys", {
        method: "POST",
        headers: { authorization: `Bearer ${tw.adminKey}`, "content-type": "application/json" },
        body: JSON.stringify(body)
      })
    )
    return { status: r.status, body: (await r.json()) as unknown }
  }

  it("refuses the keys the keys endpoint refuses, with its envelope, and stores none of them", async () => {
    const keysBefore = await count(tw, "api_keys")
    const cases: ReadonlyArray<readonly [string, Record<string, unknown>, Record<string, unknown>, number]> = [
      ["an empty name", { name: "" }, { name: "" }, 400],
      ["a blank name", { name: "   " }, { name: "   " }, 400],
      ["a 5,000-character name", { name: "x".repeat(5000) }, { name: "x".repeat(5000) }, 400],
      ["a NUL in the name", { name: "a\u0000b" }, { name: "a\u0000b" }, 400],
      ["a name that is not a string", { name: 5 }, { name: 5 }, 400],
      ["scopes as a string", { scopes: "tasks:read" }, { scopes: "tasks:read" }, 400],
      ["no scope", { scopes: [] }, { scopes: [] }, 400],
      ["an unknown scope", { scopes: ["root"] }, { scopes: ["root"] }, 400],
      ["a scope the user may not hold", { scopes: ["admin"] }, { scopes: ["admin"] }, 400],
      ["an expiry that is not a time", { expires: "bogus" }, { expires_at: "bogus" }, 400],
      ["an expiry that is not a date", { expires: new Date("nope") }, { expires_at: "Invalid Date" }, 400],
      ["an expiry in the past", { expires: "2000-01-01T00:00:00Z" }, { expires_at: "2000-01-01T00:00:00Z" }, 400],
      ["an unknown field", { extra: true }, { extra: true }, 400],
      ["a malformed user id", { user: "usr_!" }, { user_id: "usr_!" }, 400],
      ["a missing user", { user: "usr_0000000000000000" }, { user_id: "usr_0000000000000000" }, 404]
    ]
    for (const [what, change, httpChange, status] of cases) {
      const input = { user: ada, name: "ci", scopes: ["tasks:read"], ...change }
      const http = await overHttp({ user_id: ada, name: "ci", scopes: ["tasks:read"], ...httpChange })
      const error = await rejection(tw.keys.create(bad(input)))
      expect([error.status, http.status], what).toEqual([status, status])
      expect(error.toJSON(), what).toEqual(http.body)
    }
    const missing = await rejection(tw.keys.create({ user: "nobody@example.test", name: "ci", scopes: ["tasks:read"] }))
    expect([missing.status, missing.code]).toEqual([404, "NOT_FOUND"])
    for (const input of [null, "ci", [1], undefined]) {
      const error = await rejection(tw.keys.create(bad(input)))
      expect([error.status, error.code], String(input)).toEqual([400, "BAD_REQUEST"])
    }
    expect(await count(tw, "api_keys")).toBe(keysBefore)
  })

  it("stores an expiry as the API shows it (milliseconds, UTC), whatever form it was given in", async () => {
    const made = await Promise.all([
      tw.keys.create({ user: ada, name: "iso", scopes: ["tasks:read"], expires: "2099-01-01T02:00:00+02:00" }),
      tw.keys.create({ user: "ada@example.test", name: "date", scopes: ["tasks:read"], expires: new Date(4e12) }),
      tw.keys.create({ user: ada, name: "lifetime", scopes: ["tasks:read"], expires: "12h" }),
      tw.keys.create({ user: ada, name: "  trimmed  ", scopes: ["tasks:read", "tasks:read"] })
    ])
    expect(made.map((k) => [k.name, k.scopes, k.expires_at?.length ?? null])).toEqual([
      ["iso", ["tasks:read"], 24],
      ["date", ["tasks:read"], 24],
      ["lifetime", ["tasks:read"], 24],
      ["trimmed", ["tasks:read"], null]
    ])
    expect(made[0]?.expires_at).toBe("2099-01-01T00:00:00.000Z")
    expect(made[1]?.expires_at).toBe(new Date(4e12).toISOString())
    // What is stored is what the keys endpoint lists, and the typed client decodes.
    const listed = await tw.as(ada).keys.list({ limit: 200 })
    expect(listed.keys.find((k) => k.name === "iso")?.expires_at).toBe("2099-01-01T00:00:00.000Z")
  })

  it("refuses the users the CLI refuses, and stores none of them", async () => {
    const usersBefore = await count(tw, "users")
    const cases: ReadonlyArray<readonly [unknown, string]> = [
      [{ email: "not an email", name: "N" }, "email"],
      [{ email: "n@example.test", name: "" }, "name"],
      [{ email: "n@example.test", name: "  " }, "name"],
      [{ email: "n@example.test", name: "x".repeat(201) }, "name"],
      [{ email: "n@example.test", name: "a\u0000b" }, "name"],
      [{ email: "n@example.test", name: "N", password: "short" }, "password"],
      [{ email: "n@example.test", name: "N", admin: "yes" }, "admin"],
      [{ email: "n@example.test", name: "N", role: "root" }, "role"],
      [{ name: "N" }, "email"]
    ]
    for (const [input, field] of cases) {
      const error = await rejection(tw.users.create(bad(input)))
      expect([error.status, error.code], JSON.stringify(input)).toEqual([400, "BAD_REQUEST"])
      const fields = error.details.fields as ReadonlyArray<{ readonly path: string }>
      expect(fields.map((f) => f.path)).toContain(field)
    }
    for (const input of [null, "ada", [1]]) {
      expect((await rejection(tw.users.create(bad(input)))).status).toBe(400)
    }
    const taken = await rejection(tw.users.create({ email: "ADA@example.test", name: "Ada again" }))
    expect([taken.status, taken.details]).toEqual([409, { field: "email" }])
    expect(await count(tw, "users")).toBe(usersBefore)
  })

  it("refuses a missing scope as HTTP does: one policy, one envelope", async () => {
    const readOnly = await tw.keys.create({ user: ada, name: "read only", scopes: ["tasks:read"] })
    const r = await tw.handler(
      new Request("http://localhost/api/tasks", {
        method: "POST",
        headers: { authorization: `Bearer ${readOnly.secret}`, "content-type": "application/json" },
        body: JSON.stringify({ title: "no" })
      })
    )
    const error = await rejection(tw.as(ada, { scopes: ["tasks:read"] }).tasks.create({ title: "no" }))
    expect([error.status, error.toJSON()]).toEqual([r.status, await r.json()])
  })
})

describe("tw.as(user)", () => {
  it("looks the user up again after a failed lookup instead of failing forever", async () => {
    const tw = await createTaskwright({ database: ":memory:" })
    try {
      const later = tw.as("later@example.test")
      const before = await rejection(later.tasks.list())
      expect([before.status, before.code]).toEqual([404, "NOT_FOUND"])
      expect((await rejection(later.events.subscribe(undefined, () => {}))).status).toBe(404)
      await tw.users.create({ email: "later@example.test", name: "Later" })
      expect(await later.tasks.list()).toMatchObject({ tasks: [], total: 0, limit: 50, offset: 0 })
      const stop = await later.events.subscribe(["tasks"], () => {})
      stop()
    } finally {
      await tw.close()
    }
  })
})

describe("the HTTP faces", () => {
  it("tw.handler and tw.nodeHandler are tw.http()'s; tw.http({ prefix }) mounts both under a path", async () => {
    const tw = await createTaskwright({ database: ":memory:" })
    const mounted = tw.http({ prefix: "/tasks-api" })
    const auth = { authorization: `Bearer ${tw.adminKey}` }
    // A host that does not strip its mount path: its own routes beside the API's.
    const server = createServer((req, res) => {
      if (req.url?.startsWith("/tasks-api/")) return mounted.nodeHandler(req, res)
      res.end("the host's own page")
    })
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done))
    try {
      expect(tw.http().handler).toBe(tw.handler)
      expect(tw.http().nodeHandler).toBe(tw.nodeHandler)
      expect(tw.http({ prefix: "/tasks-api" })).toBe(mounted)
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      const api = await fetch(`${base}/tasks-api/api/tasks`, { headers: auth })
      expect([api.status, await api.json()]).toEqual([200, { tasks: [], total: 0, limit: 50, offset: 0 }])
      expect(await (await fetch(`${base}/hello`)).text()).toBe("the host's own page")
      expect((await fetch(`${base}/tasks-api/api/nope`, { headers: auth })).status).toBe(404)
      const viaFetch = await mounted.handler(new Request("http://host/tasks-api/api/tasks", { headers: auth }))
      expect(viaFetch.status).toBe(200)
      expect((await mounted.handler(new Request("http://host/api/tasks", { headers: auth }))).status).toBe(404)
      expect((await tw.handler(new Request("http://host/api/tasks", { headers: auth }))).status).toBe(200)
    } finally {
      server.closeAllConnections()
      await new Promise((done) => server.close(done))
      await tw.close()
    }
  })
})

describe.each(testStores())("start-up on a %s store a previous host left", (store) => {
  let dir: string
  /** The engines' data directory (projects live beside it, not inside). */
  let data: string
  const drops: Array<() => Promise<void>> = []
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "tw-engine-"))
    data = join(dir, "data")
  })
  afterAll(async () => {
    for (const drop of drops) await drop()
    await rm(dir, { recursive: true, force: true })
  })

  /** A new, empty store: a SQLite file in the data directory, or a PostgreSQL database. */
  const newStore = async (name: string): Promise<string> => {
    if (store !== "postgres") return join(data, `${name}.db`)
    const db = await createPgDatabase("tw_engine")
    drops.push(db.drop)
    return db.url
  }

  /**
   * Starts a host process (`vite-node`, running the embedded package's sources) that opens the
   * engine, starts a run of an agent that works for a minute, and prints the run once the agent
   * has written its first line.
   */
  const hostWithRun = async (database: string, repo: string): Promise<{ child: ChildProcess; runId: string }> => {
    const script = join(dir, "host.ts")
    await writeFile(
      script,
      `import { createTaskwright } from "@taskwright/embedded"
const env = process.env as Record<string, string>
const tw = await createTaskwright({
  database: env.TW_DATABASE,
  dataDir: env.TW_DATA_DIR,
  sandbox: "off",
  agents: { slow: JSON.parse(env.TW_AGENT) }
})
const admin = tw.as("admin@localhost")
const project = await admin.projects.create({ name: "Crash", path: env.TW_REPO })
const task = await admin.tasks.create({ title: "Work for a minute", project_id: project.id })
const run = await admin.runs.start(task.id, { agent: "slow" })
while (!(await admin.runs.logs(run.run_id)).logs.some((l) => l.message === "working")) {
  await new Promise((r) => setTimeout(r, 20))
}
console.log(JSON.stringify({ run_id: run.run_id }))
setInterval(() => {}, 60_000)
`
    )
    const agent = {
      enabled: true,
      command: [process.execPath, scriptedAgentPath],
      env: scriptEnv([{ stdout: "working" }, { sleep_ms: 60_000 }])
    }
    const child = spawn(
      process.execPath,
      [
        join(ROOT, "node_modules/vite-node/vite-node.mjs"),
        "-c",
        join(ROOT, "packages/embedded/vitest.config.ts"),
        script
      ],
      {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "pipe"],
        env: {
          ...process.env,
          TW_DATABASE: database,
          TW_DATA_DIR: data,
          TW_REPO: repo,
          TW_AGENT: JSON.stringify(agent)
        }
      }
    )
    let stderr = ""
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    const line = await new Promise<string>((done, fail) => {
      let out = ""
      child.stdout?.on("data", (chunk: Buffer) => {
        out += chunk.toString()
        if (out.includes("\n")) done(out.slice(0, out.indexOf("\n")))
      })
      child.once("exit", (code) => fail(new Error(`the host exited (${code}): ${stderr}`)))
    })
    return { child, runId: (JSON.parse(line) as { run_id: string }).run_id }
  }

  it("recovers a run a killed host left running: failed, with the log line saying why", async () => {
    const repo = await makeRepo(defaultRepoFiles, dir)
    const database = await newStore("runs")

    const { child, runId } = await hostWithRun(database, repo)
    const gone = new Promise((done) => child.once("exit", done))
    child.kill("SIGKILL")
    await gone

    const tw = await createTaskwright({ database, dataDir: data, sandbox: "off" })
    try {
      expect(tw.started.recoveredRuns).toBe(1)
      expect(tw.started.bootstrap.created).toBe(false)
      const admin = tw.as("admin@localhost")
      const run = await admin.runs.get(runId)
      expect(run).toMatchObject({ status: "failed" })
      expect(run.completed_at).not.toBeNull()
      const messages = (await admin.runs.logs(runId, { limit: "1000" })).logs.map((l) => `${l.level} ${l.message}`)
      expect(messages).toContain("info working")
      expect(messages).toContain(
        "error The service stopped without finishing this run (it was killed or crashed); the run is marked failed"
      )
      expect(messages.some((m) => /^warn Ended the agent's leftover processes \(process group \d+\)$/.test(m))).toBe(
        true
      )
      expect(messages.at(-1)).toBe("error Run failed")
    } finally {
      await tw.close()
    }
    // Recovered once: the next start finds nothing left running.
    const again = await createTaskwright({ database, dataDir: data, sandbox: "off" })
    expect(again.started.recoveredRuns).toBe(0)
    await again.close()
  }, 60_000)

  it("prunes events older than eventRetentionHours at start", async () => {
    const database = await newStore("events")
    const ids = async (tw: Taskwright) =>
      (await query<{ id: number }>(tw, "SELECT id FROM events ORDER BY id")).map((r) => Number(r.id))
    const first = await createTaskwright({ database, dataDir: data })
    let old: ReadonlyArray<number>
    try {
      for (const title of ["An old change", "Another", "The last old one"]) {
        await first.as("admin@localhost").tasks.create({ title })
      }
      const twoHoursAgo = new Date(Date.now() - 2 * 3_600_000).toISOString()
      await change(first, "UPDATE events SET created_at = ?", [twoHoursAgo])
      old = await ids(first)
      expect(old.length).toBe(3)
    } finally {
      await first.close()
    }
    const keeping = await createTaskwright({ database, dataDir: data, eventRetentionHours: 3 })
    try {
      await new Promise((done) => setTimeout(done, 300))
      expect(await ids(keeping)).toEqual(old)
    } finally {
      await keeping.close()
    }
    const pruning = await createTaskwright({ database, dataDir: data, eventRetentionHours: 1 })
    try {
      // The newest event may stay (it tells a replay how far the log went); the others go.
      const left = () => ids(pruning).then((rows) => rows.filter((id) => id !== old.at(-1)))
      const deadline = Date.now() + 10_000
      while ((await left()).length > 0 && Date.now() < deadline) {
        await new Promise((done) => setTimeout(done, 20))
      }
      expect(await left()).toEqual([])
      // A new change's event is kept.
      await pruning.as("admin@localhost").tasks.create({ title: "A new change" })
      expect((await ids(pruning)).filter((id) => !old.includes(id))).toHaveLength(1)
    } finally {
      await pruning.close()
    }
    for (const hours of [0, -1, Number.NaN]) {
      await expect(createTaskwright({ database: ":memory:", eventRetentionHours: hours })).rejects.toThrow(
        /eventRetentionHours must be a positive number/
      )
    }
  })

  it("refuses a store timeout that is not a positive number of milliseconds", async () => {
    for (const ms of [0, -5, Number.NaN, Number.POSITIVE_INFINITY]) {
      await expect(createTaskwright({ database: ":memory:", storeTimeoutMs: ms })).rejects.toThrow(
        /storeTimeoutMs must be a positive number of milliseconds/
      )
    }
  })
})
