/**
 * Rate-limit counters in this process's memory. Windows are aligned on the epoch, so every
 * bucket of one window length turns over at the same instant: the whole map of the previous
 * window is dropped at once, and a hit is one `Map` lookup and one store.
 */
import { Effect, Layer } from "effect"
import { type Hit, RateLimitStore, type RateLimitStoreShape } from "./RateLimitStore.js"

interface Window {
  start: number
  readonly counts: Map<string, number>
}

/** A fresh in-memory store. */
export const make = (): RateLimitStoreShape => {
  const windows = new Map<number, Window>()
  const hitSync = (bucket: string, windowStart: number, windowMs: number): Hit => {
    let w = windows.get(windowMs)
    if (w === undefined) {
      w = { start: windowStart, counts: new Map() }
      windows.set(windowMs, w)
    } else if (windowStart > w.start) {
      w.start = windowStart
      w.counts.clear()
    }
    // A caller whose clock is behind (windowStart < w.start) counts in the current window.
    const count = (w.counts.get(bucket) ?? 0) + 1
    w.counts.set(bucket, count)
    return { count, windowStart: w.start }
  }
  return {
    hit: (bucket, windowStart, windowMs) => Effect.sync(() => hitSync(bucket, windowStart, windowMs)),
    hitSync,
    prune: () => Effect.void
  }
}

/** The in-memory store as a layer: one per process (per runtime). */
export const layer: Layer.Layer<RateLimitStore> = Layer.sync(RateLimitStore, make)
