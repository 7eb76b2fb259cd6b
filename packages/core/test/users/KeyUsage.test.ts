/**
 * Key usage at shutdown on PostgreSQL: the periodic flush may be in the middle of writing its
 * batch when the service stops. The batch has already left memory, so an interrupted write would
 * lose it (the rollback waits behind the running statement and then undoes it); the write has to
 * finish, and the last flush then writes what arrived meanwhile. (On SQLite a write runs
 * synchronously: nothing can stop it midway.)
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { migrate } from "../../src/store/migrations.js"
import { KeyUsage } from "../../src/users/KeyUsage.js"
import { UsersRepo } from "../../src/users/UsersRepo.js"
import { createPgDatabase, dropPgDatabase, storeKinds, withPg } from "../stores.js"
import { until } from "../until.js"

const USER = "usr_usage_shutdown00"
const KEY = "key_usage_shutdown00"
const at = "2026-12-01T00:00:00.000Z"

describe.runIf(storeKinds.includes("postgres"))("key usage when the service stops on postgres", () => {
  let url = ""

  beforeAll(async () => {
    url = await createPgDatabase("tw_key_usage")
    const Pg = await import("../../src/store/PgStore.js")
    const migrated = ManagedRuntime.make(
      Layer.tap(Pg.layer({ url, maxConnections: 1 }), (ctx) => Effect.orDie(Effect.provide(migrate, ctx)))
    )
    await migrated.runPromise(Effect.void)
    await migrated.dispose()
    await withPg(url, async (c) => {
      await c.query(
        "INSERT INTO users (id, email, email_lower, name, is_admin, created_at, updated_at) VALUES ($1, 'u@example.com', 'u@example.com', 'U', FALSE, $2, $2)",
        [USER, at]
      )
      await c.query(
        "INSERT INTO api_keys (id, user_id, name, secret_hash, prefix, scopes, created_at) VALUES ($1, $2, 'k', 'hash', 'tw_', '[]', $3)",
        [KEY, USER, at]
      )
      // Holds every usage write open long enough for the service to be stopped during one.
      await c.query(
        "CREATE FUNCTION usage_slow_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.5); RETURN NEW; END $$"
      )
      await c.query(
        "CREATE TRIGGER usage_slow_write_t AFTER UPDATE OF total_requests ON api_keys FOR EACH ROW EXECUTE FUNCTION usage_slow_write()"
      )
    })
  })

  afterAll(async () => {
    if (url !== "") await dropPgDatabase(url)
  })

  /** Whether a usage write is running (inside the trigger's sleep) right now. */
  const writing = () =>
    withPg(url, async (c) => {
      const r = await c.query(
        "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND query LIKE 'UPDATE api_keys%'"
      )
      return r.rowCount === 1
    })

  it("finishes the batch being written and then writes the rest", async () => {
    const Pg = await import("../../src/store/PgStore.js")
    const runtime = ManagedRuntime.make(
      KeyUsage.Default.pipe(Layer.provideMerge(UsersRepo.Default), Layer.provide(Pg.layer({ url, maxConnections: 2 })))
    )
    const usage = await runtime.runPromise(KeyUsage)
    for (let i = 0; i < 7; i++) usage.record(KEY, "10.0.0.1")

    // The periodic flush (every second) is inside its write when the trigger's sleep is running.
    await until(writing, 5_000, "a usage write to begin")
    for (let i = 0; i < 3; i++) usage.record(KEY, "10.0.0.2")
    await runtime.dispose()

    await withPg(url, async (c) => {
      const key = await c.query("SELECT total_requests, last_used_ip FROM api_keys WHERE id = $1", [KEY])
      expect(Number(key.rows[0]?.total_requests)).toBe(10)
      expect(key.rows[0]?.last_used_ip).toBe("10.0.0.2")
      const days = await c.query("SELECT SUM(count) AS n FROM api_key_usage WHERE key_id = $1", [KEY])
      expect(Number(days.rows[0]?.n)).toBe(10)
    })
  })
})
