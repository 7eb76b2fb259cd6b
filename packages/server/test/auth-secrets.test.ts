/**
 * Secrets stay secret: after a run through every credential path (passwords right and wrong,
 * sessions made and refreshed, keys created, rotated and revoked, tokens minted, credentials
 * sent in the wrong places and malformed bodies around them), a grep of the server's log, of
 * every error answer and of a dump of the whole database finds no API key secret, session
 * token, access token or password. Run on a real `taskwright serve` process.
 */
import { mkdtemp, readdir, readFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createPgDatabase, testStores } from "@taskwright/testing"
import Database from "better-sqlite3"
import { afterAll, describe, expect, it } from "vitest"
import { dumpPg, removeDir, runCli, sha256Hex, startServerProcess } from "./auth-helpers.js"

interface Answer {
  readonly status: number
  readonly text: string
  readonly headers: Headers
}

// A process of its own needs a store outside it: SQLite runs as a file here.
const stores = [...new Set(testStores().map((s) => (s === "postgres" ? "postgres" : "sqlite-file")))]

describe.each(stores)("secrets after a run, on %s", (store) => {
  const cleanup: Array<() => Promise<void>> = []
  afterAll(async () => {
    for (const f of cleanup.reverse()) await f()
  })

  it("appear in no log line, no error answer and nowhere in the database", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "tw-secrets-"))
    cleanup.push(() => removeDir(dataDir))
    let databaseUrl: string | undefined
    if (store === "postgres") {
      const db = await createPgDatabase()
      cleanup.push(db.drop)
      databaseUrl = db.url
    }
    const storeArgs = ["--data-dir", dataDir, ...(databaseUrl === undefined ? [] : ["--database", databaseUrl])]

    const password = `Correct-Horse-${Date.now()}-Battery`
    const wrongPassword = `Wrong-Horse-${Date.now()}-Staple`
    const longPassword = `Overlong-${"p".repeat(1100)}`
    const email = "secret.keeper@example.test"
    const server = await startServerProcess({
      dataDir,
      ...(databaseUrl === undefined ? {} : { databaseUrl }),
      env: { TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "10000" }
    })
    cleanup.push(server.stop)
    expect(server.adminKey).toMatch(/^twk_/)
    const created = await runCli([
      "users",
      "create",
      "--email",
      email,
      "--name",
      "Keeper",
      "--password",
      password,
      ...storeArgs
    ])
    expect(created.code, created.stderr).toBe(0)
    const cliOutput = created.stdout + created.stderr
    const errors: Array<Answer> = []
    const call = async (
      method: string,
      path: string,
      init: { headers?: Record<string, string>; body?: unknown } = {}
    ) => {
      const r = await fetch(`${server.url}${path}`, {
        method,
        headers: {
          ...(init.body === undefined ? {} : { "content-type": "application/json" }),
          ...init.headers
        },
        ...(init.body === undefined
          ? {}
          : { body: typeof init.body === "string" ? init.body : JSON.stringify(init.body) })
      })
      const answer = { status: r.status, text: await r.text(), headers: r.headers }
      if (r.status >= 400) errors.push(answer)
      return answer
    }
    const json = <T>(a: Answer) => JSON.parse(a.text) as T
    const origin = { origin: server.url }

    // Passwords: right, wrong, overlong, mistyped fields.
    const loggedIn = await call("POST", "/api/auth/login", { body: { email, password } })
    expect(loggedIn.status).toBe(200)
    const session1 = json<{ session: { token: string } }>(loggedIn).session.token
    expect((await call("POST", "/api/auth/login", { body: { email, password: wrongPassword } })).status).toBe(401)
    expect((await call("POST", "/api/auth/login", { body: { email, password: longPassword } })).status).toBe(400)
    expect((await call("POST", "/api/auth/login", { body: { email: password, password } })).status).toBe(401)
    expect((await call("POST", "/api/auth/login", { body: { email, password, remember: password } })).status).toBe(400)
    expect(
      (await call("POST", "/api/auth/login", { body: `{"email":"${email}","password":"${password}"` })).status
    ).toBe(400)

    // Sessions: refreshed; the old one used after.
    const refreshed = await call("POST", "/api/auth/refresh", {
      headers: { cookie: `service_session=${session1}`, ...origin }
    })
    expect(refreshed.status).toBe(200)
    const session2 = json<{ session: { token: string } }>(refreshed).session.token
    expect((await call("GET", "/api/auth/me", { headers: { cookie: `service_session=${session1}` } })).status).toBe(401)
    const cookie2 = { cookie: `service_session=${session2}` }

    // Keys: created from the session, rotated, the old secret used, then revoked.
    const made = await call("POST", "/api/keys", {
      headers: { ...cookie2, ...origin },
      body: { name: "k", scopes: ["tasks:read", "tasks:write"] }
    })
    expect(made.status).toBe(201)
    const key = json<{ id: string; secret: string }>(made)
    const rotated = await call("POST", `/api/keys/${key.id}/rotate`, {
      headers: { authorization: `Bearer ${key.secret}` }
    })
    expect(rotated.status).toBe(200)
    const secret2 = json<{ secret: string }>(rotated).secret
    expect((await call("GET", "/api/tasks", { headers: { authorization: `Bearer ${key.secret}` } })).status).toBe(401)
    const minted = await call("POST", "/api/auth/token", { body: { api_key: secret2 } })
    const jwt = json<{ access_token: string }>(minted).access_token
    expect((await call("GET", "/api/tasks", { headers: { authorization: `Bearer ${jwt}` } })).status).toBe(200)
    expect(
      (await call("POST", "/api/tasks", { headers: { authorization: `Bearer ${secret2}` }, body: { title: 1 } })).status
    ).toBe(400)

    // Credentials in the wrong places and near misses.
    const misses: Array<[string, string, { headers?: Record<string, string>; body?: unknown }]> = [
      ["POST", "/api/auth/token", { body: { api_key: `${secret2}x` } }],
      ["POST", "/api/auth/token", { body: { api_key: jwt } }],
      ["POST", "/api/auth/token", { body: { api_key: session2 } }],
      ["POST", "/api/auth/token", { body: { api_key: 42, secret: secret2 } }],
      ["POST", "/api/auth/token", { body: { api_key: `${secret2}${"x".repeat(9000)}` } }],
      ["GET", "/api/tasks", { headers: { authorization: `Bearer ${session2}` } }],
      [
        "GET",
        "/api/tasks",
        { headers: { authorization: `Basic ${Buffer.from(`${email}:${password}`).toString("base64")}` } }
      ],
      ["GET", "/api/tasks", { headers: { cookie: `service_session=${secret2}` } }],
      ["POST", "/api/tasks", { headers: { ...cookie2, origin: "https://evil.example" }, body: { title: secret2 } }],
      ["GET", `/api/keys/${secret2}/usage`, { headers: cookie2 }],
      ["GET", `/api/nope/${secret2}`, {}],
      ["GET", `/api/tasks?limit=${secret2}`, { headers: cookie2 }],
      ["POST", "/api/keys", { headers: { ...cookie2, ...origin }, body: { name: "x", scopes: [secret2] } }]
    ]
    for (const [method, path, init] of misses)
      expect((await call(method, path, init)).status).toBeGreaterThanOrEqual(400)
    expect((await call("DELETE", `/api/keys/${key.id}`, { headers: cookie2 })).status).toBe(403)
    expect((await call("DELETE", `/api/keys/${key.id}`, { headers: { ...cookie2, ...origin } })).status).toBe(200)
    expect((await call("POST", "/api/auth/logout", { headers: { ...cookie2, ...origin } })).status).toBe(200)
    await server.stop()

    const secrets: Record<string, string> = {
      password,
      "wrong password": wrongPassword,
      "overlong password": longPassword.slice(0, 60),
      "first session token": session1,
      "second session token": session2,
      "API key secret": key.secret,
      "rotated API key secret": secret2,
      "access token": jwt,
      "admin key": server.adminKey
    }

    // The log: everything the process wrote, and the CLI's output.
    const log = server.log() + cliOutput
    expect(log).toContain(server.url)
    expect(log).toContain("admin-key.txt")
    // Every error answer: no secret is echoed back (the messages never quote what was sent).
    const errorText = errors.map((e) => e.text).join("\n")
    expect(errors.length).toBeGreaterThan(15)
    // The database: every row of every table, and for SQLite the raw file and its WAL too.
    let dump: string
    if (store === "postgres") {
      dump = await dumpPg(databaseUrl ?? "")
    } else {
      const db = new Database(join(dataDir, "taskwright.db"), { readonly: true })
      try {
        const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as Array<{
          name: string
        }>
        dump = tables
          .map((t) => `${t.name}\n${JSON.stringify(db.prepare(`SELECT * FROM "${t.name}"`).all())}`)
          .join("\n")
      } finally {
        db.close()
      }
      for (const file of await readdir(dataDir)) {
        if (file.startsWith("taskwright.db")) dump += (await readFile(join(dataDir, file))).toString("latin1")
      }
    }
    for (const [what, value] of Object.entries(secrets)) {
      expect(value.length).toBeGreaterThan(20)
      expect(log.includes(value), `${what} in the log`).toBe(false)
      expect(errorText.includes(value), `${what} in an error answer`).toBe(false)
      expect(dump.includes(value), `${what} in the database`).toBe(false)
    }
    // What is stored is the SHA-256 of a key (argon2id for a password).
    expect(dump).toContain(sha256Hex(secret2))
    expect(dump).toContain("$argon2id$")
  })
})
