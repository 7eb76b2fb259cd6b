/**
 * The board end to end in Chromium: sign in, a project and a task, drag the card to "To do",
 * a run of the scripted agent whose lines arrive in "Run log", the card reaching "In review",
 * approval, "Done"; a second browser context that sees the first one's changes; every screen
 * photographed at phone and desktop widths and scanned by axe-core.
 */
import { scriptedAgentPath, type TestServer } from "@taskwright/testing"
import type { Browser, BrowserContext, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  createPerson,
  expectAccessible,
  expectNoPageProblems,
  launchBrowser,
  makeRepository,
  newContext,
  type Person,
  screenshots,
  signIn,
  startServer,
  useScriptedAgent
} from "./harness.js"

/** The board's poll interval while the socket is down (`POLL_MS` in src/live.ts). */
const POLL_MS = 3000
/** How long the second context may take to show the first one's change: well inside one poll. */
const LIVE_WITHIN_MS = POLL_MS / 2

const LINES = 6
/** Lines a second or so apart, so the log is seen arriving rather than all at once. */
const SCRIPT = [
  { stdout: "agent: reading the task" },
  ...Array.from({ length: LINES }, (_, i) => [{ sleep_ms: 250 }, { stdout: `step ${i + 1} of ${LINES}` }]).flat(),
  { stderr: "warning: nothing to lint" },
  { write: "NOTES.md", content: "# Notes\n\nDone by the scripted agent.\n" },
  { stdout: "agent: finished" }
]

const column = (page: Page, name: string) => page.getByRole("region", { name, exact: true })
const card = (page: Page, title: string) => page.locator(".card", { hasText: title })

