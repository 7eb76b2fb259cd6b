/**
 * The schema at start, on a real SQLite file and a fresh PostgreSQL database: an empty store gets
 * every migration, a store one migration behind gets the one it lacks, and a store that is
 * current starts with one read, so on PostgreSQL it no longer waits for the migrator's exclusive
 * lock behind a transaction that reads the migrations table (a `pg_dump`, say).
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import Database from "better-sqlite3"
import { Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { settingsFromEnv, TaskwrightConfig } from "../../src/Config.js"
import { StoreLive } from "../../src/Core.js"
import { LATEST_MIGRATION } from "../../src/store/migrations.js"
import { createPgDatabase, dropPgDatabase, storeKinds, withPg } from "../stores.js"

/** Opens the store as a server does (migrated), then closes it; fails past `timeoutMs`. */
const start = (databaseUrl: string, dataDir: string, timeoutMs = 10_000) =>
  Effect.runPromise(
    Layer.build(
      StoreLive.pipe(Layer.provide(TaskwrightConfig.layer(settingsFromEnv({}, { dataDir, databaseUrl }))))
    ).pipe(
      Effect.scoped,
      Effect.timeoutFail({
        duration: timeoutMs,
        onTimeout: () => new Error(`the store did not start in ${timeoutMs} ms`)
      })
    )
  )

describe.each(storeKinds)("migrations at start on %s", (kind) => {
  let dir: string
  let databaseUrl: string
  /** The migrations recorded in the store, oldest first. */
  let recorded: () => Promise<Array<number>>
  /** Runs one statement on its own connection. */
  let exec: (text: string) => Promise<void>

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "tw-migrations-"))
    if (kind === "postgres") {
      databaseUrl = await createPgDatabase("tw_migrations")
      exec = (text) => withPg(databaseUrl, async (c) => void (await c.query(text)))
      recorded = () =>
        withPg(databaseUrl, async (c) =>
          (await c.query("SELECT migration_id FROM taskwright_migrations ORDER BY 1")).rows.map((r) =>
            Number(r.migration_id)
          )
        )
    } else {
      databaseUrl = join(dir, "taskwright.db")
      const open = <A>(f: (db: Database.Database) => A): A => {
        const db = new Database(databaseUrl)
        try {
          return f(db)
        } finally {
          db.close()
        }
      }
      exec = async (text) => void open((db) => db.exec(text))
      recorded = async () =>
        open((db) =>
          (
            db.prepare("SELECT migration_id FROM taskwright_migrations ORDER BY 1").all() as Array<{
              migration_id: number
            }>
          ).map((r) => r.migration_id)
        )
    }
  })

  afterAll(async () => {
    if (kind === "postgres") await dropPgDatabase(databaseUrl)
    rmSync(dir, { recursive: true, force: true })
  })

  const all = Array.from({ length: LATEST_MIGRATION }, (_, i) => i + 1)

  it("gives an empty store every migration", async () => {
    await start(databaseUrl, dir)
    expect(await recorded()).toEqual(all)
  })

  it("gives a store one migration behind the one it lacks", async () => {
    // The newest migration only replaces a trigger, so running it again is sound.
    await exec(`DELETE FROM taskwright_migrations WHERE migration_id = ${LATEST_MIGRATION}`)
    expect(await recorded()).toEqual(all.slice(0, -1))
    await start(databaseUrl, dir)
    expect(await recorded()).toEqual(all)
  })

  it("starts on a current store while another transaction reads the migrations table", async () => {
    if (kind === "postgres") {
      // The migrator's LOCK TABLE ... ACCESS EXCLUSIVE would wait for this reader to finish.
      await withPg(databaseUrl, async (reader) => {
        await reader.query("BEGIN")
        await reader.query("SELECT * FROM taskwright_migrations")
        await start(databaseUrl, dir, 5_000)
        const held = await withPg(databaseUrl, (c) =>
          c.query(
            "SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class t ON t.oid = l.relation WHERE t.relname = 'taskwright_migrations' AND l.mode = 'AccessShareLock'"
          )
        )
        expect(held.rows[0].n).toBeGreaterThan(0)
        await reader.query("COMMIT")
      })
    } else {
      // SQLite: another connection holds the write lock, and a current store's start only reads
      // (the migrator did not wait here either: SQLite's migrations table takes no lock to read).
      const writer = new Database(databaseUrl)
      try {
        writer.exec("BEGIN IMMEDIATE")
        await start(databaseUrl, dir, 5_000)
        writer.exec("COMMIT")
      } finally {
        writer.close()
      }
    }
    expect(await recorded()).toEqual(all)
  })
})
