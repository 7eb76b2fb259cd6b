/**
 * A real Taskwright server for tests: the fast HTTP path on a loopback port over an in-memory
 * SQLite store, a SQLite file, or a fresh PostgreSQL database made for this server and dropped
 * when it closes. Host applications can use it in their own test suites.
 */
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { grantableScopes, randomBase62, type Scope, settingsFromEnv, Users } from "@taskwright/core"
import { type RunningServer, serve } from "@taskwright/server"
import { Effect, Option, Redacted } from "effect"
import { type QueryParam, type RequestOptions, sendTestRequest, storeQuery, type TestResponse } from "./Exchange.js"
import { createPgDatabase, type TestDatabase } from "./Postgres.js"

export type TestStore = "sqlite" | "sqlite-file" | "postgres"

/** The stores every store-dependent suite runs against. PostgreSQL is never silently skipped. */
export const testStores = (): ReadonlyArray<TestStore> =>
  process.env.TASKWRIGHT_TEST_STORES === undefined
    ? ["sqlite", "postgres"]
    : (process.env.TASKWRIGHT_TEST_STORES.split(",") as Array<TestStore>)

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
  query<Row = Record<string, unknown>>(sql: string, params?: ReadonlyArray<QueryParam>): Promise<ReadonlyArray<Row>>
  close(): Promise<void>
}

export const startTestServer = async (
  options: { readonly store?: TestStore; readonly env?: Record<string, string> } = {}
): Promise<TestServer> => {
  const store = options.store ?? "sqlite"
  const dataDir = await mkdtemp(join(tmpdir(), "taskwright-test-"))
  let database: TestDatabase | undefined
  let databaseUrl: string | undefined
  if (store === "postgres") {
    database = await createPgDatabase()
    databaseUrl = database.url
  } else if (store === "sqlite") {
    databaseUrl = ":memory:"
  }
  // Tests keep their project directories in the system's temporary directory, so that is where
  // projects may live (the product's default is <data dir>/projects).
  const settings = settingsFromEnv({ TASKWRIGHT_PROJECTS_ROOT: tmpdir(), ...options.env }, { dataDir, databaseUrl })
  const server = await serve(settings, { port: 0, host: "127.0.0.1", log: "silent" })
  const adminKey = Option.match(server.started.bootstrap.adminKey, {
    onNone: () => {
      throw new Error("the test store was not empty: no bootstrap admin key")
    },
    onSome: Redacted.value
  })
  let users = 0

  const request = <T>(method: string, path: string, o: RequestOptions = {}) =>
    sendTestRequest<T>((p, init) => fetch(server.url + p, init), method, path, o)

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
          const scopes = o.scopes ?? grantableScopes(false)
          const key = yield* svc.createKey({ userId: user.id, name: "test key", scopes, expiresAt: null })
          return { id: user.id, email, key: key.secret }
        })
      ),
    query: <Row>(sql: string, params: ReadonlyArray<QueryParam> = []) => server.run(storeQuery<Row>(sql, params)),
    close: async () => {
      await server.close()
      if (database !== undefined) await database.drop()
      await rm(dataDir, { recursive: true, force: true })
    }
  }
}
