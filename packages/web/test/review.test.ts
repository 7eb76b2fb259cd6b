/**
 * Task detail in Chromium, past approval: "Request changes" with a comment (the API's message
 * beside the Comment field when it refuses one; a follow-up run whose prompt carries it),
 * "Reject" (back to the backlog), and a "Run log" that follows the end of a long run, stops
 * following when the reader scrolls up, and follows again when asked, at any width.
 */
import { type Script, scriptedAgentPath, type TestServer } from "@taskwright/testing"
import type { Browser, Locator, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  createPerson,
  DESKTOP,
  expectAccessible,
  expectNoPageProblems,
  makeRepository,
  openSignedIn,
  type Person,
  PHONE,
  screenshots,
  startServer,
  useScriptedAgent
} from "./harness.js"

/** Each run writes a file (so there is work to review) and says what it was asked. */
const SCRIPT: Script = [{ echo_prompt: true }, { append: "NOTES.md", content: "a line\n" }, { stdout: "agent: done" }]
const LONG_LINES = 160

describe("reviews and the run log", () => {
  let server: TestServer
  let browser: Browser
  let person: Person
  let page: Page
  let projectId = ""

  const status = () => page.getByLabel("Status", { exact: true })
  const review = () => page.getByRole("region", { name: "Review" })

  const taskStatus = async (id: number) =>
    (await server.request<{ status: string }>("GET", `/api/tasks/${id}`, { key: server.adminKey })).body.status

  /** A task of the project, opened in the page, with a finished run of `agent` waiting in review. */
  const openTask = async (title: string): Promise<number> => {
    const r = await server.request<{ id: number }>("POST", "/api/tasks", {
      key: server.adminKey,
      body: { title, project_id: projectId }
    })
    expect(r.status, r.text).toBe(201)
    await page.goto(`${server.url}/tasks/${r.body.id}`)
    await expect.poll(() => page.getByRole("heading", { name: title, level: 1 }).count()).toBe(1)
    return r.body.id
  }

  const startRun = async (agent: string) => {
    await page.getByLabel("Agent").selectOption(agent)
    await page.getByRole("button", { name: "Start run" }).click()
  }

  beforeAll(async () => {
    server = await startServer()
    person = await createPerson(server, "Rae Review")
    await useScriptedAgent(server, SCRIPT)
    const long = await server.request("PUT", "/api/agents/long", {
      key: server.adminKey,
      body: {
        enabled: true,
        command: [process.execPath, scriptedAgentPath],
        env: {
          TASKWRIGHT_SCRIPT: JSON.stringify(
            Array.from({ length: LONG_LINES }, (_, i) => [
              { sleep_ms: 60 },
              { stdout: `line ${i + 1} of ${LONG_LINES}: ${"words ".repeat(12)}` }
            ]).flat()
          )
        }
      }
    })
    expect(long.status, long.text).toBe(200)
    const project = await server.request<{ id: string }>("POST", "/api/projects", {
      key: server.adminKey,
      body: { name: "Reviewed", path: await makeRepository() }
    })
    expect(project.status, project.text).toBe(201)
    projectId = project.body.id
    ;({ browser, page } = await openSignedIn(server, person))
  })

  afterAll(async () => {
    await browser?.close()
    await server?.close()
  })

  it("requests changes with a comment: the API's message beside the field, then a follow-up run", async () => {
    const id = await openTask("Write the upgrade guide")
    await startRun("command")
    await expect.poll(() => status().inputValue(), { timeout: 30_000 }).toBe("in_review")
    await expect.poll(() => review().count()).toBe(1)

    // Too long a comment: the API refuses it, and says so beside the Comment field.
    const comment = review().getByLabel("Comment")
    await comment.fill("x".repeat(20_001))
    await review().getByRole("button", { name: "Request changes" }).click()
    await expect.poll(() => comment.getAttribute("aria-invalid")).toBe("true")
    const described = ((await comment.getAttribute("aria-describedby")) ?? "").split(" ")
    const message = await page.locator(`[id="${described.at(-1)}"]`).textContent()
    expect(message).toMatch(/comment must be at most 20,000 characters/)
    expect(await review().locator(".form-error").count()).toBe(0)
    await expect.poll(() => comment.evaluate((el) => el === document.activeElement)).toBe(true)
    expect(await taskStatus(id)).toBe("in_review")
    await screenshots(page, "task-review-error")
    await expectAccessible(page, "Review with a field error")

    await comment.fill("Add a section on upgrading from 1.x.")
    await review().getByRole("button", { name: "Request changes" }).click()
    await expect.poll(() => page.getByText("Changes requested: a follow-up run started.").count()).toBe(1)
    // The follow-up run is the one shown; its prompt carries the comment.
    await expect.poll(() => page.locator(".runs .run").count()).toBe(2)
    const log = page.getByRole("region", { name: "Run log" })
    await expect
      .poll(() => log.getByText("Add a section on upgrading from 1.x.", { exact: false }).count(), { timeout: 30_000 })
      .toBeGreaterThan(0)
    await expect.poll(() => status().inputValue(), { timeout: 30_000 }).toBe("in_review")
    const reviews = await server.query<{ action: string; comment: string | null }>(
      "SELECT action, comment FROM reviews WHERE task_id = ? ORDER BY created_at",
      [id]
    )
    expect(reviews).toEqual([{ action: "request_changes", comment: "Add a section on upgrading from 1.x." }])
    const runs = await server.query<{ n: number }>("SELECT COUNT(*) AS n FROM runs WHERE task_id = ?", [id])
    expect(Number(runs[0]?.n)).toBe(2)
  })

  it("rejects the work: the task goes back to the backlog", async () => {
    const id = Number(new URL(page.url()).pathname.split("/").at(-1))
    await review().getByRole("button", { name: "Reject" }).click()
    await expect.poll(() => page.getByText("Rejected: the task is back in the backlog.").count()).toBe(1)
    await expect.poll(() => status().inputValue()).toBe("backlog")
    expect(await review().count()).toBe(0)
    // The keyboard's focus goes to the status the review set, not to the page's start.
    await expect.poll(() => status().evaluate((el) => el === document.activeElement)).toBe(true)
    expect(await taskStatus(id)).toBe("backlog")
    const reviews = await server.query<{ action: string }>(
      "SELECT action FROM reviews WHERE task_id = ? ORDER BY created_at",
      [id]
    )
    expect(reviews.map((r) => r.action)).toEqual(["request_changes", "reject"])
    await page.getByRole("link", { name: "Board" }).first().click()
    await expect
      .poll(() =>
        page
          .getByRole("region", { name: "Backlog", exact: true })
          .locator(".card", { hasText: "Write the upgrade guide" })
          .count()
      )
      .toBe(1)
    expectNoPageProblems(page)
  })

  it("follows the end of a long run's log, stops when scrolled up, and follows again when asked", async () => {
    await openTask("Produce a long log")
    await startRun("long")
    const log = page.getByRole("log")
    const lines = log.locator(".log-line")
    const follow = page.getByRole("checkbox", { name: "Follow the end" })
    await expect.poll(() => lines.count(), { timeout: 30_000 }).toBeGreaterThan(30)

    // While lines arrive, the end is in view.
    for (let i = 0; i < 3; i++) {
      const seen = await lines.count()
      await expect.poll(() => lines.count()).toBeGreaterThan(seen)
      await expect.poll(() => atEnd(log)).toBe(true)
      expect(await lastLineVisible(log)).toBe(true)
    }
    expect(await follow.isChecked()).toBe(true)

    // The reader scrolls up: following stops, and new lines leave the view where it is.
    await log.hover()
    // The wheel scrolls smoothly: on a loaded machine the animation takes longer than a second.
    await page.mouse.wheel(0, -100_000)
    await expect.poll(() => follow.isChecked(), { timeout: 10_000 }).toBe(false)
    // Where the wheel leaves the view: near the top (a loaded machine's Chromium may end the
    // animation a few lines short of it), and there it stays while lines arrive.
    const rest = await restingScrollTop(log)
    expect(rest).toBeLessThan(await log.evaluate((el) => el.scrollHeight / 4))
    const seen = await lines.count()
    await expect.poll(() => lines.count(), { timeout: 10_000 }).toBeGreaterThan(seen + 5)
    expect(await log.evaluate((el) => el.scrollTop)).toBe(rest)
    expect(await atEnd(log)).toBe(false)

    // "Follow the end" again: back at the end, and kept there to the run's last line.
    await follow.check()
    await expect.poll(() => atEnd(log)).toBe(true)
    await expect
      .poll(() => log.getByText(`line ${LONG_LINES} of ${LONG_LINES}`, { exact: false }).count(), { timeout: 30_000 })
      .toBe(1)
    await expect.poll(() => page.locator(".badge", { hasText: "Completed" }).count(), { timeout: 30_000 }).toBe(1)
    await expect.poll(() => atEnd(log)).toBe(true)
    expect(await lastLineVisible(log)).toBe(true)

    // The lines rewrap at a phone's width (no line arriving any more): the end stays in view.
    await page.setViewportSize(PHONE)
    await expect.poll(() => atEnd(log)).toBe(true)
    expect(await lastLineVisible(log)).toBe(true)
    await page.setViewportSize(DESKTOP)
    await expect.poll(() => atEnd(log)).toBe(true)
    await screenshots(page, "task-long-log")
    expectNoPageProblems(page)
  })
})

/** The log box's scroll position once it has stopped moving (the same over a quarter of a second). */
const restingScrollTop = async (log: Locator): Promise<number> => {
  const deadline = Date.now() + 10_000
  let last = await log.evaluate((el) => el.scrollTop)
  for (;;) {
    await new Promise((done) => setTimeout(done, 250))
    const now = await log.evaluate((el) => el.scrollTop)
    if (now === last || Date.now() > deadline) return now
    last = now
  }
}

/** The log box is scrolled to its end. */
const atEnd = (log: Locator) => log.evaluate((el) => el.scrollTop + el.clientHeight >= el.scrollHeight - 8)

/** The last line drawn in the log box lies inside the box's visible area. */
const lastLineVisible = (log: Locator) =>
  log.evaluate((el) => {
    const last = el.querySelectorAll(".log-line")
    const line = last[last.length - 1]
    if (line === undefined) return false
    const box = el.getBoundingClientRect()
    const r = line.getBoundingClientRect()
    return r.top >= box.top - 1 && r.bottom <= box.bottom + 1
  })
