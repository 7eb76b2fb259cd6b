/**
 * Two `taskwright serve` processes on one PostgreSQL database share one budget: the counters
 * live in the database (an atomic upsert per hit), not in either process. The control run with
 * `TASKWRIGHT_RATE_LIMIT_STORE=memory` shows the processes really are separate: each then
 * admits its own budget.
 */
import { createPgDatabase } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { burst, freshWindow, type ServerProcess, startServerProcess } from "./auth-helpers.js"

const LIMIT = 300

const pair = async (databaseUrl: string, env: Record<string, string>) => {
  const a = await startServerProcess({ databaseUrl, env })
  // The second process finds the bootstrap admin (and its key file) already made by the first.
  const b = await startServerProcess({ databaseUrl, env })
  return [a, b] as const
}

describe("two server processes on one PostgreSQL", () => {
  let db: Awaited<ReturnType<typeof createPgDatabase>>
  let servers: ReadonlyArray<ServerProcess> = []

  beforeAll(async () => {
    db = await createPgDatabase()
  })
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()))
    await db.drop()
  })

  it("share one budget per credential and one per address", async () => {
    const env = { TASKWRIGHT_RATE_LIMIT: String(LIMIT) }
    servers = await pair(db.url, env)
    const [a, b] = servers
    if (a === undefined || b === undefined) throw new Error("servers did not start")
    expect(a.adminKey).toMatch(/^twk_/)
    const auth = { authorization: `Bearer ${a.adminKey}` }
    await freshWindow()
    const [ra, rb] = await Promise.all([
      burst(`${a.url}/api/tasks?limit=1`, LIMIT, { headers: auth }),
      burst(`${b.url}/api/tasks?limit=1`, LIMIT, { headers: auth })
    ])
    expect((ra.statuses[200] ?? 0) + (rb.statuses[200] ?? 0)).toBe(LIMIT)
    expect((ra.statuses[429] ?? 0) + (rb.statuses[429] ?? 0)).toBe(LIMIT)
    // Both processes took part.
    expect(ra.statuses[200] ?? 0).toBeGreaterThan(0)
    expect(rb.statuses[200] ?? 0).toBeGreaterThan(0)

    const [aa, ab] = await Promise.all([burst(`${a.url}/api/tasks`, 10), burst(`${b.url}/api/tasks`, 10)])
    expect((aa.statuses[401] ?? 0) + (ab.statuses[401] ?? 0)).toBe(10)
    expect((aa.statuses[429] ?? 0) + (ab.statuses[429] ?? 0)).toBe(10)
    for (const s of servers) await s.stop()
  })

  it("do not share when told to keep the counters in memory (control)", async () => {
    const control = await createPgDatabase()
    try {
      servers = await pair(control.url, {
        TASKWRIGHT_RATE_LIMIT: String(LIMIT),
        TASKWRIGHT_RATE_LIMIT_STORE: "memory"
      })
      const [a, b] = servers
      if (a === undefined || b === undefined) throw new Error("servers did not start")
      const auth = { authorization: `Bearer ${a.adminKey}` }
      await freshWindow()
      const [ra, rb] = await Promise.all([
        burst(`${a.url}/api/tasks?limit=1`, LIMIT, { headers: auth }),
        burst(`${b.url}/api/tasks?limit=1`, LIMIT, { headers: auth })
      ])
      expect(ra.statuses).toEqual({ 200: LIMIT })
      expect(rb.statuses).toEqual({ 200: LIMIT })
    } finally {
      await Promise.all(servers.map((s) => s.stop()))
      servers = []
      await control.drop()
    }
  })
})
