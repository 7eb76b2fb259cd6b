/**
 * A WebSocket client of `GET /api/events` for tests: connected clients that keep what they
 * receive, the HTTP answer that refused an upgrade, and waiting for a condition.
 */
import WebSocket from "ws"

export interface Event {
  readonly id: number
  readonly type: string
  readonly timestamp: string
  readonly data: Record<string, unknown>
}

export const wsUrl = (httpUrl: string, path = "/api/events") => httpUrl.replace(/^http/, "ws") + path

/** A connected client that keeps what it receives. */
export const connect = (url: string, headers: Record<string, string> = {}, options: WebSocket.ClientOptions = {}) =>
  new Promise<{
    ws: WebSocket
    events: Array<Event>
    other: Array<Record<string, unknown>>
    closed: Promise<{ code: number; reason: string }>
  }>((resolve, reject) => {
    const ws = new WebSocket(url, { ...options, headers })
    const events: Array<Event> = []
    const other: Array<Record<string, unknown>> = []
    const closed = new Promise<{ code: number; reason: string }>((done) =>
      ws.on("close", (code, reason) => done({ code, reason: reason.toString() }))
    )
    ws.on("message", (data) => {
      const message = JSON.parse(data.toString()) as Record<string, unknown>
      if (typeof message.id === "number") events.push(message as unknown as Event)
      else other.push(message)
    })
    ws.on("open", () => resolve({ ws, events, other, closed }))
    ws.on("unexpected-response", (_req, res) => {
      let body = ""
      res.on("data", (c: Buffer) => {
        body += c.toString()
      })
      res.on("end", () =>
        reject(Object.assign(new Error(`refused ${res.statusCode}`), { status: res.statusCode, body }))
      )
    })
    ws.on("error", (error) => reject(error))
  })

/** The HTTP answer that refused an upgrade. */
export const refusal = async (url: string, headers: Record<string, string> = {}) => {
  const error = (await connect(url, headers).then(
    (c) => {
      c.ws.close()
      return undefined
    },
    (e: unknown) => e
  )) as { status?: number; body?: string } | undefined
  if (error?.status === undefined) throw new Error("the upgrade was accepted")
  return { status: error.status, body: JSON.parse(error.body ?? "{}") as { error: { code: string; message: string } } }
}

export const until = async (check: () => boolean, ms = 10_000) => {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error("timed out")
    await new Promise((r) => setTimeout(r, 20))
  }
}

export const subscribe = (ws: WebSocket, topics: ReadonlyArray<string>) =>
  new Promise<void>((resolve) => {
    const onMessage = (data: WebSocket.RawData) => {
      if ((JSON.parse(data.toString()) as { type?: string }).type === "subscribed") {
        ws.off("message", onMessage)
        resolve()
      }
    }
    ws.on("message", onMessage)
    ws.send(JSON.stringify({ type: "subscribe", topics }))
  })
