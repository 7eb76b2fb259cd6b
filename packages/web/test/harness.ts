/**
 * What the browser suites share: Debian's Chromium driven by playwright-core, a real server
 * with the built app, users who can sign in, a git repository for runs, the scripted agent,
 * screenshots at phone and desktop widths, axe-core scans, and a probe of the events socket.
 */
import { execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { mkdtemp } from "node:fs/promises"
import { createServer, request } from "node:http"
import { createRequire } from "node:module"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { Users } from "@taskwright/core"
import {
  type Script,
  type ServerProcess,
  scriptedAgentPath,
  startServerProcess,
  startTestServer,
  type TestServer,
  type TestStore
} from "@taskwright/testing"
import type { AxeResults } from "axe-core"
import { Effect } from "effect"
import { type Browser, type BrowserContext, chromium, type Locator, type Page } from "playwright-core"
import { expect } from "vitest"

export const CHROMIUM = process.env.TASKWRIGHT_CHROMIUM ?? "/usr/bin/chromium"

/** Where screenshots go (git-ignored). */
export const ARTIFACTS = fileURLToPath(new URL("../test-artifacts/", import.meta.url))

export const PHONE = { width: 390, height: 844 }
export const DESKTOP = { width: 1280, height: 860 }

/** Settings of every test server: runs without a sandbox, budgets that a test's bursts fit in. */
export const SERVER_ENV: Record<string, string> = {
  TASKWRIGHT_SANDBOX: "off",
  TASKWRIGHT_RATE_LIMIT: "100000",
  TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "1000",
  TASKWRIGHT_LOGIN_ATTEMPTS: "1000"
}

/**
 * Headless Chromium. Playwright gives each launch a fresh temporary profile (its own
 * `--user-data-dir`); the other flags keep Chromium off the network it cannot reach here.
 */
export const launchBrowser = (): Promise<Browser> =>
  chromium.launch({
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

export const startServer = (store: TestStore = "sqlite"): Promise<TestServer> =>
  startTestServer({ store, env: SERVER_ENV })

/**
 * `taskwright serve` in its own process, as a user runs it: for measurements, which a server in
 * the test runner's process would share an event loop and a core with the runner and the driver.
 */
export const startProcessServer = (): Promise<ServerProcess> => startServerProcess({ env: SERVER_ENV })

export interface Person {
  readonly email: string
  readonly password: string
  readonly name: string
}

const newPerson = (name: string): Person => ({
  email: `${name.toLowerCase().replace(/[^a-z]+/g, ".")}.${randomBytes(3).toString("hex")}@example.test`,
  password: `pw-${randomBytes(9).toString("base64url")}`,
  name
})

/** A user who signs in with a password (`admin` gives every scope, the Agents screen too). */
export const createPerson = async (server: TestServer, name: string, admin = true): Promise<Person> => {
  const person = newPerson(name)
  const { email, password } = person
  await server.server.run(Effect.flatMap(Users, (users) => users.create({ email, name, password, admin })))
  return person
}

/** A user who signs in with a password, made with `taskwright users create` on the process's store. */
export const createPersonWithCli = async (server: ServerProcess, name: string, admin = true): Promise<Person> => {
  const person = newPerson(name)
  const { email, password } = person
  const flags = admin ? ["--admin"] : []
  const r = await server.cli(["users", "create", "--email", email, "--name", name, "--password", password, ...flags])
  expect(r.code, r.stderr).toBe(0)
  return person
}

/** A context whose pages record CSP violations and page errors, which every suite refuses. */
export const newContext = async (
  browser: Browser,
  options: { readonly storageState?: Awaited<ReturnType<BrowserContext["storageState"]>> } = {}
): Promise<BrowserContext> => {
  const context = await browser.newContext({ viewport: DESKTOP, ...options })
  context.on("page", watchPage)
  return context
}

const problems = new WeakMap<Page, Array<string>>()

const watchPage = (page: Page) => {
  const seen: Array<string> = []
  problems.set(page, seen)
  page.on("pageerror", (error) => seen.push(`page error: ${error.message}`))
  page.on("console", (message) => {
    const text = message.text()
    if (/Content Security Policy|Refused to/i.test(text)) seen.push(`CSP: ${text}`)
  })
}

/** Fails if the page threw or the browser refused anything under the Content-Security-Policy. */
export const expectNoPageProblems = (page: Page) => {
  expect(problems.get(page) ?? []).toEqual([])
}

export const signIn = async (page: Page, server: Pick<TestServer, "url">, person: Person) => {
  await page.goto(`${server.url}/`)
  await page.getByLabel("Email").fill(person.email)
  await page.getByLabel("Password").fill(person.password)
  await page.getByRole("button", { name: "Sign in" }).click()
  await page.getByRole("button", { name: "Sign out" }).waitFor()
}

/** Chromium with one page, signed in as `person`. */
export const openSignedIn = async (
  server: Pick<TestServer, "url">,
  person: Person
): Promise<{ readonly browser: Browser; readonly page: Page }> => {
  const browser = await launchBrowser()
  const page = await (await newContext(browser)).newPage()
  await signIn(page, server, person)
  return { browser, page }
}

const nextFrame = (page: Page) =>
  page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))))

