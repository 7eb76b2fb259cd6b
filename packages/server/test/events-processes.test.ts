/**
 * Several server processes on one PostgreSQL: a subscriber on one sees every change made through
 * the other, in order (PostgreSQL NOTIFY says "read now", the event log says what).
 */
import { createPgDatabase, type TestDatabase } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { type ServerProcess, startServerProcess } from "./auth-helpers.js"

describe("two server processes on one PostgreSQL", () => {
  let db: TestDatabase
  let first: ServerProcess
  let second: ServerProcess

  beforeAll(async () => {
    db = await createPgDatabase()
    first = await startServerProcess({ databaseUrl: db.url, env: { TASKWRIGHT_RATE_LIMIT: "1000000" } })
    second = await startServerProcess({ databaseUrl: db.url, env: { TASKWRIGHT_RATE_LIMIT: "1000000" } })
  }, 60_000)
  afterAll(async () => {
    await Promise.all([first?.stop(), second?.stop()])
    await db?.drop()
  })

  it("a subscriber on one process receives, in order, every change made through either", async () => {
    const key = first.adminKey
    const ws = new WebSocket(`${first.url.replace(/^http/, "ws")}/api/events`, {
      headers: { authorization: `Bearer ${key}` }
    })
    const received: Array<{ id: number; type: string; data: { title?: string } }> = []
    ws.on("message", (data) => received.push(JSON.parse(data.toString())))
    await new Promise((resolve, reject) => {
      ws.on("open", resolve)
      ws.on("error", reject)
    })
    const titles: Array<string> = []
    for (let i = 0; i < 200; i++) {
      // Alternate between the processes, and write the second's half from it alone now and then.
      const target = i % 3 === 0 ? first : second
      const title = `p${i}`
      titles.push(title)
      const r = await fetch(`${target.url}/api/tasks`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ title })
      })
      expect(r.status).toBe(201)
    }
    const deadline = Date.now() + 15_000
    while (received.length < 200 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    expect(received.map((e) => e.data.title)).toEqual(titles)
    const ids = received.map((e) => e.id)
    expect(ids).toEqual([...ids].sort((a, b) => a - b))
    ws.close()
  }, 60_000)
})
