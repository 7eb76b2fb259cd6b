/**
 * The main actions with the keyboard alone, in Chromium: every step below is a key press (Tab,
 * Shift+Tab, Enter, Space, arrows, Escape, typing), never a click. Sign in, create a project, open
 * "New task" and create one, open its card, change its Status, start a run, approve it, create
 * an API key, revoke it after confirming, and sign out.
 */
import type { TestServer } from "@taskwright/testing"
import type { Browser, Locator, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  createPerson,
  expectNoPageProblems,
  launchBrowser,
  makeRepository,
  newContext,
  type Person,
  startServer,
  tabTo,
  useScriptedAgent
} from "./harness.js"

const focused = (target: Locator) => target.evaluate((el) => el === document.activeElement)

/** Arrow keys on a focused select until it shows `value` (arrows change a closed select at once). */
const chooseWithArrows = async (page: Page, select: Locator, value: string) => {
  for (let i = 0; i < 10 && (await select.inputValue()) !== value; i++) await page.keyboard.press("ArrowDown")
  expect(await select.inputValue()).toBe(value)
}

describe("the keyboard alone", () => {
  let server: TestServer
  let browser: Browser
  let person: Person
  let page: Page
  let repo: string
  const title = "Typed, never clicked"
  let taskId = 0
  let secret = ""

  beforeAll(async () => {
    server = await startServer()
    person = await createPerson(server, "Kai Keys")
    repo = await makeRepository()
    await useScriptedAgent(server, [{ stdout: "working" }, { write: "DONE.md", content: "done\n" }])
    browser = await launchBrowser()
    page = await (await newContext(browser)).newPage()
  })

  afterAll(async () => {
    await browser?.close()
    await server?.close()
  })

  const press = (key: string) => page.keyboard.press(key)

  it("signs in", async () => {
    await page.goto(`${server.url}/`)
    await tabTo(page, page.getByLabel("Email"))
    await page.keyboard.type(person.email)
    await press("Tab")
    expect(await focused(page.getByLabel("Password"))).toBe(true)
    await page.keyboard.type(person.password)
    await press("Enter")
    await page.getByRole("button", { name: "Sign out" }).waitFor()
  })

  it("creates a project", async () => {
    await tabTo(page, page.getByRole("link", { name: "Projects" }))
    await press("Enter")
    await expect.poll(() => page.getByRole("heading", { name: "Projects", level: 1 }).count()).toBe(1)
    await tabTo(page, page.getByLabel("Name"))
    await page.keyboard.type("Keyboard")
    await tabTo(page, page.getByLabel("Path", { exact: true }))
    await page.keyboard.type(repo)
    await press("Enter")
    await expect.poll(() => page.locator(".list-item", { hasText: "Keyboard" }).count()).toBe(1)
  })

  it("opens New task, closes it with Escape, opens it again and creates a task", async () => {
    await tabTo(page, page.getByRole("link", { name: "Board" }).first(), { back: true })
    await press("Enter")
    const newTask = page.getByRole("button", { name: "New task" })
    await tabTo(page, newTask)
    await press("Enter")
    const dialog = page.getByRole("dialog", { name: "New task" })
    await dialog.waitFor()
    // The dialog's first field has the focus; Escape closes it and gives the focus back.
    await expect.poll(() => focused(dialog.getByLabel("Title"))).toBe(true)
    await press("Escape")
    await expect.poll(() => dialog.count()).toBe(0)
    expect(await focused(newTask)).toBe(true)

    await press("Enter")
    await expect.poll(() => focused(dialog.getByLabel("Title"))).toBe(true)
    await page.keyboard.type(title)
    await tabTo(page, dialog.getByLabel("Description"))
    await page.keyboard.type("Made with the keyboard.")
    await tabTo(page, dialog.getByLabel("Priority"))
    await chooseWithArrows(page, dialog.getByLabel("Priority"), "high")
    await tabTo(page, dialog.getByLabel("Project"))
    await chooseWithArrows(page, dialog.getByLabel("Project"), (await projectId()) ?? "")
    await tabTo(page, dialog.getByRole("button", { name: "Create task" }))
    await press("Enter")
    await expect.poll(() => dialog.count()).toBe(0)
    await expect.poll(() => page.locator(".card", { hasText: title }).count()).toBe(1)
    expect(await focused(newTask)).toBe(true)
  })

  it("opens the card and changes its Status", async () => {
    const card = page.locator(".card", { hasText: title })
    // From the card's menu first: Enter opens it with its Status select focused; Escape closes it.
    await tabTo(page, card.getByRole("button", { name: `Actions for ${title}` }))
    await press("Enter")
    await expect.poll(() => focused(card.getByLabel("Status"))).toBe(true)
    await press("Escape")
    await expect.poll(() => card.getByLabel("Status").count()).toBe(0)
    expect(await focused(card.getByRole("button", { name: `Actions for ${title}` }))).toBe(true)

    await tabTo(page, card.getByRole("link", { name: title }), { back: true })
    await press("Enter")
    const heading = page.getByRole("heading", { name: title, level: 1 })
    await expect.poll(() => heading.count()).toBe(1)
    await expect.poll(() => focused(heading)).toBe(true)
    taskId = Number(new URL(page.url()).pathname.split("/").at(-1))

    const status = page.getByLabel("Status", { exact: true })
    await tabTo(page, status)
    await chooseWithArrows(page, status, "todo")
    await expect.poll(() => taskStatus()).toBe("todo")
  })

  it("starts a run and approves its work", async () => {
    const agent = page.getByLabel("Agent")
    await tabTo(page, agent)
    await chooseWithArrows(page, agent, "command")
    await tabTo(page, page.getByRole("button", { name: "Start run" }))
    await press("Enter")
    const status = page.getByLabel("Status", { exact: true })
    await expect.poll(() => status.inputValue(), { timeout: 30_000 }).toBe("in_review")

    const approve = page.getByRole("region", { name: "Review" }).getByRole("button", { name: "Approve" })
    await tabTo(page, approve, { back: true })
    await press("Enter")
    await expect.poll(() => taskStatus()).toBe("done")
    await expect.poll(() => focused(status)).toBe(true)
  })

  it("creates an API key and reads its secret", async () => {
    await tabTo(page, page.getByRole("link", { name: "API keys" }), { back: true })
    await press("Enter")
    await expect.poll(() => page.getByRole("heading", { name: "API keys", level: 1 }).count()).toBe(1)
    await tabTo(page, page.getByRole("button", { name: "New key" }))
    await press("Enter")
    const form = page.getByRole("form", { name: "New key" })
    await expect.poll(() => focused(form.getByLabel("Name"))).toBe(true)
    await page.keyboard.type("keyboard key")
    const write = form.getByRole("checkbox", { name: "tasks:write" })
    await tabTo(page, write)
    await press("Space")
    expect(await write.isChecked()).toBe(true)
    await tabTo(page, form.getByRole("button", { name: "Create key" }))
    await press("Enter")
    const field = page.getByLabel("New key secret")
    await expect.poll(() => field.count()).toBe(1)
    await expect.poll(() => focused(field)).toBe(true)
    secret = await field.inputValue()
    expect(await statusWith(secret)).toBe(200)
    await tabTo(page, page.getByRole("button", { name: "I have stored it" }))
    await press("Enter")
    await expect.poll(() => focused(page.getByRole("button", { name: "New key" }))).toBe(true)
  })

  it("revokes the key after confirming", async () => {
    const revoke = page.getByRole("button", { name: "Revoke keyboard key" })
    await tabTo(page, revoke)
    await press("Enter")
    const dialog = page.getByRole("dialog", { name: "Revoke keyboard key?" })
    await dialog.waitFor()
    // The safe choice has the focus: Enter now would cancel.
    await expect.poll(() => focused(dialog.getByRole("button", { name: "Cancel" }))).toBe(true)
    await press("Escape")
    await expect.poll(() => dialog.count()).toBe(0)
    expect(await focused(revoke)).toBe(true)
    expect(await statusWith(secret)).toBe(200)

    await press("Enter")
    await dialog.waitFor()
    await tabTo(page, dialog.getByRole("button", { name: "Revoke key" }), { back: true })
    await press("Enter")
    await expect.poll(() => page.getByText("Revoked keys (1)").count()).toBe(1)
    expect(await statusWith(secret)).toBe(401)
    // The key's row is gone with its button: the focus goes to "New key", not to the page's start.
    await expect.poll(() => focused(page.getByRole("button", { name: "New key" }))).toBe(true)
  })

  it("signs out", async () => {
    await tabTo(page, page.getByRole("button", { name: "Sign out" }), { back: true })
    await press("Enter")
    await expect.poll(() => page.getByRole("button", { name: "Sign in" }).count()).toBe(1)
    expectNoPageProblems(page)
  })

  const projectId = async () =>
    (
      await server.request<{ projects: Array<{ id: string; name: string }> }>("GET", "/api/projects", {
        key: server.adminKey
      })
    ).body.projects.find((p) => p.name === "Keyboard")?.id

  const taskStatus = async () =>
    (await server.request<{ status: string }>("GET", `/api/tasks/${taskId}`, { key: server.adminKey })).body.status

  const statusWith = async (key: string) =>
    (await fetch(`${server.url}/api/tasks`, { headers: { authorization: `Bearer ${key}` } })).status
})
