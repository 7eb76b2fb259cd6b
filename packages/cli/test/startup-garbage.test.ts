/**
 * The one full collection `taskwright serve` runs after start-up (src/startupGarbage.ts): it is a
 * full (mark-compact) collection, it leaves no `gc` behind for other code, and the built server
 * runs it once, some seconds after it listens. Whether V8 then gives the young generation back
 * depends on what the process allocated in the seconds before, so that is measured (idle RSS in
 * the bench), not asserted.
 */
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { constants, PerformanceObserver } from "node:perf_hooks"
import { runInNewContext } from "node:vm"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { collectStartupGarbage } from "../src/startupGarbage.js"
import { startServe } from "./serve-helpers.js"

describe("the collection after start-up", () => {
  let root = ""
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "taskwright-gc-"))
  })
  afterAll(async () => {
    await rm(root, { recursive: true, force: true })
  })

  it("is a full collection, and exposes no gc to this context or any later one", async () => {
    const kinds: Array<number> = []
    const observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        // A gc entry's `detail` ({ kind, flags }) is not in this @types/node's PerformanceEntry.
        const detail: unknown = Reflect.get(entry, "detail")
        if (typeof detail === "object" && detail !== null && "kind" in detail && typeof detail.kind === "number") {
          kinds.push(detail.kind)
        }
      }
    })
    observer.observe({ entryTypes: ["gc"] })
    try {
      Effect.runSync(collectStartupGarbage)
      await expect.poll(() => kinds).toContain(constants.NODE_PERFORMANCE_GC_MAJOR)
    } finally {
      observer.disconnect()
    }
    expect("gc" in globalThis).toBe(false)
    expect(runInNewContext("typeof gc")).toBe("undefined")
  })

  it("runs once in a serving process, some seconds after it listens", async () => {
    // --trace-gc prints each collection, with its reason: "testing" for gc(), which nothing else calls.
    const server = startServe(
      join(root, "data"),
      { PATH: process.env.PATH ?? "", HOME: root, TASKWRIGHT_CODE_CACHE: "off", TASKWRIGHT_SANDBOX: "off" },
      ["--trace-gc"]
    )
    const forced = () =>
      server
        .output()
        .split("\n")
        .filter((line) => line.includes("Mark-Compact") && line.includes("testing"))
    try {
      await server.listening
      expect(forced()).toHaveLength(0)
      await expect.poll(forced, { timeout: 15_000, interval: 100 }).toHaveLength(1)
      // Once: nothing collects for start-up again.
      await new Promise((resolve) => setTimeout(resolve, 1500))
      expect(forced()).toHaveLength(1)
      expect(server.child.exitCode).toBeNull()
    } finally {
      await server.stop()
    }
  })
})