/**
 * Screenshots (full page) at phone and desktop widths in the light theme, and at desktop width in
 * the dark one: `<name>-390.png`, `<name>-1280.png`, `<name>-1280-dark.png`.
 */
export const screenshots = async (page: Page, name: string) => {
  mkdirSync(ARTIFACTS, { recursive: true })
  const before = page.viewportSize() ?? DESKTOP
  for (const [size, scheme] of [
    [PHONE, "light"],
    [DESKTOP, "light"],
    [DESKTOP, "dark"]
  ] as const) {
    await page.emulateMedia({ colorScheme: scheme })
    await page.setViewportSize(size)
    // From the top, as the page is first seen: a sticky element (the notices under the header)
    // is drawn where the scroll position puts it, and a full-page picture keeps that position.
    await page.evaluate(() => window.scrollTo(0, 0))
    await nextFrame(page)
    const file = `${name}-${size.width}${scheme === "dark" ? "-dark" : ""}.png`
    await page.screenshot({ path: join(ARTIFACTS, file), fullPage: true })
  }
  await page.emulateMedia({ colorScheme: "light" })
  await page.setViewportSize(before)
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8")

interface Violation {
  readonly id: string
  readonly impact: string | null | undefined
  readonly help: string
  readonly nodes: ReadonlyArray<string>
}

/**
 * An axe-core scan of the page as it is now, at phone and desktop widths and in both themes: no
 * serious or critical violation.
 */
export const expectAccessible = async (page: Page, screen: string) => {
  const before = page.viewportSize() ?? DESKTOP
  for (const [size, scheme] of [
    [PHONE, "light"],
    [DESKTOP, "light"],
    [DESKTOP, "dark"]
  ] as const) {
    await page.emulateMedia({ colorScheme: scheme })
    await page.setViewportSize(size)
    await nextFrame(page)
    // Evaluated by the driver, not by the page: the page's policy forbids inline script.
    await page.evaluate(axeSource)
    const violations = await page.evaluate(async (): Promise<Array<Violation>> => {
      const axe = (window as unknown as { axe: { run(context: Document): Promise<AxeResults> } }).axe
      const result = await axe.run(document)
      return result.violations.map((v) => ({
        id: v.id,
        impact: v.impact,
        help: v.help,
        nodes: v.nodes.map((n) => n.target.join(" ")).slice(0, 5)
      }))
    })
    const blocking = violations.filter((v) => v.impact === "serious" || v.impact === "critical")
    expect(blocking, `${screen} at ${size.width}px, ${scheme}: ${JSON.stringify(blocking, null, 2)}`).toEqual([])
  }
  await page.emulateMedia({ colorScheme: "light" })
  await page.setViewportSize(before)
}

/** A git repository with one commit, for a project whose tasks agents run on. */
export const makeRepository = async (): Promise<string> => {
  const dir = await mkdtemp(join(tmpdir(), "tw-web-repo-"))
  const git = (...args: ReadonlyArray<string>) =>
    execFileSync("git", ["-c", "user.name=Web Test", "-c", "user.email=web@example.test", ...args], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", LC_ALL: "C" }
    })
  git("init", "-q", "-b", "main")
  mkdirSync(join(dir, "src"), { recursive: true })
  writeFileSync(join(dir, "README.md"), "# Demo\n")
  writeFileSync(join(dir, "src", "index.ts"), "export const answer = 42\n")
  git("add", "-A")
  git("commit", "-q", "-m", "first")
  return dir
}

