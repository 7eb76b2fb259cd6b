/**
 * glibc's main heap after a start that compiled the bundle, on the built binary. Read whole, the
 * 2.2 MB bundle's buffers are each mapped on their own, and freeing them raised glibc's mmap
 * threshold to 7 MB: the compiler's later allocations came from the main heap and left it at
 * 19 MiB for the life of the server. Read in 64 KiB pieces (src/start.ts) it stays near 8. What
 * that does to idle RSS is the bench's to measure.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startServe } from "./serve-helpers.js"

/** The resident KiB of the process's `[heap]` mapping, from `/proc/<pid>/smaps`. */
const mainHeapKiB = async (pid: number): Promise<number> => {
  const lines = (await readFile(`/proc/${pid}/smaps`, "utf8")).split("\n")
  const start = lines.findIndex((line) => line.endsWith("[heap]"))
  const rss = lines.slice(start + 1).find((line) => line.startsWith("Rss:"))
  return start === -1 || rss === undefined ? 0 : Number(rss.replace(/\D/g, ""))
}

type ReportHeader = { readonly header?: { readonly glibcVersionRuntime?: string } }
const glibc = process.platform === "linux" && (process.report.getReport() as ReportHeader).header?.glibcVersionRuntime

describe.runIf(glibc)("glibc's main heap after a start that compiled the bundle", () => {
  let root = ""
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "taskwright-heap-"))
  })
  afterAll(async () => {
    await rm(root, { recursive: true, force: true })
  })

  it("is not left holding the compiler's memory", async () => {
    // No code cache: every start compiles the whole bundle, as a first start from a package does.
    const server = startServe(join(root, "data"), {
      PATH: process.env.PATH ?? "",
      HOME: root,
      TASKWRIGHT_CODE_CACHE: "off",
      TASKWRIGHT_SANDBOX: "off"
    })
    try {
      await server.listening
      const { pid } = server.child
      if (pid === undefined) throw new Error("the server was not spawned")
      // 19 MiB when the bundle is read whole (7.7 read in pieces); it does not shrink later.
      const heapKiB = await mainHeapKiB(pid)
      expect(heapKiB).toBeGreaterThan(0)
      expect(heapKiB).toBeLessThan(12 * 1024)
    } finally {
      await server.stop()
    }
  })
})
