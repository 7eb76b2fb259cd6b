/**
 * The app's events client against a socket scripted in the test (Playwright's WebSocket routing),
 * speaking the protocol of `GET /api/events`: the subscription it sends (with `run:<id>` while a
 * run's log is shown), board changes applied from events alone, `run.log` lines appended to
 * "Run log", and `?since=<last id>` when it reconnects. This holds whether or not the server has
 * the endpoint yet; `board.test.ts` checks the real one once it is there.
 */
import type { TestServer } from "@taskwright/testing"
import type { Browser, Page, WebSocketRoute } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  createPerson,
  launchBrowser,
  makeRepository,
  newContext,
  type Person,
  signIn,
  startServer,
  useScriptedAgent
} from "./harness.js"

interface Socket {
  readonly route: WebSocketRoute
  readonly url: URL
  readonly received: Array<{ type?: string; topics?: Array<string> }>
}

describe("live updates over the events socket", () => {
  let server: TestServer
  let browser: Browser
  let person: Person
  let page: Page
  const sockets: Array<Socket> = []
  let nextId = 100
  let taskId = 0
  let runId = ""

  const current = () => {
    const socket = sockets.at(-1)
    if (socket === undefined) throw new Error("no socket yet")
    return socket
  }
  const push = (type: string, data: unknown) =>
    current().route.send(JSON.stringify({ id: nextId++, type, timestamp: new Date().toISOString(), data }))
  // The socket's subscription: its last `subscribe` message, else the `topics` it connected with.
  const lastTopics = () =>
    current()
      .received.filter((m) => m.type === "subscribe")
      .at(-1)?.topics ??
    current().url.searchParams.get("topics")?.split(",") ??
    []

  beforeAll(async () => {
    server = await startServer()
    person = await createPerson(server, "Lee Live")
    await useScriptedAgent(server, [{ stdout: "only line" }])
    browser = await launchBrowser()
    page = await (await newContext(browser)).newPage()
    await page.routeWebSocket(/\/api\/events/, (route) => {
      const socket: Socket = { route, url: new URL(route.url()), received: [] }
      route.onMessage((message) => socket.received.push(JSON.parse(String(message))))
      sockets.push(socket)
    })
    // A task with a finished run, made through the API as the signed-in person would.
    await signIn(page, server, person)
    const repo = await makeRepository()
    const api = (method: string, path: string, body?: unknown) =>
      page.evaluate(
        async ([m, p, b]) => {
          const r = await fetch(p as string, {
            method: m as string,
            headers: { "content-type": "application/json" },
            ...(b === undefined ? {} : { body: JSON.stringify(b) })
          })
          return r.json()
        },
        [method, path, body] as const
      )
    const project = (await api("POST", "/api/projects", { name: "Live", path: repo })) as { id: string }
    const task = (await api("POST", "/api/tasks", { title: "Watched task", project_id: project.id })) as { id: number }
    taskId = task.id
    const run = (await api("POST", `/api/tasks/${taskId}/run`, { agent: "command" })) as { run_id: string }
    runId = run.run_id
    for (let i = 0; i < 100; i++) {
      const r = (await api("GET", `/api/runs/${runId}`)) as { status: string }
      if (r.status !== "running") break
      await new Promise((done) => setTimeout(done, 100))
    }
  })

  afterAll(async () => {
    await browser?.close()
    await server?.close()
  })

  it("subscribes to the board's topics and says it is live", async () => {
    await page.goto(`${server.url}/`)
    await expect.poll(() => sockets.length).toBeGreaterThan(0)
    await expect.poll(() => page.locator(".live-text").textContent()).toBe("Live")
    expect(current().url.pathname).toBe("/api/events")
    expect(current().url.searchParams.has("since")).toBe(false)
    // Subscribed by the upgrade itself, so nothing can slip between "Live" and a subscription.
    expect(current().url.searchParams.get("topics")?.split(",")).toEqual(
      expect.arrayContaining(["tasks", "projects", "labels", "runs"])
    )
    await expect.poll(() => lastTopics()).toEqual(expect.arrayContaining(["tasks", "projects", "labels", "runs"]))
  })

  it("applies task events to the board without asking the API", async () => {
    const column = (name: string) => page.getByRole("region", { name, exact: true })
    await expect.poll(() => column("In review").locator(".card", { hasText: "Watched task" }).count()).toBe(1)
    const base = { description: "", priority: "urgent", labels: ["live"], created_at: new Date().toISOString() }
    push("task.updated", {
      ...base,
      id: taskId,
      title: "Watched task",
      status: "done",
      updated_at: new Date().toISOString()
    })
    await expect.poll(() => column("Done").locator(".card", { hasText: "Watched task" }).count()).toBe(1)
    push("task.created", {
      ...base,
      id: 999,
      title: "Pushed by the socket",
      status: "todo",
      updated_at: new Date().toISOString()
    })
    await expect.poll(() => column("To do").locator(".card", { hasText: "Pushed by the socket" }).count()).toBe(1)
    push("task.deleted", { id: 999 })
    await expect.poll(() => page.locator(".card", { hasText: "Pushed by the socket" }).count()).toBe(0)
  })

  it("keeps a task event that arrives while the board's read is on its way", async () => {
    // Every read of the tasks is answered by the server at once but handed to the page only when
    // released: the first reads before the event, the ones after it (the read again that the
    // socket's opening asks for) not until the end, so only the event can put the card there.
    const held: Array<{ readonly release: () => Promise<void> }> = []
    const tasksPath = /\/api\/tasks(\?|$)/
    await page.route(tasksPath, async (route) => {
      if (route.request().method() !== "GET") return route.continue()
      const response = await route.fetch()
      held.push({ release: () => route.fulfill({ response }).catch(() => {}) })
    })
    try {
      const before = sockets.length
      // Not waiting for the load event: the page's preloaded reads are among the held ones.
      await page.goto(`${server.url}/`, { waitUntil: "commit" })
      await expect.poll(() => sockets.length, { timeout: 5000 }).toBeGreaterThan(before)
      await expect.poll(() => page.locator(".live-text").textContent()).toBe("Live")
      await expect.poll(() => held.length).toBeGreaterThan(0)
      // Made after the server answered the held read, so that answer does not have it.
      const created = await page.evaluate(async () => {
        const r = await fetch("/api/tasks", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ title: "Made during the read" })
        })
        return r.json()
      })
      push("task.created", created)
      await page.waitForTimeout(100)
      for (const read of held.splice(0)) await read.release()
      const card = page.getByRole("region", { name: "Backlog", exact: true }).locator(".card", {
        hasText: "Made during the read"
      })
      await expect.poll(() => card.count()).toBe(1)
      await expect.poll(() => page.locator(".card", { hasText: "Watched task" }).count()).toBe(1)
    } finally {
      await page.unroute(tasksPath)
      for (const read of held.splice(0)) await read.release()
    }
  })

  it("streams run.log events of the shown run into Run log, and subscribes to its topic", async () => {
    await page.goto(`${server.url}/tasks/${taskId}`)
    const log = page.getByRole("region", { name: "Run log" })
    await expect.poll(() => log.getByText("only line").count()).toBe(1)
    await expect.poll(() => lastTopics()).toContain(`run:${runId}`)
    const seqs = await log.locator(".log-line").count()
    const lastSeq =
      (
        await page.evaluate(
          async (id) =>
            ((await (await fetch(`/api/runs/${id}/logs?limit=1000`)).json()) as { logs: Array<{ seq: number }> }).logs,
          runId
        )
      ).at(-1)?.seq ?? seqs
    push("run.log", {
      run_id: runId,
      seq: lastSeq + 1,
      timestamp: new Date().toISOString(),
      level: "error",
      message: "from the socket"
    })
    const line = log.locator(".log-line", { hasText: "from the socket" })
    await expect.poll(() => line.count()).toBe(1)
    expect(await line.getAttribute("class")).toContain("log-error")
    // Another run's line is not this log's.
    push("run.log", {
      run_id: "run_AAAAAAAAAAAAAAAA",
      seq: lastSeq + 2,
      timestamp: new Date().toISOString(),
      level: "info",
      message: "not mine"
    })
    await page.waitForTimeout(300)
    expect(await log.getByText("not mine").count()).toBe(0)
  })

  it("reconnects after the socket drops, resuming after the last event it saw", async () => {
    const before = sockets.length
    const lastId = nextId - 1
    current().route.close({ code: 1011, reason: "restarting" })
    await expect.poll(() => page.locator(".live-text").textContent()).toBe("Polling")
    await expect.poll(() => sockets.length, { timeout: 10_000 }).toBe(before + 1)
    expect(current().url.searchParams.get("since")).toBe(String(lastId))
    await expect.poll(() => page.locator(".live-text").textContent()).toBe("Live")
    await expect.poll(() => lastTopics()).toContain(`run:${runId}`)
  })
})
