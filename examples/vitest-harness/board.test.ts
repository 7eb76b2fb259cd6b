// A host application's test suite on the Taskwright harness: an engine per test on an in-memory
// store, the API through inject() without a socket, the typed client over one, and a run of the
// scripted agent awaited to its end.
import { TaskwrightError } from "@taskwright/api"
import { createHarness, type Harness } from "@taskwright/testing"
import { afterEach, beforeEach, describe, expect, it } from "vitest"

describe("my application's board", () => {
  let h: Harness
  beforeEach(async () => {
    // Agent runs are sandboxed with bubblewrap, as in production; sandbox: "off" where it is missing.
    h = await createHarness({ sandbox: process.env.TASKWRIGHT_SANDBOX === "off" ? "off" : "auto" })
  })
  afterEach(() => h.close())

  it("starts each test on an empty store", async () => {
    expect((await h.as.tasks.list()).total).toBe(0)
    await h.as.tasks.create({ title: "Only in this test" })
    expect((await h.as.tasks.list()).total).toBe(1)
  })

  it("serves the API without a socket", async () => {
    const response = await h.inject("/api/tasks", {
      method: "POST",
      headers: { authorization: `Bearer ${h.user.key}`, "content-type": "application/json" },
      body: JSON.stringify({ title: "Injected", priority: "bogus" })
    })
    expect(response.status).toBe(400)
    expect(await response.json()).toMatchObject({ error: { code: "BAD_REQUEST" } })
  })

  it("answers the typed client over a socket", async () => {
    const task = await h.client.tasks.create({ title: "Over HTTP" })
    await expect(h.clientFor(undefined).tasks.get(task.id)).rejects.toBeInstanceOf(TaskwrightError)
    expect((await h.client.tasks.get(task.id)).title).toBe("Over HTTP")
  })

  it("runs the scripted agent on a task", async () => {
    const run = await h.run({ script: [{ write: "CHANGELOG.md", content: "- a change\n" }, { stdout: "done" }] })
    expect(run.status).toBe("completed")
    expect(run.output.files_modified).toEqual(["CHANGELOG.md"])
    expect((await h.logs(run.id)).map((entry) => entry.message)).toContain("done")
  })
})
