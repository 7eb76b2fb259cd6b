/**
 * The "Run log" region: the selected run's log, oldest first, coloured by level, following the
 * tail unless the reader scrolls up. Lines arrive as `run.log` events on the run's topic, or
 * by polling `GET /api/runs/:id/logs?after=<seq>` while the events socket is down.
 */
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks"
import { api } from "../api.js"
import { ErrorState, lazy } from "../components.js"
import { live, useLiveEvents, useLiveMode } from "../live.js"
import type { LogEntry, Run } from "../types.js"

/** Lines kept on screen; older ones are dropped (the API keeps them all). */
const KEEP = 2000
const PAGE = 1000

const isEntry = (u: unknown): u is LogEntry & { readonly run_id?: string } =>
  typeof u === "object" &&
  u !== null &&
  typeof (u as LogEntry).seq === "number" &&
  typeof (u as LogEntry).message === "string"

const time = lazy(() => new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" }))

/** The lines on screen and how many older ones were dropped to keep within {@link KEEP}. */
interface Shown {
  readonly entries: ReadonlyArray<LogEntry>
  readonly dropped: number
}

const EMPTY: Shown = { entries: [], dropped: 0 }

/** `more` after `prev`, the oldest dropped past {@link KEEP}: one pure step, one state. */
const appended = (prev: Shown, more: ReadonlyArray<LogEntry>): Shown => {
  const all = prev.entries.concat(more)
  if (all.length <= KEEP) return { entries: all, dropped: prev.dropped }
  return { entries: all.slice(all.length - KEEP), dropped: prev.dropped + all.length - KEEP }
}

export const RunLog = ({ run }: { readonly run: Run }) => {
  const [{ entries, dropped }, setShown] = useState<Shown>(EMPTY)
  const [error, setError] = useState<unknown>(undefined)
  const [follow, setFollow] = useState(true)
  const lastSeq = useRef(0)
  const busy = useRef<string | null>(null)
  const again = useRef(false)
  const box = useRef<HTMLDivElement>(null)
  const mode = useLiveMode()
  const runId = run.id
  const shown = useRef(runId)
  shown.current = runId

  const append = (more: ReadonlyArray<LogEntry>) => {
    const fresh = more.filter((e) => e.seq > lastSeq.current)
    if (fresh.length === 0) return
    lastSeq.current = fresh[fresh.length - 1]?.seq ?? lastSeq.current
    setShown((prev) => appended(prev, fresh))
  }

  /** Reads every line after the last one shown; a call during a read makes it read once more. */
  const catchUp = async () => {
    if (busy.current === runId) {
      again.current = true
      return
    }
    busy.current = runId
    again.current = false
    try {
      for (;;) {
        const page = await api<{ logs: Array<LogEntry> }>(
          "GET",
          `/api/runs/${runId}/logs?after=${lastSeq.current}&limit=${PAGE}`
        )
        if (shown.current !== runId) return
        append(page.logs)
        setError(undefined)
        if (page.logs.length < PAGE && !again.current) break
        again.current = false
      }
    } catch (e) {
      if (shown.current === runId) setError(e)
    } finally {
      if (busy.current === runId) busy.current = null
    }
  }

  useEffect(() => {
    lastSeq.current = 0
    setShown(EMPTY)
    setFollow(true)
    void catchUp()
    return live.watchRun(runId)
  }, [runId])

  // Without the socket, poll while the run writes; once it ends, read what it wrote last.
  const running = run.status === "running"
  useEffect(() => {
    if (!running) {
      void catchUp()
      return
    }
    if (mode === "live") return
    const timer = setInterval(() => void catchUp(), 1000)
    return () => clearInterval(timer)
  }, [running, mode, runId])

  useLiveEvents((event) => {
    if (event.type !== "run.log" || !isEntry(event.data)) return
    const entry = event.data
    if (entry.run_id !== undefined && entry.run_id !== runId) return
    if (entry.seq <= lastSeq.current) return
    if (entry.seq === lastSeq.current + 1) append([entry])
    else void catchUp()
  })

  useLayoutEffect(() => {
    const el = box.current
    if (follow && el !== null) el.scrollTop = el.scrollHeight
  }, [entries, follow])

  // Lines rewrap when the log's width changes (a phone turned, a window resized): stay at the end.
  useEffect(() => {
    const el = box.current
    if (!follow || el === null) return
    const observer = new ResizeObserver(() => {
      el.scrollTop = el.scrollHeight
    })
    observer.observe(el)
    return () => observer.disconnect()
  }, [follow])

  return (
    <section class="run-log" aria-labelledby="run-log-heading">
      <div class="run-log-head">
        <h2 id="run-log-heading">Run log</h2>
        <span class="muted">
          {run.agent} · {run.branch}
        </span>
        <label class="check">
          <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.currentTarget.checked)} />
          Follow the end
        </label>
      </div>
      {error !== undefined && <ErrorState error={error} onRetry={() => void catchUp()} />}
      <div
        ref={box}
        class="log"
        role="log"
        aria-live="off"
        aria-label={`Log of run ${run.id}`}
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling log must take focus for keyboards to scroll it
        tabIndex={0}
        onScroll={(e) => {
          const el = e.currentTarget
          const atEnd = el.scrollTop + el.clientHeight >= el.scrollHeight - 8
          if (atEnd !== follow) setFollow(atEnd)
        }}
      >
        {dropped > 0 && (
          <p class="log-note">
            {dropped.toLocaleString()} earlier lines are not shown; the API keeps them (GET /api/runs/{run.id}/logs).
          </p>
        )}
        {entries.length === 0 && (
          <p class="log-note">{running ? "Waiting for the agent's first line…" : "This run wrote nothing."}</p>
        )}
        {entries.map((e) => (
          <div key={e.seq} class={`log-line log-${e.level}`}>
            <time dateTime={e.timestamp}>{time().format(new Date(e.timestamp))}</time>
            <span class="log-level">{e.level}</span>
            <span class="log-message">{e.message}</span>
          </div>
        ))}
        {running && <p class="log-note log-running">Running…</p>}
      </div>
    </section>
  )
}
