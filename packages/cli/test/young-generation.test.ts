/**
 * The young generation held at its starting size while `taskwright serve` starts
 * (src/youngGeneration.ts), on the built binary: V8's own policy grows it to two 16 MB
 * semi-spaces before the server listens, which an idle server then keeps. What it saves in idle
 * RSS, and that throughput under load is unchanged, is the bench's to measure.
 */
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { youngGenerationChosenByUser } from "../src/youngGeneration.js"
import { startServe } from "./serve-helpers.js"

/** `[pid:isolate] New space, used: … committed: 2048 KB` from `--trace-gc-verbose`. */
const newSpaceLine = /^\[\d+:(0x[0-9a-f]+)\] New space,.*committed:\s*(\d+) KB/

describe("the young generation during start-up", () => {
  let root = ""
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "taskwright-young-"))
  })
  afterAll(async () => {
    await rm(root, { recursive: true, force: true })
  })

  it("stays under 16 MB committed until the server listens", async () => {
    // No code cache: compiling the whole bundle is start-up's largest allocation.
    const server = startServe(
      join(root, "data"),
      { PATH: process.env.PATH ?? "", HOME: root, TASKWRIGHT_CODE_CACHE: "off", TASKWRIGHT_SANDBOX: "off" },
      ["--trace-gc-verbose"]
    )
    try {
      await server.listening
      const beforeListening = server.output().split("listening on")[0] ?? ""
      const sizes = beforeListening.split("\n").flatMap((line) => {
        const match = newSpaceLine.exec(line)
        return match === null ? [] : [{ isolate: match[1], kb: Number(match[2]) }]
      })
      // The main thread's isolate prints first; a worker thread (the SQLite checkpointer) has its own heap.
      const main = sizes[0]?.isolate
      const committed = sizes.filter((size) => size.isolate === main).map((size) => size.kb)
      // Start-up collects many times, so the measurement has something to see.
      expect(committed.length).toBeGreaterThan(5)
      // Without the hold, these reach 16,384 KB (two 8 MB halves) before the server listens, and 32,768 after.
      expect(Math.max(...committed)).toBeLessThan(16_384)
    } finally {
      await server.stop()
    }
  })
})

describe("a young generation sized by whoever starts Node", () => {
  it("is left alone", () => {
    expect(youngGenerationChosenByUser(["--max-semi-space-size=64"], "")).toBe(true)
    expect(youngGenerationChosenByUser([], "--max-old-space-size=512 --semi-space-growth-factor=4")).toBe(true)
    expect(youngGenerationChosenByUser(["--max_semi_space_size=8"], "")).toBe(true)
  })

  it("is held otherwise, whatever else Node was given", () => {
    expect(youngGenerationChosenByUser([], "")).toBe(false)
    expect(youngGenerationChosenByUser(["--enable-source-maps"], "--max-old-space-size=512")).toBe(false)
  })
})
