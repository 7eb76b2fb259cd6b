/**
 * The examples in examples/ keep working: compiled as a user compiles them (strict, every
 * library's declarations checked, the packages' built types) and run against the built packages.
 */
import { execFile } from "node:child_process"
import { join } from "node:path"
import { promisify } from "node:util"
import { startTestServer, type TestServer } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const exec = promisify(execFile)
const root = join(__dirname, "..", "..", "..")
const examples = join(root, "examples")
/** A clean environment: nothing of this vitest run leaks into the examples. */
const env = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp" }

const run = (example: string, args: ReadonlyArray<string> = [], extra: Record<string, string> = {}) =>
  exec(process.execPath, [join(examples, "dist", example, "index.js"), ...args], {
    cwd: root,
    env: { ...env, ...extra },
    timeout: 60_000
  })

describe("examples/", () => {
  beforeAll(async () => {
    await exec(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", examples], {
      cwd: root,
      timeout: 180_000
    })
  }, 200_000)

  it("embedded-node: a plain Node host creates, lists and is refused, then exits", async () => {
    const { stdout } = await run("embedded-node")
    expect(stdout).toContain("created 1 Try Taskwright embedded backlog")
    expect(stdout).toContain("refused 400 BAD_REQUEST")
    expect(stdout).toContain("bob reading ada's task FORBIDDEN")
    expect(stdout).toContain("closed")
  })

  it("http-host: the API under /tasks-api beside the host's own routes", async () => {
    const { stdout } = await run("http-host", ["--smoke"])
    expect(stdout).toContain("own route 200 The host application's own home page")
    expect(stdout).toContain("api without a key 401")
    expect(stdout).toContain("api with a key Mounted beside my routes 1")
    expect(stdout).toContain("openapi 200")
  })

  it("effect-host: the Effect face mounted into the host's @effect/platform server", async () => {
    const { stdout } = await run("effect-host", ["--smoke"])
    expect(stdout).toContain("own route 200 The Effect host's own home page")
    expect(stdout).toContain("api without a key 401")
    expect(stdout).toMatch(/api with a key 201 .*"title":"From an Effect host"/)
    expect(stdout).toMatch(/bad input 400 .*"code":"BAD_REQUEST"/)
  })

  describe("client-script against a running server", () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startTestServer()
    })
    afterAll(() => server.close())

    it("creates, updates, lists and deletes with the typed client, failures as TaskwrightError", async () => {
      const { stdout } = await run("client-script", [], {
        TASKWRIGHT_URL: server.url,
        TASKWRIGHT_API_KEY: server.adminKey
      })
      expect(stdout).toContain("signed in as admin@localhost")
      expect(stdout).toContain("updated todo urgent")
      expect(stdout).toContain("failed as expected 404 NOT_FOUND")
      expect(stdout).toContain("failed as expected 400 BAD_REQUEST")
      expect(stdout).toContain("deleted true")
    })
  })

  it("vitest-harness: a host's vitest suite on the harness passes", async () => {
    const { stdout } = await exec(
      process.execPath,
      [join(root, "node_modules", "vitest", "vitest.mjs"), "run", "--root", join(examples, "vitest-harness")],
      { cwd: root, env, timeout: 120_000 }
    )
    expect(stdout).toMatch(/Tests\s+4 passed/)
  }, 130_000)
})
