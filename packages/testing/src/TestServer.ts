/**
 * A real Taskwright server for tests: the fast HTTP path on a loopback port over an in-memory
 * SQLite store, a SQLite file, or a fresh PostgreSQL database made for this server and dropped
 * when it closes. Host applications can use it in their own test suites.
 */
import { createHash } from "node:crypto"
import { mkdtemp, readFile, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { randomBase62, type Scope, type SqlParam, StoreTag, settingsFromEnv, statement, Users } from "@taskwright/core"
import { type RunningServer, serve } from "@taskwright/server"
import { Effect } from "effect"
import pg from "pg"

export type TestStore = "sqlite" | "sqlite-file" | "postgres"

/** The PostgreSQL server tests use; each test server gets its own database on it. */
export const testPostgresUrl = (): string =>
  process.env.TASKWRIGHT_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"

/** The stores every store-dependent suite runs against. PostgreSQL is never silently skipped. */
export const testStores = (): ReadonlyArray<TestStore> =>
  process.env.TASKWRIGHT_TEST_STORES === undefined
    ? ["sqlite", "postgres"]
    : (process.env.TASKWRIGHT_TEST_STORES.split(",") as Array<TestStore>)

export interface TestResponse<T = unknown> {
  readonly status: number
  readonly headers: Headers
  readonly body: T
  readonly text: string
}

export interface RequestOptions {
  readonly key?: string | undefined
  readonly body?: unknown
  /** A raw body, sent as is (for malformed JSON tests). */
  readonly raw?: string | Uint8Array
  readonly headers?: Record<string, string>
}

export interface TestUser {
  readonly id: string
  readonly email: string
  readonly key: string
}

export interface TestServer {
  readonly store: TestStore
  readonly url: string
  readonly dataDir: string
  /** The store's `DATABASE_URL` (`:memory:` for the in-memory store, none for a SQLite file). */
  readonly databaseUrl: string | undefined
  /** The bootstrap admin key of this server. */
  readonly adminKey: string
  readonly server: RunningServer
  request<T = unknown>(method: string, path: string, options?: RequestOptions): Promise<TestResponse<T>>
  /** Creates a user with a key carrying `scopes` (default: every non-admin scope). */
  createUser(options?: { readonly admin?: boolean; readonly scopes?: ReadonlyArray<Scope> }): Promise<TestUser>
  /** Runs a query straight on the store, to check what a request left behind. */
  query<Row = Record<string, unknown>>(sql: string, params?: ReadonlyArray<SqlParam>): Promise<ReadonlyArray<Row>>
  close(): Promise<void>
}

const withDatabase = (url: string, database: string): string => {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

const adminQuery = async (text: string) => {
  const client = new pg.Client({ connectionString: testPostgresUrl() })
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}

export const startTestServer = async (
  options: { readonly store?: TestStore; readonly env?: Record<string, string> } = {}
): Promise<TestServer> => {
  const store = options.store ?? "sqlite"
  const dataDir = await mkdtemp(join(tmpdir(), "taskwright-test-"))
  let database: string | undefined
  let databaseUrl: string | undefined
  if (store === "postgres") {
    database = `tw_test_${randomBase62(12).toLowerCase()}`
    await adminQuery(`CREATE DATABASE ${database}`)
    databaseUrl = withDatabase(testPostgresUrl(), database)
  } else if (store === "sqlite") {
    databaseUrl = ":memory:"
  }
  const settings = settingsFromEnv({ ...options.env }, { dataDir, databaseUrl })
  const server = await serve(settings, { port: 0, host: "127.0.0.1", log: () => {} })
  const adminKey = (await readFile(join(dataDir, "admin-key.txt"), "utf8")).trim()
  let users = 0

  const request = async <T>(method: string, path: string, o: RequestOptions = {}): Promise<TestResponse<T>> => {
    const headers: Record<string, string> = { ...o.headers }
    if (o.key !== undefined) headers.authorization = `Bearer ${o.key}`
    let body: string | Uint8Array | undefined = o.raw
    if (o.body !== undefined) {
      body = JSON.stringify(o.body)
      headers["content-type"] ??= "application/json"
    }
    const res = await fetch(server.url + path, { method, headers, ...(body === undefined ? {} : { body }) })
    const text = await res.text()
    let parsed: unknown = text
    try {
      parsed = text === "" ? undefined : JSON.parse(text)
    } catch {
      // not JSON: the text stays the body
    }
    return { status: res.status, headers: res.headers, body: parsed as T, text }
  }

  return {
    store,
    url: server.url,
    dataDir,
    databaseUrl,
    adminKey,
    server,
    request,
    createUser: (o = {}) =>
      server.run(
        Effect.gen(function* () {
          const svc = yield* Users
          users += 1
          const email = `user${users}-${randomBase62(6)}@example.test`
          const user = yield* svc.create({ email, name: `User ${users}`, password: null, admin: o.admin ?? false })
          const scopes: ReadonlyArray<Scope> = o.scopes ?? [
            "tasks:read",
            "tasks:write",
            "projects:read",
            "projects:write",
            "agents:run"
          ]
          const key = yield* svc.createKey({ userId: user.id, name: "test key", scopes, expiresAt: null })
          return { id: user.id, email, key: key.secret }
        })
      ),
    query: <Row>(sql: string, params: ReadonlyArray<SqlParam> = []) =>
      server.run(
        Effect.flatMap(StoreTag, (s) =>
          s.all(statement<Row>(`adhoc:${createHash("sha1").update(sql).digest("hex")}`, sql), params)
        )
      ),
    close: async () => {
      await server.close()
      if (database !== undefined) await adminQuery(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
      await rm(dataDir, { recursive: true, force: true })
    }
  }
}
