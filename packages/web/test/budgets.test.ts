/**
 * The budgets: the first load of the board transfers at most 150 KB of compressed JavaScript,
 * and a board of 1,000 tasks is drawn and usable within 300 ms — measured in the page with
 * `performance` marks from the moment the tasks are in hand to the first frame after they are
 * drawn, not with a clock around the driver's calls.
 */
import type { TestServer } from "@taskwright/testing"
import type { Browser } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createPerson, launchBrowser, newContext, type Person, screenshots, signIn, startServer } from "./harness.js"

const JS_BUDGET_BYTES = 150 * 1024
const RENDER_BUDGET_MS = 300
const TASKS = 1000

const STATUSES = ["backlog", "todo", "in_progress", "in_review", "done", "cancelled"] as const
const PRIORITIES = ["low", "medium", "high", "urgent"] as const
const LABELS = ["ui", "api", "docs", "bug", "perf", "infra", "design", "security"]

describe("budgets", () => {
  let server: TestServer
  let browser: Browser
  let person: Person

  beforeAll(async () => {
    server = await startServer()
    person = await createPerson(server, "Bo Budget")
    browser = await launchBrowser()
  })

  afterAll(async () => {
    await browser?.close()
    await server?.close()
  })

  it(`loads the board with at most ${JS_BUDGET_BYTES / 1024} KB of compressed JavaScript`, async () => {
    const context = await newContext(browser)
    const page = await context.newPage()
    await signIn(page, server, person)
    // A fresh context with the session only: nothing cached, as on a first visit.
    const fresh = await newContext(browser, { storageState: await context.storageState() })
    const board = await fresh.newPage()
    const encodings = new Map<string, string | undefined>()
    board.on("response", (r) => {
      if (r.url().endsWith(".js")) encodings.set(r.url(), r.headers()["content-encoding"])
    })
    await board.goto(`${server.url}/`)
    await board.waitForFunction(() => performance.getEntriesByName("board:render").length > 0)
    const scripts = await board.evaluate(() =>
      performance
        .getEntriesByType("resource")
        .filter((e): e is PerformanceResourceTiming => e.name.endsWith(".js"))
        .map((e) => ({
          name: e.name,
          transfer: e.transferSize,
          encoded: e.encodedBodySize,
          decoded: e.decodedBodySize
        }))
    )
    expect(scripts.length).toBeGreaterThan(0)
    const transferred = scripts.reduce((n, s) => n + s.transfer, 0)
    const encoded = scripts.reduce((n, s) => n + s.encoded, 0)
    const decoded = scripts.reduce((n, s) => n + s.decoded, 0)
    console.log(
      `[budget] first load of the board: ${scripts.length} script(s), ${transferred} bytes transferred ` +
        `(${encoded} compressed body, ${decoded} uncompressed); budget ${JS_BUDGET_BYTES}`
    )
    for (const [url, encoding] of encodings) expect(encoding, url).toBe("br")
    expect(encoded).toBeLessThan(decoded)
    expect(transferred).toBeGreaterThan(0)
    expect(transferred).toBeLessThanOrEqual(JS_BUDGET_BYTES)
    await context.close()
    await fresh.close()
  })

  it(`draws a board of ${TASKS} tasks and makes it usable within ${RENDER_BUDGET_MS} ms`, async () => {
    const user = await server.createUser()
    let next = 0
    const create = async () => {
      for (let i = next++; i < TASKS; i = next++) {
        const r = await server.request<{ id: number }>("POST", "/api/tasks", {
          key: user.key,
          body: {
            title: `Task ${i + 1}: ${["tidy", "ship", "fix", "measure"][i % 4]} the ${["parser", "board", "docs"][i % 3]}`,
            priority: PRIORITIES[i % PRIORITIES.length],
            labels: [LABELS[i % LABELS.length], LABELS[(i * 3 + 1) % LABELS.length]]
          }
        })
        expect(r.status, r.text).toBe(201)
        const status = STATUSES[i % STATUSES.length]
        if (status !== "backlog") {
          const u = await server.request("PATCH", `/api/tasks/${r.body.id}`, { key: user.key, body: { status } })
          expect(u.status, u.text).toBe(200)
        }
      }
    }
    await Promise.all(Array.from({ length: 8 }, create))

    const context = await newContext(browser)
    const page = await context.newPage()
    await signIn(page, server, person)
    const measures: Array<number> = []
    const commits: Array<number> = []
    // Five loads: the first runs on a cold JIT; the median is the budget's figure.
    for (let round = 0; round < 5; round++) {
      if (round > 0) await page.reload()
      await page.waitForFunction(() => performance.getEntriesByName("board:render").length > 0, undefined, {
        timeout: 30_000
      })
      expect(await page.locator(".card").count()).toBe(TASKS)
      const [render, commit] = await page.evaluate(() => [
        performance.getEntriesByName("board:render")[0]?.duration ?? -1,
        performance.getEntriesByName("board:commit")[0]?.duration ?? -1
      ])
      measures.push(render ?? -1)
      commits.push(commit ?? -1)
    }
    // Interactive: a card's menu opens on the first try.
    const first = page.locator(".card").first()
    await first.getByRole("button").click()
    await expect.poll(() => first.getByLabel("Status").count()).toBe(1)
    await page.keyboard.press("Escape")
    await screenshots(page, "board-1000")
    const sorted = [...measures].sort((x, y) => x - y)
    const median = sorted[2] ?? Number.POSITIVE_INFINITY
    console.log(
      `[budget] board of ${TASKS} tasks, data in hand → first frame drawn: ${measures.map((m) => m.toFixed(1)).join(", ")} ms (median ${median.toFixed(1)}; of which Preact's render and commit ${commits.map((m) => m.toFixed(1)).join(", ")}); budget ${RENDER_BUDGET_MS}`
    )
    expect(median).toBeLessThanOrEqual(RENDER_BUDGET_MS)
    await context.close()
  })
})
