/**
 * A body over 1 MiB on a real socket: the client, still sending, must read the 413 (not a reset),
 * and the connection must serve the next request once the rest of the body has arrived; a body
 * declared past what the server drains gets its 413 and the connection closed.
 */
import { connect } from "node:net"
import { startTestServer, type TestServer } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

interface RawResponse {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: string
}

/**
 * Writes `chunks` on one connection (each after the previous has been handed to the kernel) and
 * reads `expected` responses, or as many as arrive before the server closes it.
 */
const exchange = (port: number, chunks: ReadonlyArray<string | Buffer>, expected: number) =>
  new Promise<{ responses: Array<RawResponse>; closed: boolean; error: string | undefined }>((done) => {
    const socket = connect(port, "127.0.0.1")
    let buffer = Buffer.alloc(0)
    const responses: Array<RawResponse> = []
    let error: string | undefined
    const finish = (closed: boolean) => {
      socket.destroy()
      done({ responses, closed, error })
    }
    const parse = () => {
      for (;;) {
        const end = buffer.indexOf("\r\n\r\n")
        if (end === -1) return
        const lines = buffer.subarray(0, end).toString("latin1").split("\r\n")
        const headers: Record<string, string> = {}
        for (const line of lines.slice(1)) {
          const colon = line.indexOf(":")
          headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
        }
        const length = Number(headers["content-length"] ?? "0")
        if (buffer.length < end + 4 + length) return
        responses.push({
          status: Number(lines[0]?.split(" ")[1]),
          headers,
          body: buffer.subarray(end + 4, end + 4 + length).toString("utf8")
        })
        buffer = buffer.subarray(end + 4 + length)
        if (responses.length === expected) return finish(false)
      }
    }
    socket.on("data", (data: Buffer) => {
      buffer = Buffer.concat([buffer, data])
      parse()
    })
    socket.on("error", (e: NodeJS.ErrnoException) => {
      error = e.code ?? e.message
    })
    socket.on("close", () => finish(true))
    const write = (i: number): void => {
      const chunk = chunks[i]
      if (chunk === undefined || socket.destroyed) return
      socket.write(chunk, () => write(i + 1))
    }
    write(0)
  })

const MiB = 1024 * 1024

describe("a body over 1 MiB on a real connection", () => {
  let s: TestServer
  let key: string
  let port: number
  beforeAll(async () => {
    s = await startTestServer()
    key = (await s.createUser()).key
    port = Number(new URL(s.url).port)
  })
  afterAll(() => s.close())

  const post = (length: number, extra: Record<string, string> = {}) =>
    [
      "POST /api/tasks HTTP/1.1",
      "Host: 127.0.0.1",
      `Authorization: Bearer ${key}`,
      "Content-Type: application/json",
      ...(length < 0 ? ["Transfer-Encoding: chunked"] : [`Content-Length: ${length}`]),
      ...Object.entries(extra).map(([k, v]) => `${k}: ${v}`),
      "",
      ""
    ].join("\r\n")
  const health = "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
  const body = (bytes: number) => Buffer.alloc(bytes, "x")

  it("answers 413 while the client is still sending 4 MiB, then serves the next request on the same connection", async () => {
    const size = 4 * MiB
    // The body goes in 256 KiB writes, so most of it is sent after the answer.
    const pieces = Array.from({ length: size / (256 * 1024) }, () => body(256 * 1024))
    const r = await exchange(port, [post(size), ...pieces, health], 2)
    expect(r.error).toBeUndefined()
    expect(r.responses.map((x) => x.status)).toEqual([413, 200])
    const refusal = JSON.parse(r.responses[0]?.body ?? "{}") as { error: { code: string } }
    expect(refusal.error.code).toBe("PAYLOAD_TOO_LARGE")
    expect(r.responses[0]?.headers.connection).not.toBe("close")
    // Nothing of the refused task was stored.
    const rows = await s.query<{ n: number }>("SELECT COUNT(*) AS n FROM tasks")
    expect(Number(rows[0]?.n)).toBe(0)
  })

  it("does the same for a chunked body that passes 1 MiB", async () => {
    const piece = body(256 * 1024)
    const chunk = Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from("\r\n")])
    const r = await exchange(port, [post(-1), ...Array.from({ length: 8 }, () => chunk), "0\r\n\r\n", health], 2)
    expect(r.error).toBeUndefined()
    expect(r.responses.map((x) => x.status)).toEqual([413, 200])
  })

  it("answers 413 and closes the connection for a body declared past what it drains", async () => {
    const r = await exchange(port, [post(64 * MiB), body(64 * 1024)], 1)
    expect(r.responses.map((x) => x.status)).toEqual([413])
    expect(r.responses[0]?.headers.connection).toBe("close")
    const after = await exchange(port, [health], 1)
    expect(after.responses.map((x) => x.status)).toEqual([200])
  })
})
