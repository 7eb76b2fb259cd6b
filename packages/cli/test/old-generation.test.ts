/**
 * What an authenticated request leaves in V8's old generation, on the built binary. Garbage there
 * is collected only by full (mark-compact) collections, whose pauses of 5 to 20 ms land in the
 * p99 of whatever requests are waiting, so the request path should leave almost none. Two
 * sources were found and removed: the connection bookkeeping's maps (V8 gives a map in the old
 * generation a new table there each time it rehashes) and the rate-limit header's count (`String(n)`
 * keeps its result in V8's number-to-string cache, which outlives the young generation).
 *
 * The measure is V8's own (`--trace-gc-nvp`): between two scavenges of the main thread's heap
 * with no full collection between them, what the heap kept grew by what reached the old
 * generation (promoted or allocated there). It is summed over 40,000 requests from another
 * process, sent as wrk sends them.
 */

import { execFile } from "node:child_process"
import { mkdtemp, readFile, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startServe } from "./serve-helpers.js"

const run = promisify(execFile)
const loadClient = join(__dirname, "fixtures", "keep-alive-load.mjs")

/** One line of `--trace-gc-nvp`: which isolate, what kind of collection, the heap's size after it. */
const nvpLine = /^\[\d+:(0x[0-9a-f]+)\]\s+\d+ ms: .*\bgc=(\w+)\b.*\btotal_size_after=(\d+)/

interface Collection {
  readonly isolate: string
  readonly kind: string
  readonly sizeAfter: number
}

const collections = (output: string): Array<Collection> =>
  output.split("\n").flatMap((line) => {
    const match = nvpLine.exec(line)
    return match === null ? [] : [{ isolate: match[1] ?? "", kind: match[2] ?? "", sizeAfter: Number(match[3]) }]
  })

/** Bytes the main isolate's heap kept across consecutive scavenges, full collections excluded. */
const oldGenerationGrowth = (all: ReadonlyArray<Collection>, mainIsolate: string) => {
  const main = all.filter((c) => c.isolate === mainIsolate)
  let grown = 0
  let pairs = 0
  for (let i = 1; i < main.length; i++) {
    const before = main[i - 1]
    const after = main[i]
    if (before === undefined || after === undefined || before.kind !== "s" || after.kind !== "s") continue
    grown += after.sizeAfter - before.sizeAfter
    pairs++
  }
  return { grown, pairs }
}

/** The answers' status codes, counted, of `total` GETs of `path` sent as wrk sends them (fixtures/keep-alive-load.mjs). */
const load = async (port: number, path: string, credential: string, total: number) => {
  const { stdout } = await run(process.execPath, [loadClient, String(port), path, credential, "50", String(total)])
  return JSON.parse(stdout) as Record<string, number>
}

describe("the old generation under authenticated reads", () => {
  let root = ""
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "taskwright-oldgen-"))
  })
  afterAll(async () => {
    await rm(root, { recursive: true, force: true })
  })

  it("grows by less than 24 bytes a request", { timeout: 120_000 }, async () => {
    const dataDir = join(root, "data")
    const server = startServe(
      dataDir,
      {
        PATH: process.env.PATH ?? "",
        HOME: root,
        NODE_ENV: "production",
        TASKWRIGHT_CODE_CACHE: "off",
        TASKWRIGHT_SANDBOX: "off",
        TASKWRIGHT_RATE_LIMIT: "1000000000"
      },
      ["--trace-gc-nvp"]
    )
    try {
      const line = await server.listening
      const base = /listening on (http:\/\/\S+)/.exec(line)?.[1]
      expect(base).toBeDefined()
      const key = (await readFile(join(dataDir, "admin-key.txt"), "utf8")).trim()
      const created = await fetch(`${base}/api/tasks`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ title: "read me", labels: ["a", "b"] })
      })
      expect(created.status).toBe(201)
      const { id } = (await created.json()) as { id: number }
      const port = Number(new URL(base ?? "").port)
      const burst = (requests: number) => load(port, `/api/tasks/${id}`, key, requests)
      // Quiet until the next collection (some ten seconds: the server's timers allocate
      // little), which moves what the server keeps (its connection bookkeeping included) to the old
      // generation, as on a server that waited between bursts. Without the wait, a fresh server's
      // maps were still young under load, and the maps' cost did not show.
      const mainIsolate = collections(server.output())[0]?.isolate ?? ""
      const quietFrom = server.output().length
      const collected = () => collections(server.output().slice(quietFrom)).some((c) => c.isolate === mainIsolate)
      for (let waited = 0; !collected() && waited < 40_000; waited += 100) await sleep(100)
      expect(collected()).toBe(true)
      // Warm-up: the code optimised, the caches filled, the young generation at its working size.
      await burst(20_000)
      const from = server.output().length
      const requests = 40_000
      expect(await burst(requests)).toEqual({ "200": requests })

      const { grown, pairs } = oldGenerationGrowth(collections(server.output().slice(from)), mainIsolate)
      // Enough scavenges for the sum to mean something.
      expect(pairs).toBeGreaterThan(20)
      // Measured: 1 to 6 bytes. Without the string fix, 36; without the maps' replacement, 110 to 124.
      expect(grown / requests).toBeLessThan(24)
    } finally {
      await server.stop()
    }
  })
})
