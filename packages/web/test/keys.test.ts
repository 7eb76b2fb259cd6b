/**
 * API keys in Chromium: a key created in "API keys", its secret read once and used with fetch
 * against the API, rotated (the old secret refused, the new one accepted), revoked and refused.
 */
import { type TestServer, testStores } from "@taskwright/testing"
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  createPerson,
  expectAccessible,
  expectNoPageProblems,
  openSignedIn,
  type Person,
  screenshots,
  startServer
} from "./harness.js"

describe.each(testStores())("API keys (%s)", (store) => {
  let server: TestServer
  let browser: Browser
  let person: Person
  let page: Page

  /** Screenshots named once for SQLite, with the store's name for another. */
  const shots = (name: string) => screenshots(page, store === "sqlite" ? name : `${name}-${store}`)

  /** The API's answer to a request made with `key`, from outside the browser (no cookie). */
  const statusWith = async (key: string) =>
    (await fetch(`${server.url}/api/tasks`, { headers: { authorization: `Bearer ${key}` } })).status

  beforeAll(async () => {
    server = await startServer(store)
    person = await createPerson(server, "Kim Keys", false)
    ;({ browser, page } = await openSignedIn(server, person))
  })

  afterAll(async () => {
    await browser?.close()
    await server?.close()
  })

  let secret = ""

  it("creates a key and shows its secret once", async () => {
    await page.getByRole("link", { name: "API keys" }).click()
    await expect.poll(() => page.getByRole("heading", { name: "API keys", level: 1 }).count()).toBe(1)
    await expect.poll(() => page.getByText("You have no API keys.").count()).toBe(1)
    await shots("keys-empty")
    await expectAccessible(page, "API keys (empty)")

    await page.getByRole("button", { name: "New key" }).click()
    const form = page.getByRole("form", { name: "New key" })
    await expect.poll(() => form.count()).toBe(1)
    // An empty name: the API's message appears next to the field.
    await form.getByRole("button", { name: "Create key" }).click()
    await expect.poll(() => form.getByLabel("Name").getAttribute("aria-invalid")).toBe("true")
    await form.getByLabel("Name").fill("deploy script")
    for (const scope of ["tasks:read", "tasks:write"]) await form.getByRole("checkbox", { name: scope }).check()
    expect(await form.getByRole("checkbox", { name: "admin" }).count()).toBe(0)
    await form.getByLabel("Expires").selectOption({ label: "In 30 days" })
    await shots("keys-new")
    await expectAccessible(page, "New key form")
    await form.getByRole("button", { name: "Create key" }).click()

    const field = page.getByLabel("New key secret")
    await expect.poll(() => field.count()).toBe(1)
    secret = await field.inputValue()
    expect(secret).toMatch(/^twk_[0-9A-Za-z]{43,}$/)
    expect(await page.getByText("it will not be shown again", { exact: false }).count()).toBe(1)
    await page.getByRole("button", { name: "Copy" }).click()
    await expect.poll(() => page.getByRole("button", { name: "Copied" }).count()).toBe(1)
    await shots("keys-secret")
    await expectAccessible(page, "API keys with a new secret")

    // The listing shows its prefix and scopes, never the secret again.
    await page.getByRole("button", { name: "I have stored it" }).click()
    const item = page.locator(".key", { hasText: "deploy script" })
    await expect.poll(() => item.count()).toBe(1)
    const prefix = ((await item.locator(".prefix").textContent()) ?? "").replace("…", "")
    expect(secret.startsWith(prefix)).toBe(true)
    expect(await item.getByText("tasks:write").count()).toBe(1)
    await page.reload()
    await expect.poll(() => page.locator(".key", { hasText: "deploy script" }).count()).toBe(1)
    expect(await page.content()).not.toContain(secret)
  })

  it("uses the secret with fetch against the API, and charts the key's requests", async () => {
    expect(await statusWith(secret)).toBe(200)
    expect(await statusWith(secret)).toBe(200)
    // Usage is written in batches each second.
    await expect
      .poll(
        async () => {
          await page.reload()
          const chart = page.getByRole("img", { name: /Requests per day with deploy script/ })
          await chart.waitFor()
          return chart.getAttribute("aria-label")
        },
        { timeout: 10_000 }
      )
      .toMatch(/: 2 in all/)
    await shots("keys")
    await expectAccessible(page, "API keys")
  })

  it("rotates the key: the old secret stops working, the new one works", async () => {
    await page.getByRole("button", { name: "Rotate deploy script" }).click()
    const dialog = page.getByRole("dialog", { name: "Rotate deploy script?" })
    await expect.poll(() => dialog.count()).toBe(1)
    await dialog.getByRole("button", { name: "Rotate key" }).click()
    const field = page.getByLabel("New key secret")
    await expect.poll(async () => (await field.count()) === 1 && (await field.inputValue()) !== secret).toBe(true)
    const rotated = await field.inputValue()
    expect(await statusWith(secret)).toBe(401)
    expect(await statusWith(rotated)).toBe(200)
    secret = rotated
  })

  it("revokes the key after confirmation; the API refuses it", async () => {
    await page.getByRole("button", { name: "Revoke deploy script" }).click()
    const dialog = page.getByRole("dialog", { name: "Revoke deploy script?" })
    await expect.poll(() => dialog.count()).toBe(1)
    await shots("keys-revoke")
    await expectAccessible(page, "Revoke confirmation")
    // Cancelling keeps it.
    await dialog.getByRole("button", { name: "Cancel" }).click()
    expect(await statusWith(secret)).toBe(200)
    await page.getByRole("button", { name: "Revoke deploy script" }).click()
    await page
      .getByRole("dialog", { name: "Revoke deploy script?" })
      .getByRole("button", { name: "Revoke key" })
      .click()
    await expect.poll(() => page.getByText("Revoked keys (1)").count()).toBe(1)
    expect(await statusWith(secret)).toBe(401)
    const body = (await (
      await fetch(`${server.url}/api/tasks`, { headers: { authorization: `Bearer ${secret}` } })
    ).json()) as { error: { code: string } }
    expect(body.error.code).toBe("UNAUTHORIZED")
    expectNoPageProblems(page)
  })

  it("signs out", async () => {
    await page.getByRole("button", { name: "Sign out" }).click()
    await expect.poll(() => page.getByRole("button", { name: "Sign in" }).count()).toBe(1)
    const me = await page.evaluate(async () => (await fetch("/api/auth/me")).status)
    expect(me).toBe(401)
  })
})
