/**
 * The idle timers of a connection, against a real server with small timeouts: a connection that
 * sends nothing is closed at the headers timeout, a keep-alive connection soon after its answer,
 * one that stops reading its answers at the idle timeout,
 * and a request whose handler works longer than both (a project cloned from a slow ssh remote
 * before the answer) still gets its answer, also when it was pipelined behind a quicker one.
 */
import { execFileSync } from "node:child_process"
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises"
import { connect } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { settingsFromEnv } from "@taskwright/core"
import { type RunningServer, serve } from "@taskwright/server"
import { Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const HEADERS_MS = 1_000
const IDLE_MS = 4_000
const KEEP_ALIVE_MS = 500
const REQUEST_MS = 1_500
/** How long the ssh remote takes before it answers: longer than every timeout above together. */
const SLOW_REMOTE_MS = 7_000
/** How long a remote whose path says "quick" takes: less than the idle timeout. */
const QUICK_REMOTE_MS = 1_000

/** Opens a connection, writes `request` (if any) and answers what came back and when the server closed it. */
const exchange = (port: number, request: string | null) =>
  new Promise<{ text: string; answeredAfterMs: number; closedAfterMs: number }>((resolve) => {
    const started = Date.now()
    let answeredAfterMs = -1
    let text = ""
    const socket = connect(port, "127.0.0.1")
    socket.on("data", (d) => {
      text += d.toString("latin1")
      if (answeredAfterMs < 0) answeredAfterMs = Date.now() - started
    })
    socket.on("error", () => {})
    socket.on("close", () => resolve({ text, answeredAfterMs, closedAfterMs: Date.now() - started }))
    socket.on("connect", () => {
      if (request !== null) socket.write(request)
    })
  })

describe("idle connections and requests being handled", () => {
  let server: RunningServer
  let dir: string
  let adminKey = ""
  const saved = { command: process.env.GIT_SSH_COMMAND, variant: process.env.GIT_SSH_VARIANT }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "tw-timeouts-"))
    // A slow ssh remote: the service's git reaches it through GIT_SSH_COMMAND, as an operator's would.
    const ssh = join(dir, "slow-ssh")
    // A remote whose path says "quick" answers after QUICK_REMOTE_MS instead.
    await writeFile(
      ssh,
      "#!/bin/sh\nfor last; do :; done\n" +
        `case "$last" in *quick*) sleep ${QUICK_REMOTE_MS / 1000} ;; *) sleep ${SLOW_REMOTE_MS / 1000} ;; esac\n` +
        'exec sh -c "$last"\n'
    )
    await chmod(ssh, 0o755)
    process.env.GIT_SSH_COMMAND = ssh
    process.env.GIT_SSH_VARIANT = "simple"
    server = await serve(
      settingsFromEnv(
        { TASKWRIGHT_PROJECTS_ROOT: join(dir, "projects") },
        { dataDir: join(dir, "data"), databaseUrl: ":memory:" }
      ),
      {
        port: 0,
        host: "127.0.0.1",
        log: "silent",
        limits: {
          headersTimeoutMs: HEADERS_MS,
          requestTimeoutMs: REQUEST_MS,
          keepAliveTimeoutMs: KEEP_ALIVE_MS,
          idleTimeoutMs: IDLE_MS,
          maxConnections: 1_000
        }
      }
    )
    adminKey = Option.getOrThrow(Option.map(server.started.bootstrap.adminKey, Redacted.value))
  })
  afterAll(async () => {
    await server.close()
    for (const [name, value] of [
      ["GIT_SSH_COMMAND", saved.command],
      ["GIT_SSH_VARIANT", saved.variant]
    ] as const) {
      if (value === undefined) delete process.env[name]
      else process.env[name] = value
    }
    await rm(dir, { recursive: true, force: true })
  })

  it("a connection that sends nothing is closed at the headers timeout, with a 408 in the envelope", async () => {
    const { text, closedAfterMs } = await exchange(server.port, null)
    expect(text).toMatch(/^HTTP\/1\.1 408/)
    expect(text).toContain('"code":"REQUEST_TIMEOUT"')
    expect(closedAfterMs).toBeGreaterThanOrEqual(HEADERS_MS - 200)
    expect(closedAfterMs).toBeLessThan(HEADERS_MS + 5_000)
  })

  it("a keep-alive connection is closed soon after its answer, well before the idle timeout", async () => {
    const { text, answeredAfterMs, closedAfterMs } = await exchange(
      server.port,
      "GET /api/health HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"
    )
    expect(text).toMatch(/^HTTP\/1\.1 200/)
    expect(text.toLowerCase()).toContain("connection: keep-alive")
    // Node allows a second past the advertised keep-alive time before it closes.
    const idleAfterAnswer = closedAfterMs - answeredAfterMs
    expect(idleAfterAnswer).toBeGreaterThanOrEqual(KEEP_ALIVE_MS - 100)
    expect(idleAfterAnswer).toBeLessThan(IDLE_MS - 500)
  })

  it("a client that stops reading its answers is cut off at the idle timeout", async () => {
    // Seen from the server: the client below never reads, so it would not notice a close.
    const closed = new Promise<number>((resolve) =>
      server.server.once("connection", (socket) => {
        const opened = Date.now()
        socket.once("close", () => resolve(Date.now() - opened))
      })
    )
    const client = connect(server.port, "127.0.0.1")
    client.on("error", () => {})
    client.pause()
    // Far more than the socket buffers hold: the server's writes stall with an answer half sent.
    const request = "GET /api/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n"
    client.write(request.repeat(2_000))
    const closedAfterMs = await closed
    client.destroy()
    // Node gives a write that was still moving one more idle period before it calls the socket idle.
    expect(closedAfterMs).toBeGreaterThanOrEqual(IDLE_MS - 200)
    expect(closedAfterMs).toBeLessThan(2 * IDLE_MS + 5_000)
  })

  /** A repository under the test's directory with one empty commit whose message is `message`. */
  const makeOrigin = (name: string, message: string) => {
    const origin = join(dir, name)
    execFileSync("git", ["init", "-q", origin])
    execFileSync(
      "git",
      ["-C", origin, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", message],
      { stdio: "pipe" }
    )
    return origin
  }

  it("a request whose handler works longer than the idle and request timeouts still gets its answer", async () => {
    const origin = makeOrigin("origin", "slow")
    const path = join(dir, "projects", "slow-clone")
    const started = Date.now()
    const r = await fetch(`${server.url}/api/projects`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminKey}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "slow", path, git_url: `ssh://localhost${origin}` })
    })
    const took = Date.now() - started
    expect(r.status, await r.clone().text()).toBe(201)
    expect(((await r.json()) as { path: string }).path).toBe(path)
    expect(took).toBeGreaterThanOrEqual(SLOW_REMOTE_MS)
    expect(execFileSync("git", ["-C", path, "log", "--format=%s"], { encoding: "utf8" }).trim()).toBe("slow")
  }, 30_000)

  it("a slow request pipelined behind a quicker one is spared once the first is answered", async () => {
    // The first answer comes while the second request is still with its handler: the connection is
    // not idle then, and the idle timer (which fires between the two answers) must not cut it.
    const quick = makeOrigin("quick-origin", "quick-origin")
    const slow = makeOrigin("slow-origin", "slow-origin")
    const create = (name: string, origin: string) => {
      const body = JSON.stringify({ name, path: join(dir, "projects", name), git_url: `ssh://localhost${origin}` })
      return (
        `POST /api/projects HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${adminKey}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
      )
    }
    const socket = connect(server.port, "127.0.0.1")
    let text = ""
    const closed = new Promise<void>((resolve) => {
      socket.on("data", (d) => {
        text += d.toString("latin1")
        // The second answer follows the first one's body directly, not on a line of its own.
        if ((text.match(/HTTP\/1\.1 \d{3} /g) ?? []).length === 2) socket.end()
      })
      socket.on("error", () => {})
      socket.on("close", () => resolve())
    })
    socket.write(create("pipelined-quick", quick) + create("pipelined-slow", slow))
    await closed
    const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1])
    expect(statuses, text.slice(0, 500)).toEqual(["201", "201"])
    expect(
      execFileSync("git", ["-C", join(dir, "projects", "pipelined-slow"), "log", "--format=%s"], {
        encoding: "utf8"
      }).trim()
    ).toBe("slow-origin")
  }, 30_000)
})
