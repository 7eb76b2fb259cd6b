/**
 * The real stores core's own tests run on. `@taskwright/testing` has the same for the other
 * packages, but it depends on core, so core's tests cannot import it.
 */
import pg from "pg"

export type StoreKind = "sqlite" | "postgres"

/** `TASKWRIGHT_TEST_STORES` (comma-separated; default both), each kind once. */
export const storeKinds: ReadonlyArray<StoreKind> = (process.env.TASKWRIGHT_TEST_STORES ?? "sqlite,postgres")
  .split(",")
  .map((s): StoreKind => (s === "postgres" ? "postgres" : "sqlite"))
  .filter((s, i, all) => all.indexOf(s) === i)

const adminUrl = process.env.TASKWRIGHT_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"

/** Runs `f` on a one-shot connection to `url`, closed however `f` ends. */
export const withPg = async <A>(url: string, f: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}

/** Creates an empty PostgreSQL database named from `prefix` and returns its URL. */
export const createPgDatabase = async (prefix: string): Promise<string> => {
  const name = `${prefix}_${process.pid}_${Date.now().toString(36)}`
  await withPg(adminUrl, (c) => c.query(`CREATE DATABASE ${name}`))
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return url.toString()
}

/** Drops a database `createPgDatabase` made, closing whatever still holds it. */
export const dropPgDatabase = async (url: string): Promise<void> => {
  const name = new URL(url).pathname.slice(1)
  await withPg(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
}
