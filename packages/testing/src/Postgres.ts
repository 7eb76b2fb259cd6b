/**
 * Fresh PostgreSQL databases for tests, made on the server {@link testPostgresUrl} names and
 * dropped when done. `pg` is loaded on first use only: a suite on SQLite never loads it.
 */
import { randomBytes } from "node:crypto"

/** The PostgreSQL server tests use (`TASKWRIGHT_TEST_PG_URL`); each test database is made on it. */
export const testPostgresUrl = (): string =>
  process.env.TASKWRIGHT_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"

/** Runs one statement (DDL: `CREATE DATABASE`, `DROP DATABASE`) on the test server's own database. */
export const adminQuery = async (text: string): Promise<void> => {
  const { default: pg } = await import("pg")
  const client = new pg.Client({ connectionString: testPostgresUrl() })
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}

/** The URL of `database` on the test server. */
export const testDatabaseUrl = (database: string): string => {
  const url = new URL(testPostgresUrl())
  url.pathname = `/${database}`
  return url.toString()
}

export interface TestDatabase {
  readonly name: string
  readonly url: string
  /** Drops the database, closing whatever connections are left on it. */
  drop(): Promise<void>
}

/** A fresh, empty PostgreSQL database named `<prefix>_<random>`. */
export const createPgDatabase = async (prefix = "tw_test"): Promise<TestDatabase> => {
  const name = `${prefix}_${randomBytes(8).toString("hex")}`
  await adminQuery(`CREATE DATABASE ${name}`)
  return {
    name,
    url: testDatabaseUrl(name),
    drop: () => adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  }
}
