/**
 * Live updates from `GET /api/events` (a WebSocket): server messages `{id, type, timestamp,
 * data}`, a client `{"type":"subscribe","topics":[...]}`, and `?since=<id>` on reconnection so
 * no event is missed. A `run.log` event only comes for a `run:<run_id>` topic. When the server
 * no longer keeps the events after that id (close code 4410), the client starts afresh: it
 * forgets the id, reconnects without it and the views reload.
 *
 * When the socket cannot be opened (a server without the endpoint refuses the upgrade; a
 * browser cannot see the status, only the failure) the app polls the REST API every few
 * seconds and keeps trying the socket with a growing delay, up to half a minute.
 */
import { useEffect, useRef, useState } from "preact/hooks"
import type { LiveEvent } from "./types.js"

export type LiveMode = "connecting" | "live" | "polling"

/** How often views refresh from the REST API while the socket is down. */
export const POLL_MS = 3000
const RETRY_FIRST_MS = 1000
const RETRY_MAX_MS = 30_000
const BASE_TOPICS = ["tasks", "projects", "labels", "runs"]
/** The server's close code for a `since` older than what its event log keeps. */
const CLOSE_GONE = 4410

const isEvent = (u: unknown): u is LiveEvent =>
  typeof u === "object" &&
  u !== null &&
  typeof (u as LiveEvent).type === "string" &&
  typeof (u as LiveEvent).id === "number"

class LiveUpdates {
  mode: LiveMode = "connecting"
  private socket: WebSocket | undefined
  private lastId: number | undefined
  private retryMs = RETRY_FIRST_MS
  private retryTimer: ReturnType<typeof setTimeout> | undefined
  private pollTimer: ReturnType<typeof setInterval> | undefined
  private running = false
  private readonly runTopics = new Map<string, number>()
  private readonly eventListeners = new Set<(event: LiveEvent) => void>()
  private readonly refreshListeners = new Set<() => void>()
  private readonly modeListeners = new Set<(mode: LiveMode) => void>()

  start(): void {
    if (this.running) return
    this.running = true
    this.connect()
  }

  /** Closes the socket and stops polling (signing out). The next start begins afresh. */
  stop(): void {
    this.running = false
    clearTimeout(this.retryTimer)
    this.stopPolling()
    const socket = this.socket
    this.socket = undefined
    socket?.close()
    this.lastId = undefined
    this.setMode("connecting")
  }

  onEvent(listener: (event: LiveEvent) => void): () => void {
    this.eventListeners.add(listener)
    return () => this.eventListeners.delete(listener)
  }

  /** Called when a view should reload from the REST API: each poll, and after a gap in events. */
  onRefresh(listener: () => void): () => void {
    this.refreshListeners.add(listener)
    return () => this.refreshListeners.delete(listener)
  }

  onMode(listener: (mode: LiveMode) => void): () => void {
    this.modeListeners.add(listener)
    return () => this.modeListeners.delete(listener)
  }

  /** Adds `run:<id>` to the subscription while a view shows that run's log. */
  watchRun(runId: string): () => void {
    const topic = `run:${runId}`
    this.runTopics.set(topic, (this.runTopics.get(topic) ?? 0) + 1)
    this.subscribe()
    return () => {
      const n = (this.runTopics.get(topic) ?? 1) - 1
      if (n === 0) this.runTopics.delete(topic)
      else this.runTopics.set(topic, n)
      this.subscribe()
    }
  }

  private topics(): Array<string> {
    return [...BASE_TOPICS, ...this.runTopics.keys()]
  }

  private subscribe(): void {
    if (this.socket?.readyState !== WebSocket.OPEN) return
    this.socket.send(JSON.stringify({ type: "subscribe", topics: this.topics() }))
  }

  private setMode(mode: LiveMode): void {
    if (mode === this.mode) return
    this.mode = mode
    for (const l of this.modeListeners) l(mode)
  }

  private refresh(): void {
    for (const l of this.refreshListeners) l()
  }

  private connect(): void {
    const url = new URL("/api/events", location.href)
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:"
    const resuming = this.lastId !== undefined
    if (this.lastId !== undefined) url.searchParams.set("since", String(this.lastId))
    // Subscribed from the upgrade on: a `subscribe` message sent once the socket opens would leave
    // a moment, after the board says "Live", in which a change is neither sent nor polled for.
    const topics = this.topics().join(",")
    url.searchParams.set("topics", topics)
    let socket: WebSocket
    try {
      socket = new WebSocket(url)
    } catch {
      this.fallBack()
      return
    }
    this.socket = socket
    socket.onopen = () => {
      this.retryMs = RETRY_FIRST_MS
      this.stopPolling()
      this.setMode("live")
      // A run's log opened while the socket was connecting.
      if (this.topics().join(",") !== topics) this.subscribe()
      // Without `since` the events between the views' last load and now are not replayed.
      if (!resuming) this.refresh()
    }
    socket.onmessage = (message) => {
      let event: unknown
      try {
        event = JSON.parse(String(message.data))
      } catch {
        return
      }
      if (!isEvent(event)) return
      if (this.lastId === undefined || event.id > this.lastId) this.lastId = event.id
      for (const l of this.eventListeners) l(event)
    }
    socket.onclose = (event) => {
      if (this.socket !== socket) return
      this.socket = undefined
      if (!this.running) return
      if (event.code === CLOSE_GONE && resuming) {
        // The log no longer keeps the events after `since`: resuming from it can never work.
        // Start afresh without it; the views reload once the new socket opens (or on the first
        // poll, if it cannot).
        this.lastId = undefined
        this.connect()
        return
      }
      this.fallBack()
    }
  }

  private fallBack(): void {
    this.setMode("polling")
    if (this.pollTimer === undefined) {
      this.refresh()
      this.pollTimer = setInterval(() => this.refresh(), POLL_MS)
    }
    clearTimeout(this.retryTimer)
    this.retryTimer = setTimeout(() => {
      if (this.running) this.connect()
    }, this.retryMs)
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS)
  }

  private stopPolling(): void {
    clearInterval(this.pollTimer)
    this.pollTimer = undefined
  }
}

/** The app's one connection. */
export const live = new LiveUpdates()

export const useLiveMode = (): LiveMode => {
  const [mode, setMode] = useState(live.mode)
  useEffect(() => live.onMode(setMode), [])
  return mode
}

/** Calls the latest `handler` for each event, without resubscribing when it changes. */
export const useLiveEvents = (handler: (event: LiveEvent) => void): void => {
  const ref = useRef(handler)
  ref.current = handler
  useEffect(() => live.onEvent((e) => ref.current(e)), [])
}

/** Calls the latest `handler` on each poll and after a gap in events. */
export const useLiveRefresh = (handler: () => void): void => {
  const ref = useRef(handler)
  ref.current = handler
  useEffect(() => live.onRefresh(() => ref.current()), [])
}
