/**
 * The events socket when it cannot serve, against a real server: behind a proxy that refuses
 * WebSockets the board polls the API (and keeps trying the socket); and when the server no
 * longer keeps the events after the id the board resumes from, it closes with 4410 and the board
 * starts afresh (no `since`, the data reloaded) instead of asking for that id again and again.
 */
import type { TestServer } from "@taskwright/testing"
import type { Browser, Page, WebSocketRoute } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  createPerson,
  eventsSocketAvailable,
  expectNoPageProblems,
  launchBrowser,
  newContext,
  type Person,
  proxyWithoutWebSockets,
  signIn,
  startServer,
  type TestProxy
} from "./harness.js"

/** The board's poll interval while the socket is down (`POLL_MS` in src/live.ts). */
const POLL_MS = 3000

/** When the page read the board's tasks, each time. */
const taskReads = (page: Page): Array<number> => {
  const reads: Array<number> = []
  page.on("request", (r) => {
    if (new URL(r.url()).pathname === "/api/tasks") reads.push(Date.now())
  })
  return reads
}

describe("the events socket refused and gone", () => {
  let server: TestServer
  let proxy: TestProxy
  let browser: Browser
  let person: Person

  beforeAll(async () => {
    server = await startServer()
    proxy = await proxyWithoutWebSockets(server.url)
    person = await createPerson(server, "Pat Polling")
    browser = await launchBrowser()
  })

  afterAll(async () => {
    await browser?.close()
    await proxy?.close()
    await server?.close()
  })

  const createTask = async (title: string) => {
    const r = await server.request("POST", "/api/tasks", { key: server.adminKey, body: { title } })
    expect(r.status, r.text).toBe(201)
  }

  it("polls the board through a proxy that refuses the socket, and keeps trying the socket", async () => {
    // The server has the socket; the proxy in front of it refuses it.
    expect(await eventsSocketAvailable(server.url, server.adminKey)).toBe(true)
    expect(await eventsSocketAvailable(proxy.url, server.adminKey)).toBe(false)
    const before = proxy.upgrades()

    const page = await (await newContext(browser)).newPage()
    const reads = taskReads(page)
    await signIn(page, proxy, person)
    await expect.poll(() => page.locator(".live-text").textContent(), { timeout: 10_000 }).toBe("Polling")

    // A change made elsewhere arrives by the next read, within a poll or two.
    await createTask("Seen by polling")
    await expect
      .poll(() => page.locator(".card", { hasText: "Seen by polling" }).count(), { timeout: 2 * POLL_MS + 2000 })
      .toBe(1)
    // The tasks are read again every few seconds...
    const count = reads.length
    await expect.poll(() => reads.length, { timeout: 2 * POLL_MS + 2000 }).toBeGreaterThan(count)
    const gaps = reads.slice(1).map((t, i) => t - (reads[i] ?? t))
    expect(Math.max(...gaps)).toBeGreaterThanOrEqual(POLL_MS - 500)
    // ...and the socket is tried again (after 1 s, 2 s, 4 s...), still refused, so still polling.
    await expect.poll(() => proxy.upgrades() - before, { timeout: 15_000 }).toBeGreaterThanOrEqual(3)
    expect(await page.locator(".live-text").textContent()).toBe("Polling")
    expectNoPageProblems(page)
    await page.context().close()
  })

  it("starts afresh when the server no longer keeps the events after its last id (4410)", async () => {
    const page: Page = await (await newContext(browser)).newPage()
    // Every socket of the page goes through to the server; while `cut`, a new one is closed at once,
    // as when the network is down, so the board falls behind on events.
    let cut = false
    const sockets: Array<{ url: URL; route: WebSocketRoute }> = []
    const serverCloses: Array<{ readonly code: number; readonly at: number }> = []
    await page.routeWebSocket(/\/api\/events/, (route) => {
      sockets.push({ url: new URL(route.url()), route })
      if (cut) {
        route.close({ code: 1001, reason: "the network is down" })
        return
      }
      const upstream = route.connectToServer()
      upstream.onClose((code, reason) => {
        serverCloses.push({ code: code ?? 0, at: Date.now() })
        route.close({ ...(code === undefined ? {} : { code }), ...(reason === undefined ? {} : { reason }) })
      })
    })
    const reads = taskReads(page)
    await signIn(page, server, person)
    await expect.poll(() => page.locator(".live-text").textContent(), { timeout: 10_000 }).toBe("Live")

    // An event the board sees: its last id.
    await createTask("Before the gap")
    await expect.poll(() => page.locator(".card", { hasText: "Before the gap" }).count(), { timeout: 5000 }).toBe(1)
    const [{ last }] = (await server.query<{ last: number }>("SELECT MAX(id) AS last FROM events")) as [
      { last: number }
    ]

    // The connection drops; the board resumes from `since=<last>`, which keeps failing while cut.
    cut = true
    sockets.at(-1)?.route.close({ code: 1001, reason: "the network is down" })
    await expect
      .poll(() => sockets.filter((s) => s.url.searchParams.get("since") === String(last)).length, {
        timeout: 10_000
      })
      .toBeGreaterThan(0)

    // Meanwhile more happens, and the log's retention passes over all of it but the newest event:
    // deleted as the pruning deletes what is older than the retention (TASKWRIGHT_EVENT_RETENTION_HOURS;
    // the server prunes at start and every ten minutes, too seldom to wait for here).
    await createTask("Made in the gap")
    await createTask("Made later in the gap")
    const pruned = await server.query<{ id: number }>(
      "DELETE FROM events WHERE id < (SELECT MAX(id) FROM events) RETURNING id"
    )
    expect(pruned.map((r) => Number(r.id))).toContain(Number(last))
    const [{ oldest }] = (await server.query<{ oldest: number }>("SELECT MIN(id) AS oldest FROM events")) as [
      { oldest: number }
    ]
    expect(Number(last)).toBeLessThan(Number(oldest) - 1)

    // The network is back: the next try with since=<last> reaches the server, which answers 4410.
    const resumedAt = sockets.length
    cut = false
    const gone = () => serverCloses.find((c) => c.code === 4410)?.at
    await expect.poll(gone, { timeout: 15_000 }).toBeDefined()
    const after = () => sockets.slice(resumedAt)
    expect(after()[0]?.url.searchParams.get("since")).toBe(String(last))
    // The board forgets that id: its next socket has no since, opens, and the data is read anew.
    await expect.poll(() => after().length, { timeout: 10_000 }).toBeGreaterThanOrEqual(2)
    expect(after()[1]?.url.searchParams.has("since")).toBe(false)
    await expect.poll(() => page.locator(".live-text").textContent(), { timeout: 10_000 }).toBe("Live")
    await expect.poll(() => reads.some((t) => t >= (gone() ?? Number.POSITIVE_INFINITY)), { timeout: 5000 }).toBe(true)
    for (const title of ["Made in the gap", "Made later in the gap"]) {
      expect(await page.locator(".card", { hasText: title }).count(), title).toBe(1)
    }
    // And stays live: no further attempt, and the next change comes over the new socket.
    const settled = sockets.length
    await createTask("After the gap")
    await expect.poll(() => page.locator(".card", { hasText: "After the gap" }).count(), { timeout: 1500 }).toBe(1)
    await page.waitForTimeout(2000)
    expect(sockets.length).toBe(settled)
    expect(serverCloses.filter((c) => c.code === 4410)).toHaveLength(1)
    expect(await page.locator(".live-text").textContent()).toBe("Live")
    expectNoPageProblems(page)
  })
})