describe("the board, a run and its review", () => {
  let server: TestServer
  let browser: Browser
  let person: Person
  let repo: string
  let a: BrowserContext
  let page: Page
  let other: Page
  const title = "Write the release notes"

  beforeAll(async () => {
    server = await startServer()
    person = await createPerson(server, "Ada Board")
    repo = await makeRepository()
    await useScriptedAgent(server, SCRIPT)
    browser = await launchBrowser()
    a = await newContext(browser)
    page = await a.newPage()
  })

  afterAll(async () => {
    await browser?.close()
    await server?.close()
  })

  it("signs in, showing the API's message for a wrong password", async () => {
    await page.goto(`${server.url}/`)
    await expect.poll(() => page.getByRole("heading", { name: "Sign in" }).count()).toBe(1)
    await screenshots(page, "sign-in")
    await expectAccessible(page, "Sign in")

    const refused = await server.request<{ error: { message: string } }>("POST", "/api/auth/login", {
      body: { email: person.email, password: "not the password" }
    })
    expect(refused.status).toBe(401)
    await page.getByLabel("Email").fill(person.email)
    await page.getByLabel("Password").fill("not the password")
    await page.getByRole("button", { name: "Sign in" }).click()
    const alert = page.getByRole("alert").filter({ hasText: refused.body.error.message })
    await expect.poll(() => alert.count()).toBe(1)
    await screenshots(page, "sign-in-error")

    await signIn(page, server, person)
    for (const name of ["Backlog", "To do", "In progress", "In review", "Done", "Cancelled"]) {
      await expect
        .poll(() => page.getByRole("heading", { name, exact: true, level: 2 }).count(), { message: name })
        .toBe(1)
    }
    await expect.poll(() => page.getByText("No tasks yet.").count()).toBe(1)
    await screenshots(page, "board-empty")
    await expectAccessible(page, "Board (empty)")
  })

  it("creates a project", async () => {
    await page.getByRole("link", { name: "Projects" }).click()
    await expect.poll(() => page.getByRole("heading", { name: "Projects", level: 1 }).count()).toBe(1)
    await expect.poll(() => page.getByText("No projects yet.").count()).toBe(1)
    await page.getByRole("button", { name: "Create project" }).click()
    await expect.poll(() => page.locator("[aria-invalid=true]").count()).toBeGreaterThan(0)
    await page.getByLabel("Name").fill("Website")
    await page.getByLabel("Path", { exact: true }).fill(repo)
    await page.getByRole("button", { name: "Create project" }).click()
    await expect.poll(() => page.locator(".list-item", { hasText: "Website" }).count()).toBe(1)
    await screenshots(page, "projects")
    await expectAccessible(page, "Projects")
  })

  it("creates a task, with the API's validation message next to its field", async () => {
    await page.getByRole("link", { name: "Board" }).click()
    await page.getByRole("button", { name: "New task" }).click()
    const dialog = page.getByRole("dialog", { name: "New task" })
    await expect.poll(() => dialog.count()).toBe(1)
    // A blank title: the API refuses it, and its message is tied to the Title field.
    await dialog.getByLabel("Title").fill("   ")
    await dialog.getByRole("button", { name: "Create task" }).click()
    const titleField = dialog.getByLabel("Title")
    await expect.poll(() => titleField.getAttribute("aria-invalid")).toBe("true")
    const describedBy = (await titleField.getAttribute("aria-describedby")) ?? ""
    const message = await page.locator(`[id="${describedBy.split(" ").at(-1)}"]`).textContent()
    expect(message).toMatch(/title/i)
    await screenshots(page, "new-task-error")
    await expectAccessible(page, "New task dialog")

    await titleField.fill(title)
    await dialog
      .getByLabel("Description")
      .fill(
        "Summarise **what changed** in `v2`.\n\n- one\n- two\n\n<img src=x onerror=\"document.title='owned'\"><script>document.title='owned'</script>\n\n[a link](javascript:alert(1)) and [the site](https://example.com)"
      )
    await dialog.getByLabel("Priority").selectOption("high")
    await dialog.getByLabel("Labels").fill("docs, release")
    await dialog.getByLabel("Project").selectOption({ label: "Website" })
    await dialog.getByRole("button", { name: "Create task" }).click()
    await expect.poll(() => dialog.count()).toBe(0)

    const created = card(page, title)
    await expect.poll(() => column(page, "Backlog").locator(".card", { hasText: title }).count()).toBe(1)
    expect(await created.getByText("High").count()).toBe(1)
    expect(await created.locator(".chip", { hasText: "docs" }).count()).toBe(1)
    expect(await created.locator(".chip", { hasText: "release" }).count()).toBe(1)
    // Labels in their colours.
    const colour = await created
      .locator(".chip", { hasText: "docs" })
      .evaluate((el) => getComputedStyle(el).backgroundColor)
    expect(colour).toMatch(/^rgb/)
    expect(colour).not.toBe("rgba(0, 0, 0, 0)")
  })

  it("moves the card to To do by drag and drop; a second context sees it", async () => {
    const created = card(page, title)
    await created.dragTo(column(page, "To do"))
    await expect.poll(() => column(page, "To do").locator(".card", { hasText: title }).count()).toBe(1)
    await expect
      .poll(async () => {
        const r = await server.request<{ tasks: Array<{ title: string; status: string }> }>("GET", "/api/tasks", {
          key: server.adminKey
        })
        return r.body.tasks.find((t) => t.title === title)?.status
      })
      .toBe("todo")
    await screenshots(page, "board")
    await expectAccessible(page, "Board")

    const b = await newContext(browser, { storageState: await a.storageState() })
    other = await b.newPage()
    await other.goto(`${server.url}/`)
    await expect.poll(() => column(other, "To do").locator(".card", { hasText: title }).count()).toBe(1)
  })

  it("moves a card with the keyboard through its Status select", async () => {
    const created = card(page, title)
    await created.getByRole("button", { name: `Actions for ${title}` }).focus()
    await page.keyboard.press("Enter")
    const status = created.getByLabel("Status")
    await expect.poll(() => status.evaluate((el) => el === document.activeElement)).toBe(true)
    await status.selectOption("in_progress")
    await expect.poll(() => column(page, "In progress").locator(".card", { hasText: title }).count()).toBe(1)
    // And back, so the run starts from To do.
    await card(page, title)
      .getByRole("button", { name: `Actions for ${title}` })
      .click()
    await card(page, title).getByLabel("Status").selectOption("todo")
    await expect.poll(() => column(page, "To do").locator(".card", { hasText: title }).count()).toBe(1)
  })

  it("shows the task: heading, safe Markdown, details", async () => {
    await card(page, title).getByRole("link", { name: title }).click()
    await expect.poll(() => page.getByRole("heading", { name: title, level: 1 }).count()).toBe(1)
    const description = page.getByRole("region", { name: "Description" })
    await expect.poll(() => description.locator("strong", { hasText: "what changed" }).count()).toBe(1)
    expect(await description.locator("code", { hasText: "v2" }).count()).toBe(1)
    expect(await description.locator("li").count()).toBe(2)
    // Raw HTML is text, never elements; a javascript: link is not a link.
    expect(await description.locator("img, script").count()).toBe(0)
    expect(await description.getByText("<img src=x", { exact: false }).count()).toBe(1)
    expect(await description.locator('a[href^="javascript"]').count()).toBe(0)
    expect(await description.locator('a[href="https://example.com/"]').count()).toBe(1)
    expect(await page.title()).not.toContain("owned")
    expect(await page.getByLabel("Status").inputValue()).toBe("todo")
  })

  it("starts a run of the scripted agent and streams its log into Run log", async () => {
    await page.getByLabel("Agent").selectOption("command")
    await page.getByRole("button", { name: "Start run" }).click()
    const log = page.getByRole("region", { name: "Run log" })
    await expect.poll(() => log.count(), { timeout: 15_000 }).toBe(1)
    // Lines arrive while the run goes on: the first before the last.
    await expect.poll(() => log.getByText("step 1 of", { exact: false }).count(), { timeout: 20_000 }).toBe(1)
    const seenEarly = await log.getByText("agent: finished").count()
    await expect.poll(() => log.getByText("agent: finished").count(), { timeout: 30_000 }).toBe(1)
    expect(seenEarly).toBe(0)
    expect(await log.locator(".log-line").count()).toBeGreaterThanOrEqual(LINES + 2)
    // Levels are coloured: each line carries its level's class.
    const levels = await log.locator(".log-line").evaluateAll((els) => els.map((el) => el.className))
    expect(levels.every((c) => /log-(debug|info|warn|error)/.test(c))).toBe(true)
    // The run ends, the figures appear, and the task waits in review.
    await expect.poll(() => page.locator(".badge", { hasText: "Completed" }).count(), { timeout: 30_000 }).toBe(1)
    await expect.poll(() => page.getByLabel("Status").inputValue(), { timeout: 15_000 }).toBe("in_review")
    expect(await page.locator(".added").first().textContent()).toMatch(/^\+[1-9]/)
    await screenshots(page, "task-run")
    await expectAccessible(page, "Task with a run")
  })

  it("shows the card in In review on the other context's board", async () => {
    await expect
      .poll(() => column(other, "In review").locator(".card", { hasText: title }).count(), { timeout: 20_000 })
      .toBe(1)
  })

  it("approves the work; the card reaches Done", async () => {
    const review = page.getByRole("region", { name: "Review" })
    await expect.poll(() => review.count()).toBe(1)
    await screenshots(page, "task-review")
    await review.getByRole("button", { name: "Approve" }).click()
    await expect.poll(() => page.getByLabel("Status").inputValue()).toBe("done")
    await page.getByRole("link", { name: "Board" }).first().click()
    await expect.poll(() => column(page, "Done").locator(".card", { hasText: title }).count()).toBe(1)
    await expect
      .poll(() => column(other, "Done").locator(".card", { hasText: title }).count(), { timeout: 20_000 })
      .toBe(1)
  })

  it("stops a running run", async () => {
    // Another command agent, by name, whose script sleeps long enough to be stopped.
    const slow = await server.request("PUT", "/api/agents/slow", {
      key: server.adminKey,
      body: {
        enabled: true,
        command: [process.execPath, scriptedAgentPath],
        env: { TASKWRIGHT_SCRIPT: JSON.stringify([{ stdout: "sleeping" }, { sleep_ms: 60_000 }]) }
      }
    })
    expect(slow.status, slow.text).toBe(200)
    await card(page, title).getByRole("link", { name: title }).click()
    await expect.poll(() => page.getByRole("heading", { name: title, level: 1 }).count()).toBe(1)
    await page.reload()
    await page.getByLabel("Agent").selectOption("slow")
    await page.getByRole("button", { name: "Start run" }).click()
    const log = page.getByRole("region", { name: "Run log" })
    await expect.poll(() => log.getByText("sleeping").count(), { timeout: 20_000 }).toBe(1)
    await page.getByRole("button", { name: "Stop run" }).click()
    await expect.poll(() => page.locator(".badge", { hasText: "Stopped" }).count(), { timeout: 20_000 }).toBe(1)
    expect(await page.getByRole("button", { name: "Stop run" }).count()).toBe(0)
  })

  it("deletes a project after confirmation, with its tasks when asked", async () => {
    await page.getByRole("link", { name: "Projects" }).click()
    await page.getByRole("button", { name: "Delete Website" }).click()
    const dialog = page.getByRole("dialog", { name: "Delete Website?" })
    await dialog.getByRole("button", { name: "Delete project" }).click()
    // It has tasks: the API's refusal is shown in the dialog.
    await expect.poll(() => dialog.getByRole("alert").count()).toBe(1)
    await dialog.getByLabel("Also delete its tasks", { exact: false }).check()
    await dialog.getByRole("button", { name: "Delete project" }).click()
    await expect.poll(() => page.getByText("No projects yet.").count()).toBe(1)
    await page.getByRole("link", { name: "Board" }).first().click()
    await expect.poll(() => page.getByText("No tasks yet.").count()).toBe(1)
  })

  it("shows the Agents settings to an admin", async () => {
    await page.getByRole("link", { name: "Agents" }).click()
    await expect.poll(() => page.getByRole("group", { name: /^command/ }).count()).toBe(1)
    await screenshots(page, "agents")
    await expectAccessible(page, "Agents")
  })

  it("answers an unknown client path with a designed page", async () => {
    await page.goto(`${server.url}/tasks/99999`)
    await expect.poll(() => page.getByRole("heading", { name: "Task not found" }).count()).toBe(1)
    await screenshots(page, "task-not-found")
    await expectAccessible(page, "Task not found")
    expectNoPageProblems(page)
    expectNoPageProblems(other)
  })

  it("shows the first context's changes in the second at once, over the events socket, not by polling", async () => {
    await page.getByRole("link", { name: "Board" }).first().click()
    await other.goto(`${server.url}/`)
    for (const p of [page, other]) {
      await expect.poll(() => p.locator(".live-text").textContent(), { timeout: 10_000 }).toBe("Live")
    }
    // The socket's opening reloads the board once; what comes after it must come over the socket.
    await other.waitForTimeout(1000)
    const reads: Array<string> = []
    other.on("request", (r) => {
      if (new URL(r.url()).pathname.startsWith("/api/tasks")) reads.push(`${r.method()} ${r.url()}`)
    })
    const made = "Made in the first tab"

    // Created in the first context...
    await page.getByRole("button", { name: "New task" }).click()
    const dialog = page.getByRole("dialog", { name: "New task" })
    await dialog.getByLabel("Title").fill(made)
    let started = Date.now()
    await dialog.getByRole("button", { name: "Create task" }).click()
    await expect
      .poll(() => column(other, "Backlog").locator(".card", { hasText: made }).count(), { timeout: LIVE_WITHIN_MS })
      .toBe(1)
    const created = Date.now() - started

    // ...then dragged to In progress there.
    await expect.poll(() => column(page, "Backlog").locator(".card", { hasText: made }).count()).toBe(1)
    started = Date.now()
    await card(page, made).dragTo(column(page, "In progress"))
    await expect
      .poll(() => column(other, "In progress").locator(".card", { hasText: made }).count(), {
        timeout: LIVE_WITHIN_MS
      })
      .toBe(1)
    const moved = Date.now() - started
    console.info(`[board] the second context saw the creation after ${created} ms and the move after ${moved} ms`)
    // Not one read of the tasks by the second context: the changes came over its socket.
    expect(reads).toEqual([])
    expect(await other.locator(".live-text").textContent()).toBe("Live")
    expectNoPageProblems(page)
    expectNoPageProblems(other)
  })
})