/** Configures the `command` agent (admin key) to run the scripted agent with `script`. */
export const useScriptedAgent = async (server: TestServer, script: Script) => {
  const r = await server.request("PUT", "/api/agents/command", {
    key: server.adminKey,
    body: {
      enabled: true,
      command: [process.execPath, scriptedAgentPath],
      env: { TASKWRIGHT_SCRIPT: JSON.stringify(script) }
    }
  })
  expect(r.status, r.text).toBe(200)
}

/**
 * Whether the server answers `GET /api/events` with a WebSocket handshake (101). A server
 * without the endpoint answers the upgrade request like any unknown path: 404.
 */
export const eventsSocketAvailable = (url: string, key: string): Promise<boolean> =>
  new Promise((resolve) => {
    const req = request(`${url}/api/events`, {
      headers: {
        connection: "Upgrade",
        upgrade: "websocket",
        "sec-websocket-version": "13",
        "sec-websocket-key": randomBytes(16).toString("base64"),
        authorization: `Bearer ${key}`
      }
    })
    req.on("upgrade", (_res, socket) => {
      socket.destroy()
      resolve(true)
    })
    req.on("response", (res) => {
      res.resume()
      resolve(false)
    })
    req.on("error", () => resolve(false))
    req.setTimeout(5000, () => {
      req.destroy()
      resolve(false)
    })
    req.end()
  })

/** A reverse proxy in front of a server, as the board reaches it through one. */
export interface TestProxy {
  readonly url: string
  /** WebSocket upgrades asked of it (each refused). */
  readonly upgrades: () => number
  close(): Promise<void>
}

/**
 * A reverse proxy that passes every HTTP request through to `target` (the `Host` header as sent,
 * so the API's same-origin checks see the proxy's origin) but refuses WebSocket upgrades with a
 * 404, as a proxy not set up for WebSockets does: the board's events socket cannot open through it.
 */
export const proxyWithoutWebSockets = async (target: string): Promise<TestProxy> => {
  const to = new URL(target)
  let upgrades = 0
  const proxy = createServer((req, res) => {
    const forward = request(
      { host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.rawHeaders)
        answer.pipe(res)
      }
    )
    forward.on("error", () => {
      if (!res.headersSent) res.writeHead(502)
      res.end()
    })
    req.pipe(forward)
  })
  proxy.on("upgrade", (_req, socket) => {
    upgrades++
    socket.end("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
  })
  await new Promise<void>((done) => proxy.listen(0, "127.0.0.1", done))
  const { port } = proxy.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    upgrades: () => upgrades,
    close: () =>
      new Promise((done) => {
        proxy.closeAllConnections()
        proxy.close(() => done())
      })
  }
}

/**
 * Presses Tab (Shift+Tab with `back`) until `target` has the focus, as a keyboard user would
 * reach it; fails after `max` presses, so an unreachable control fails the test.
 */
export const tabTo = async (page: Page, target: Locator, { max = 80, back = false } = {}) => {
  await target.waitFor()
  for (let i = 0; i < max; i++) {
    if (await target.evaluate((el) => el === document.activeElement)) return
    await page.keyboard.press(back ? "Shift+Tab" : "Tab")
  }
  const focused = await page.evaluate(() => document.activeElement?.outerHTML.slice(0, 200) ?? "nothing")
  throw new Error(`${String(target)} was not reached with ${max} presses of Tab; the focus is on ${focused}`)
}

/** The package's root, for building the app when a test runs without `npm run build` first. */
export const WEB_ROOT = dirname(fileURLToPath(new URL("../package.json", import.meta.url)))
