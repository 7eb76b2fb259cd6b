/** The examples in examples/ keep working: each is run as a user would, against the built packages. */
import { execFile } from "node:child_process"
import { join } from "node:path"
import { promisify } from "node:util"
import { expect, it } from "vitest"

const run = promisify(execFile)
const root = join(__dirname, "..", "..", "..")

it("examples/embedded-server creates and lists a task", async () => {
  const { stdout } = await run("node", [join(root, "examples", "embedded-server", "index.mjs")], { timeout: 30_000 })
  expect(stdout).toContain("Try Taskwright embedded")
  expect(stdout).toMatch(/listed[\s\S]*total: 1/)
})
