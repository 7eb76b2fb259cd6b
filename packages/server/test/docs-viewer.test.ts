/**
 * `/api/docs` in a real browser (Debian's Chromium, driven by playwright-core): the reference
 * renders from the server's own files, every request the page makes goes to the server's origin
 * (anything else is recorded, then refused, as on a host with no way out), and the browser
 * refuses nothing under the page's Content-Security-Policy.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startTestServer, type TestServer } from "@taskwright/testing"
import { type Browser, chromium } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ensureBuilt, killServer, startServer } from "./runs-server.js"

const CHROMIUM = process.env.TASKWRIGHT_CHROMIUM ?? "/usr/bin/chromium"

describe("the API reference at /api/docs", () => {
  let server: TestServer
  let browser: Browser

  beforeAll(async () => {
    server = await startTestServer({
      store: "sqlite",
      env: { TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "100000" }
    })
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync"
      ]
    })
  }, 120_000)
  afterAll(async () => {
    await browser?.close()
    await server?.close()
  })

  it("renders the reference from this origin only, with nothing refused", async () => {
    const origin = new URL(server.url).origin
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
    const requests: Array<string> = []
    const problems: Array<string> = []
    // Every request is recorded; one to another origin is refused, as a host with no way out would.
    await context.route("**/*", (route) => {
      const url = route.request().url()
      return url.startsWith(`${origin}/`) ? route.continue() : route.abort("internetdisconnected")
    })
    const page = await context.newPage()
    page.on("request", (request) => requests.push(request.url()))
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`))
    page.on("console", (message) => {
      const text = message.text()
      if (/Content Security Policy|Refused to/i.test(text)) problems.push(`CSP: ${text}`)
    })

    const response = await page.goto(`${server.url}/api/docs`, { waitUntil: "load" })
    expect(response?.status()).toBe(200)
    const csp = response?.headers()["content-security-policy"] ?? ""
    expect(csp).toContain("default-src 'none'")
    expect(csp).toContain("script-src 'self'")
    expect(csp).not.toMatch(/https?:|\*/)

    // The reference is drawn: the API's title and description, its first tag open, and the
    // operations of another once it is opened.
    await page.getByRole("heading", { name: "Taskwright" }).first().waitFor({ timeout: 60_000 })
    await page.getByText("Check liveness").first().waitFor()
    await page.getByText("Every error is").first().waitFor()
    await page.getByText("tasks", { exact: true }).first().click()
    await page.getByText("Create a task").first().waitFor()
    await page.getByText("List tasks").first().waitFor()
    expect(await page.title()).toContain("Taskwright")
    // Let anything the viewer loads late (fonts, workers, lazy chunks) be asked for.
    await page.waitForTimeout(1500)
    const dir = join(tmpdir(), "taskwright-docs-viewer")
    mkdirSync(dir, { recursive: true })
    await page.screenshot({ path: join(dir, "api-docs.png"), fullPage: false })

    const elsewhere = requests.filter((url) => !(url.startsWith(`${origin}/`) || /^(data|blob):/.test(url)))
    expect(elsewhere).toEqual([])
    expect(requests).toEqual(expect.arrayContaining([`${origin}/api/docs`, `${origin}/api/openapi.json`]))
    expect(requests.some((url) => /\/api\/docs\/scalar-[\w.-]+\.js$/.test(url))).toBe(true)
    expect(problems).toEqual([])
    await context.close()
  }, 180_000)

  it("works from the bundled CLI, which finds the viewer through its installed package", async () => {
    await ensureBuilt()
    const dataDir = mkdtempSync(join(tmpdir(), "tw-docs-cli-"))
    const cli = await startServer({
      dataDir,
      databaseUrl: undefined,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp" }
    })
    try {
      const page = await fetch(`${cli.url}/api/docs`).then((r) => r.text())
      const script = /src="(\/api\/docs\/scalar-[^"]+\.js)"/.exec(page)?.[1]
      expect(script, page).toBeDefined()
      const js = await fetch(`${cli.url}${script}`)
      expect(js.status).toBe(200)
      expect((await js.text()).length).toBeGreaterThan(100_000)
    } finally {
      await killServer(cli)
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 400_000)

  it("serves the viewer's script to be cached until the viewer changes", async () => {
    const page = await server.request("GET", "/api/docs")
    const script = /src="(\/api\/docs\/scalar-[^"]+\.js)"/.exec(page.text)?.[1]
    expect(script).toBeDefined()
    const js = await server.request("GET", script ?? "")
    expect(js.status).toBe(200)
    expect(js.headers.get("content-type")).toContain("javascript")
    expect(js.headers.get("cache-control")).toContain("immutable")
    expect(js.text.length).toBeGreaterThan(100_000)
  })
})
