/**
 * API key usage without a write on the request path: each authenticated request adds to a
 * counter in memory (a map lookup); a background fiber writes the batch every second, and the
 * last batch is written when the service shuts down, after any write under way has finished.
 * Reports add what is still in memory, so they are exact for this process. A report and a write
 * take turns: a report that read the store while a batch was on its way would count that batch
 * neither in the store nor in memory.
 */
import type { KeyUsageReport } from "@taskwright/domain"
import { Effect, Schedule } from "effect"
import { UsersRepo } from "./UsersRepo.js"

/** Days a usage report covers, today included. */
export const USAGE_REPORT_DAYS = 90

interface Pending {
  count: number
  lastAt: number
  lastIp: string
  readonly days: Map<string, number>
}

const DAY_MS = 86_400_000

export class KeyUsage extends Effect.Service<KeyUsage>()("@taskwright/core/KeyUsage", {
  scoped: Effect.gen(function* () {
    const repo = yield* UsersRepo
    let pending = new Map<string, Pending>()
    const oneAtATime = (yield* Effect.makeSemaphore(1)).withPermits(1)
    // The UTC date of "now", recomputed once a day rather than formatted on every request.
    let today = ""
    let tomorrowAt = 0

    const record = (keyId: string, address: string): void => {
      const now = Date.now()
      if (now >= tomorrowAt) {
        today = new Date(now).toISOString().slice(0, 10)
        tomorrowAt = now - (now % DAY_MS) + DAY_MS
      }
      let p = pending.get(keyId)
      if (p === undefined) {
        p = { count: 0, lastAt: 0, lastIp: address, days: new Map() }
        pending.set(keyId, p)
      }
      p.count++
      p.lastAt = now
      p.lastIp = address
      p.days.set(today, (p.days.get(today) ?? 0) + 1)
    }

    const merge = (into: Map<string, Pending>, from: Map<string, Pending>) => {
      for (const [keyId, p] of from) {
        const q = into.get(keyId)
        if (q === undefined) {
          into.set(keyId, p)
          continue
        }
        q.count += p.count
        if (p.lastAt > q.lastAt) {
          q.lastAt = p.lastAt
          q.lastIp = p.lastIp
        }
        for (const [day, n] of p.days) q.days.set(day, (q.days.get(day) ?? 0) + n)
      }
    }

    const write = (batch: Map<string, Pending>) =>
      repo.transaction(
        Effect.forEach(
          batch,
          ([keyId, p]) =>
            Effect.zipRight(
              repo.addUsage(keyId, p.count, new Date(p.lastAt).toISOString(), p.lastIp),
              Effect.forEach(p.days, ([day, n]) => repo.addUsageDay(keyId, day, n), { discard: true })
            ),
          { discard: true }
        )
      )

    /**
     * Writes what has accumulated; on failure the counts go back to wait for the next flush. The
     * write cannot be interrupted: its batch has left memory, and a shutdown that stopped it midway
     * would lose the batch (the rollback runs once the statement in flight has finished).
     */
    const flush = oneAtATime(
      Effect.uninterruptible(
        Effect.suspend(() => {
          if (pending.size === 0) return Effect.void
          const batch = pending
          pending = new Map()
          return write(batch).pipe(
            Effect.catchAll(() =>
              Effect.sync(() => {
                merge(batch, pending)
                pending = batch
              })
            )
          )
        })
      )
    )

    const report = Effect.fn("KeyUsage.report")(function* (keyId: string) {
      const since = new Date(Date.now() - (USAGE_REPORT_DAYS - 1) * DAY_MS).toISOString().slice(0, 10)
      const totals = yield* repo.usageTotals(keyId)
      const rows = yield* repo.usageDays(keyId, since)
      const days = new Map(rows.map((r) => [r.day, Number(r.count)]))
      let total = Number(totals?.total_requests ?? 0)
      let lastUsedAt = totals?.last_used_at ?? null
      let lastUsedIp = totals?.last_used_ip ?? null
      const p = pending.get(keyId)
      if (p !== undefined) {
        total += p.count
        const at = new Date(p.lastAt).toISOString()
        if (lastUsedAt === null || at > lastUsedAt) {
          lastUsedAt = at
          lastUsedIp = p.lastIp
        }
        for (const [day, n] of p.days) if (day >= since) days.set(day, (days.get(day) ?? 0) + n)
      }
      return {
        total_requests: total,
        last_used_at: lastUsedAt,
        last_used_ip: lastUsedIp,
        by_day: [...days].sort(([a], [b]) => (a < b ? -1 : 1)).map(([date, count]) => ({ date, count }))
      } satisfies KeyUsageReport
    })

    yield* Effect.addFinalizer(() => flush)
    yield* Effect.forkScoped(Effect.repeat(flush, Schedule.spaced("1 second")))

    return {
      /** Counts one request made with `keyId` from `address`: memory only. */
      record,
      /** Writes the pending counts now. */
      flush,
      /** Totals, the last use and the per-day counts of the last {@link USAGE_REPORT_DAYS} days. */
      report: (keyId: string) => oneAtATime(report(keyId))
    }
  })
}) {}
