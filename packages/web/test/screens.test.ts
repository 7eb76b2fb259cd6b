/**
 * The board's filters; what a credential without `tasks:write` is offered; every screen's
 * loading and error states (photographed and scanned by axe-core); and the Agents settings:
 * saving, enabling and disabling, the API's messages beside their fields, and what someone who
 * is not an administrator sees.
 */
import { UserId, Users } from "@taskwright/core"
import type { TestServer } from "@taskwright/testing"
import { Effect } from "effect"
import type { Browser, Page, Route } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  createPerson,
  expectAccessible,
  expectNoPageProblems,
  makeRepository,
  newContext,
  openSignedIn,
  type Person,
  screenshots,
  signIn,
  startServer
} from "./harness.js"

const column = (page: Page, name: string) => page.getByRole("region", { name, exact: true })
const cardTitles = async (page: Page) =>
  (await page.locator(".card .card-title").allTextContents()).map((t) => t.trim()).sort()

describe("screens", () => {
  let server: TestServer
  let browser: Browser
  let admin: Person
  let page: Page

  /** Makes something through the API as the bootstrap admin; answers the body. */
  const make = async <T>(path: string, body: unknown): Promise<T> => {
    const r = await server.request<T>("POST", path, { key: server.adminKey, body })
    expect(r.status, r.text).toBe(201)
    return r.body
  }

  beforeAll(async () => {
    server = await startServer()
    admin = await createPerson(server, "Fay Filters")
    ;({ browser, page } = await openSignedIn(server, admin))
  })

  afterAll(async () => {
    await browser?.close()
    await server?.close()
  })

  it("filters the board by project, priority and label", async () => {
    const alpha = await make<{ id: string }>("/api/projects", { name: "Alpha", path: await makeRepository() })
    const beta = await make<{ id: string }>("/api/projects", { name: "Beta", path: await makeRepository() })
    const tasks = [
      { title: "Alpha urgent bug", project_id: alpha.id, priority: "urgent", labels: ["bug"] },
      { title: "Alpha low docs", project_id: alpha.id, priority: "low", labels: ["docs"] },
      { title: "Beta urgent docs", project_id: beta.id, priority: "urgent", labels: ["docs", "ui"] },
      { title: "Loose medium", priority: "medium", labels: [] }
    ]
    for (const t of tasks) await make("/api/tasks", t)
    const all = tasks.map((t) => t.title).sort()

    await page.goto(`${server.url}/`)
    await expect.poll(() => cardTitles(page)).toEqual(all)
    const filters = page.getByRole("group", { name: "Filters" })
    const project = filters.getByLabel("Project")
    const priority = filters.getByLabel("Priority")
    const label = filters.getByLabel("Label")

    await project.selectOption({ label: "Alpha" })
    await expect.poll(() => cardTitles(page)).toEqual(["Alpha low docs", "Alpha urgent bug"])
    await priority.selectOption("urgent")
    await expect.poll(() => cardTitles(page)).toEqual(["Alpha urgent bug"])
    await screenshots(page, "board-filtered")
    await expectAccessible(page, "Board, filtered")

    // Kept while visiting another screen.
    await page.getByRole("link", { name: "Projects" }).click()
    await page.getByRole("link", { name: "Board" }).first().click()
    await expect.poll(() => cardTitles(page)).toEqual(["Alpha urgent bug"])
    expect(await project.inputValue()).toBe(alpha.id)

    await filters.getByRole("button", { name: "Clear filters" }).click()
    await expect.poll(() => cardTitles(page)).toEqual(all)
    await label.selectOption("docs")
    await expect.poll(() => cardTitles(page)).toEqual(["Alpha low docs", "Beta urgent docs"])
    await priority.selectOption("urgent")
    await expect.poll(() => cardTitles(page)).toEqual(["Beta urgent docs"])
    await project.selectOption({ label: "Alpha" })
    // Nothing matches: the empty state says so and how to get out of it.
    await expect.poll(() => page.getByText("No task matches these filters.").count()).toBe(1)
    expect(await page.locator(".card").count()).toBe(0)
    await screenshots(page, "board-filtered-empty")
    await expectAccessible(page, "Board, nothing matching the filters")
    await filters.getByRole("button", { name: "Clear filters" }).click()
    await expect.poll(() => cardTitles(page)).toEqual(all)
    // A change arriving while filtered is placed by the same filters.
    await project.selectOption({ label: "Beta" })
    await expect.poll(() => cardTitles(page)).toEqual(["Beta urgent docs"])
    await make("/api/tasks", { title: "Beta arrives live", project_id: beta.id })
    await make("/api/tasks", { title: "Alpha arrives live", project_id: alpha.id })
    await expect.poll(() => cardTitles(page)).toEqual(["Beta arrives live", "Beta urgent docs"])
    await filters.getByRole("button", { name: "Clear filters" }).click()
    expectNoPageProblems(page)
  })

  it("offers no drag or Status change to a credential without tasks:write", async () => {
    const reader = await server.createUser({ scopes: ["tasks:read", "projects:read"] })
    // The same user's second key, to make a task the reader can see.
    const writer = await server.server.run(
      Effect.flatMap(Users, (users) =>
        users.createKey({
          userId: UserId.make(reader.id),
          name: "writer",
          scopes: ["tasks:read", "tasks:write"],
          expiresAt: null
        })
      )
    )
    const title = "Read but not moved"
    const created = await server.request<{ id: number }>("POST", "/api/tasks", {
      key: writer.secret,
      body: { title }
    })
    expect(created.status).toBe(201)

    // The browser sends the reader's key with every request, as a proxy signing requests would.
    const context = await newContext(browser)
    await context.setExtraHTTPHeaders({ authorization: `Bearer ${reader.key}` })
    const readerPage = await context.newPage()
    const writes: Array<string> = []
    readerPage.on("request", (r) => {
      if (r.method() !== "GET" && new URL(r.url()).pathname.startsWith("/api/tasks")) writes.push(r.url())
    })
    await readerPage.goto(`${server.url}/`)
    const me = await readerPage.evaluate(
      async () => (await (await fetch("/api/auth/me")).json()) as { scopes: unknown }
    )
    expect(me.scopes).toEqual(expect.arrayContaining(["tasks:read", "projects:read"]))
    expect(me.scopes).not.toContain("tasks:write")
    const card = readerPage.locator(".card", { hasText: title })
    await expect.poll(() => column(readerPage, "Backlog").locator(".card", { hasText: title }).count()).toBe(1)
    expect(await readerPage.getByRole("button", { name: "New task" }).count()).toBe(0)
    expect(await card.getAttribute("draggable")).toBe("false")

    // Dragging does nothing: the card stays, and nothing is sent.
    await card.dragTo(column(readerPage, "To do"))
    await readerPage.waitForTimeout(300)
    expect(await column(readerPage, "Backlog").locator(".card", { hasText: title }).count()).toBe(1)

    // Its menu opens the task but offers no Status select.
    await card.getByRole("button", { name: `Actions for ${title}` }).click()
    await expect.poll(() => card.getByRole("link", { name: "Open task" }).count()).toBe(1)
    expect(await card.getByLabel("Status").count()).toBe(0)
    expect(await card.getByText("Your access lets you read tasks, not move them.").count()).toBe(1)
    await screenshots(readerPage, "board-read-only")
    await expectAccessible(readerPage, "Board, read-only")

    await card.getByRole("link", { name: "Open task" }).click()
    await expect.poll(() => readerPage.getByRole("heading", { name: title, level: 1 }).count()).toBe(1)
    expect(await readerPage.getByLabel("Status").isDisabled()).toBe(true)
    expect(await readerPage.getByLabel("Priority").isDisabled()).toBe(true)
    expect(await readerPage.getByRole("button", { name: "Delete task" }).count()).toBe(0)
    expect(await readerPage.getByRole("button", { name: "Start run" }).count()).toBe(0)
    expect(writes).toEqual([])
    const status = await server.request<{ status: string }>("GET", `/api/tasks/${created.body.id}`, {
      key: writer.secret
    })
    expect(status.body.status).toBe("backlog")
    expectNoPageProblems(readerPage)
    await context.close()
  })

  describe("loading and error states", () => {
    let taskId = 0

    beforeAll(async () => {
      taskId = (await make<{ id: number }>("/api/tasks", { title: "A task to load" })).id
    })

    const screens = () => [
      { name: "app", path: "/", api: /\/api\/auth\/me$/, loading: "Loading Taskwright…", heading: "Board" },
      { name: "board", path: "/", api: /\/api\/tasks(\?.*)?$/, loading: "Loading the board…", heading: "Board" },
      {
        name: "task",
        path: `/tasks/${taskId}`,
        api: new RegExp(`/api/tasks/${taskId}$`),
        loading: "Loading the task…",
        heading: "A task to load"
      },
      {
        name: "projects",
        path: "/projects",
        api: /\/api\/projects(\?.*)?$/,
        loading: "Loading projects…",
        heading: "Projects"
      },
      {
        name: "keys",
        path: "/settings/keys",
        api: /\/api\/keys(\?.*)?$/,
        loading: "Loading your keys…",
        heading: "API keys"
      },
      {
        name: "agents",
        path: "/settings/agents",
        api: /\/api\/agents$/,
        loading: "Loading agents…",
        heading: "Agents"
      }
    ]

    it("shows a designed loading state on every screen while its data is on the way", async () => {
      for (const screen of screens()) {
        // The answer is held back until the loading state has been photographed and scanned.
        let release: () => void = () => {}
        const held = new Promise<void>((done) => {
          release = done
        })
        const continued: Array<Promise<void>> = []
        const hold = (route: Route) => {
          const answer = held.then(() => route.continue())
          continued.push(answer)
          return answer
        }
        await page.route(screen.api, hold)
        await page.goto(`${server.url}${screen.path}`)
        const loading = page.getByRole("status").filter({ hasText: screen.loading })
        await expect.poll(() => loading.count(), { message: screen.name }).toBe(1)
        await screenshots(page, `loading-${screen.name}`)
        await expectAccessible(page, `${screen.name} loading`)
        release()
        await Promise.all(continued)
        await page.unroute(screen.api, hold)
        await expect
          .poll(() => page.getByRole("heading", { name: screen.heading, level: 1 }).count(), { message: screen.name })
          .toBe(1)
        await expect.poll(() => loading.count(), { message: screen.name }).toBe(0)
      }
      expectNoPageProblems(page)
    })

    it("shows a designed error state on every screen when the server cannot be reached, and recovers", async () => {
      for (const screen of screens()) {
        const refuse = (route: Route) => route.abort("connectionrefused")
        await page.route(screen.api, refuse)
        await page.goto(`${server.url}${screen.path}`)
        const error = page.getByRole("alert").filter({ hasText: "The server cannot be reached" })
        await expect.poll(() => error.count(), { message: screen.name }).toBeGreaterThan(0)
        await screenshots(page, `error-${screen.name}`)
        await expectAccessible(page, `${screen.name} error`)
        // The network is back: "Try again" loads the screen.
        await page.unroute(screen.api, refuse)
        await error.first().getByRole("button", { name: "Try again" }).click()
        await expect
          .poll(() => page.getByRole("heading", { name: screen.heading, level: 1 }).count(), { message: screen.name })
          .toBe(1)
        await expect.poll(() => error.count(), { message: screen.name }).toBe(0)
      }
    })
  })

  describe("agents settings", () => {
    interface AgentView {
      readonly enabled: boolean
      readonly model: string
      readonly timeout_s: number
    }
    const agentNow = async (name: string) =>
      (await server.request<{ agents: Record<string, AgentView> }>("GET", "/api/agents", { key: server.adminKey })).body
        .agents[name]

    const form = () => page.getByRole("group", { name: /^gemini/ })

    it("saves an agent's model, autonomy and timeout", async () => {
      await page.goto(`${server.url}/settings/agents`)
      await expect.poll(() => form().count()).toBe(1)
      const before = await agentNow("gemini")
      expect(before).toBeDefined()
      const save = form().getByRole("button", { name: "Save gemini" })
      // Nothing changed, nothing to save.
      expect(await save.isDisabled()).toBe(true)
      await form().getByLabel("Model").fill("gemini-2.5-pro")
      await form().getByLabel("Autonomy").selectOption("read-only")
      await form().getByLabel("Timeout (seconds)").fill("900")
      await save.click()
      await expect.poll(() => page.getByText("Saved gemini.").count()).toBe(1)
      await expect
        .poll(async () => {
          const a = await agentNow("gemini")
          return [a?.model, a?.timeout_s]
        })
        .toEqual(["gemini-2.5-pro", 900])
      const listed = await server.request<{ agents: Record<string, { autonomy: string }> }>("GET", "/api/agents", {
        key: server.adminKey
      })
      expect(listed.body.agents.gemini?.autonomy).toBe("read-only")
      expect(await form().getByRole("button", { name: "Save gemini" }).isDisabled()).toBe(true)
    })

    it("enables and disables an agent", async () => {
      const enabled = form().getByRole("checkbox", { name: "Enabled" })
      const was = (await agentNow("gemini"))?.enabled ?? false
      for (const next of [!was, was]) {
        await enabled.setChecked(next)
        await form().getByRole("button", { name: "Save gemini" }).click()
        await expect.poll(async () => (await agentNow("gemini"))?.enabled).toBe(next)
        await expect.poll(() => form().locator(".badge").textContent()).toBe(next ? "On" : "Off")
      }
    })

    it("shows the API's message beside its field, and refuses an empty timeout without sending it", async () => {
      const puts: Array<string> = []
      const record = (r: { method(): string; postData(): string | null; url(): string }) => {
        if (r.method() === "PUT" && r.url().includes("/api/agents/")) puts.push(r.postData() ?? "")
      }
      page.on("request", record)
      // A model the API refuses (over 200 characters): its message goes beside Model.
      const model = form().getByLabel("Model")
      await model.fill("m".repeat(201))
      await form().getByRole("button", { name: "Save gemini" }).click()
      await expect.poll(() => model.getAttribute("aria-invalid")).toBe("true")
      const modelMessage = await describedText(page, model)
      expect(modelMessage).toMatch(/model/i)
      expect(await form().locator(".form-error").count()).toBe(0)
      expect(puts).toHaveLength(1)
      await screenshots(page, "agents-error")
      await expectAccessible(page, "Agents with a field error")
      await model.fill("default")

      // An empty timeout is not 0: the form refuses it beside the field and sends nothing.
      const timeout = form().getByLabel("Timeout (seconds)")
      for (const typed of ["", "0", "1.5"]) {
        await timeout.fill(typed)
        await form().getByRole("button", { name: "Save gemini" }).click()
        await expect.poll(() => timeout.getAttribute("aria-invalid"), { message: typed }).toBe("true")
        expect(await describedText(page, timeout)).toMatch(/timeout/i)
        await expect.poll(() => timeout.evaluate((el) => el === document.activeElement)).toBe(true)
      }
      expect(puts).toHaveLength(1)
      await timeout.fill("600")
      await form().getByRole("button", { name: "Save gemini" }).click()
      await expect.poll(async () => (await agentNow("gemini"))?.timeout_s).toBe(600)
      expect(JSON.parse(puts.at(-1) ?? "{}")).toEqual({ model: "default", timeout_s: 600 })
      page.off("request", record)
    })

    it("shows someone who is not an administrator the agents, without the means to change them", async () => {
      const person = await createPerson(server, "Nia Member", false)
      const context = await newContext(browser)
      const member = await context.newPage()
      await signIn(member, server, person)
      expect(await member.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Agents" }).count()).toBe(
        0
      )
      await member.goto(`${server.url}/settings/agents`)
      await expect.poll(() => member.getByText("Only administrators change agents.").count()).toBe(1)
      await expect.poll(() => member.getByRole("region", { name: "gemini" }).count()).toBe(1)
      expect(await member.getByRole("button", { name: /^Save/ }).count()).toBe(0)
      expect(await member.locator("input, select").count()).toBe(0)
      await screenshots(member, "agents-member")
      await expectAccessible(member, "Agents for a member")
      // And the API agrees.
      const status = await member.evaluate(
        async () =>
          (
            await fetch("/api/agents/gemini", {
              method: "PUT",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ enabled: true })
            })
          ).status
      )
      expect(status).toBe(403)
      expectNoPageProblems(member)
      await context.close()
    })
  })
})

/** The text of the elements that describe `field` (its hint and message). */
const describedText = async (page: Page, field: ReturnType<Page["locator"]>) => {
  const ids = ((await field.getAttribute("aria-describedby")) ?? "").split(" ").filter((id) => id !== "")
  const texts = await Promise.all(ids.map((id) => page.locator(`[id="${id}"]`).textContent()))
  return texts.join(" ")
}
