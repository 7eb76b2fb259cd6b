/**
 * Summaries (means and ratios per round) and the markdown tables.
 */
import { ENDPOINTS, WRITES } from "./endpoints.mjs"

const mean = (xs) => {
  const ys = xs.filter((x) => typeof x === "number" && Number.isFinite(x))
  return ys.length === 0 ? null : ys.reduce((a, b) => a + b, 0) / ys.length
}
const sum = (xs) => xs.reduce((a, b) => a + (b ?? 0), 0)
const finite = (xs) => xs.filter((x) => typeof x === "number" && Number.isFinite(x))

const fmt = {
  int: (x) => (x === null || x === undefined ? "–" : Math.round(x).toLocaleString("en-US")),
  ms: (x) => (x === null || x === undefined ? "–" : x < 10 ? x.toFixed(2) : x.toFixed(1)),
  s: (x) => (x === null || x === undefined ? "–" : x.toFixed(2)),
  mib: (x) => (x === null || x === undefined ? "–" : x.toFixed(0)),
  ratio: (x) => (x === null || x === undefined || !Number.isFinite(x) ? "–" : `${x.toFixed(2)}×`),
  us: (x) => (x === null || x === undefined ? "–" : x.toFixed(0))
}

/** A mean ratio with the range of the rounds' ratios: `0.95× (0.91–0.99)`. */
const ratioRange = (m, rounds) => {
  const xs = finite(rounds)
  if (m === null || m === undefined || xs.length === 0) return "–"
  if (xs.length === 1) return fmt.ratio(m)
  return `${fmt.ratio(m)} (${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})`
}

const table = (header, rows) => {
  const lines = [`| ${header.join(" | ")} |`, `|${header.map((_h, i) => (i < 2 ? "---" : "---:")).join("|")}|`]
  for (const r of rows) lines.push(`| ${r.join(" | ")} |`)
  return lines.join("\n")
}

const ratio = (a, b) => (a == null || b == null || b === 0 ? null : a / b)

/**
 * `measurements`: [{ phase, round, server, seed, endpoint, result }] where result has rps, p50Ms,
 * p99Ms, non2xx, socketErrors, serverCpuS, loadgenCpuS, rssMiB, requests (and dbCpuS on
 * PostgreSQL, walMiB on SQLite). Answers per endpoint and server: each round with its ratios to
 * C and B in the same round, and the mean.
 */
export const summarise = (measurements, serverKeys, { phase, seed, endpoints }) => {
  const out = {}
  for (const endpoint of endpoints) {
    const of = (server) =>
      measurements
        .filter((m) => m.phase === phase && m.endpoint === endpoint && m.server === server && m.seed === seed)
        .sort((a, b) => a.round - b.round)
    const byServer = {}
    for (const server of serverKeys) {
      const ms = of(server)
      if (ms.length === 0) continue
      const perRound = ms.map((m) => {
        const peer = of("C").find((x) => x.round === m.round)
        const floor = of("B").find((x) => x.round === m.round)
        return {
          round: m.round,
          ...m.result,
          cpuUsPerReq: m.result.serverCpuS === null ? null : (m.result.serverCpuS * 1e6) / m.result.requests,
          ...("dbCpuS" in m.result
            ? { dbCpuUsPerReq: m.result.dbCpuS === null ? null : (m.result.dbCpuS * 1e6) / m.result.requests }
            : {}),
          vsFastify: ratio(m.result.rps, peer?.result.rps),
          vsFloor: ratio(m.result.rps, floor?.result.rps),
          p99VsFastify: ratio(m.result.p99Ms, peer?.result.p99Ms),
          p99VsFloor: ratio(m.result.p99Ms, floor?.result.p99Ms)
        }
      })
      const m = {
        rps: mean(perRound.map((r) => r.rps)),
        p50Ms: mean(perRound.map((r) => r.p50Ms)),
        p99Ms: mean(perRound.map((r) => r.p99Ms)),
        non2xx: sum(perRound.map((r) => r.non2xx)),
        socketErrors: sum(perRound.map((r) => r.socketErrors)),
        requests: sum(perRound.map((r) => r.requests)),
        serverCpuS: mean(perRound.map((r) => r.serverCpuS)),
        cpuUsPerReq: mean(perRound.map((r) => r.cpuUsPerReq)),
        ...("dbCpuS" in perRound[0]
          ? {
              dbCpuS: mean(perRound.map((r) => r.dbCpuS)),
              dbCpuUsPerReq: mean(perRound.map((r) => r.dbCpuUsPerReq))
            }
          : {}),
        ...("walMiB" in perRound[0] ? { walMiB: Math.max(...perRound.map((r) => r.walMiB ?? 0)) } : {}),
        loadgenCpuS: mean(perRound.map((r) => r.loadgenCpuS)),
        rssMiB: mean(perRound.map((r) => r.rssMiB))
      }
      byServer[server] = { rounds: perRound, mean: m }
    }
    // Only ratios measured side by side mean something: the mean row's ratio is the mean of the
    // per-round ratios, over the rounds where both servers were measured.
    for (const server of Object.keys(byServer)) {
      const m = byServer[server].mean
      const rs = byServer[server].rounds
      m.vsFastify = mean(rs.map((r) => r.vsFastify))
      m.vsFloor = mean(rs.map((r) => r.vsFloor))
      m.p99VsFastify = mean(rs.map((r) => r.p99VsFastify))
      m.p99VsFloor = mean(rs.map((r) => r.p99VsFloor))
    }
    out[endpoint] = { label: ENDPOINTS[endpoint].label, servers: byServer }
  }
  return out
}

/** `a / b / c` of one figure for the servers present, in the order A, B, C. */
const perServer = (e, pick, format) =>
  ["A", "B", "C"]
    .filter((k) => e.servers[k])
    .map((k) => format(pick(e.servers[k].mean)))
    .join(" / ")

/**
 * The table a reader starts with: one row per endpoint, Taskwright's throughput and its ratios to
 * Fastify and the floor (mean of the rounds, their range in brackets), then p99, CPU per request
 * and RSS of each server. `flags[server]` marks a failed check.
 */
export const summaryTable = (summary, names, flags = {}, { db = false, wal = false } = {}) => {
  const present = ["A", "B", "C"].filter((k) => Object.values(summary).some((e) => e.servers[k]))
  const who = present.map((k) => `${names[k].split(" ")[1]}${flags[k] ? " ⚠" : ""}`).join(" / ")
  const rows = Object.entries(summary).map(([endpoint, e]) => {
    const a = e.servers.A
    return [
      e.label,
      perServer(e, (m) => m.rps, fmt.int),
      a
        ? ratioRange(
            a.mean.vsFastify,
            a.rounds.map((r) => r.vsFastify)
          )
        : "–",
      a
        ? ratioRange(
            a.mean.vsFloor,
            a.rounds.map((r) => r.vsFloor)
          )
        : "–",
      perServer(e, (m) => m.p99Ms, fmt.ms),
      perServer(e, (m) => m.cpuUsPerReq, fmt.us),
      ...(db ? [perServer(e, (m) => m.dbCpuUsPerReq, fmt.us)] : []),
      perServer(e, (m) => m.rssMiB, fmt.mib),
      ...(wal ? [WRITES.has(endpoint) ? perServer(e, (m) => m.walMiB, fmt.mib) : ""] : []),
      perServer(e, (m) => m.non2xx + m.socketErrors, fmt.int)
    ]
  })
  return table(
    [
      "endpoint",
      `req/s (${who})`,
      "Taskwright vs Fastify",
      "Taskwright vs floor",
      "p99 ms",
      "CPU µs/req",
      ...(db ? ["DB CPU µs/req"] : []),
      "RSS MiB",
      ...(wal ? ["WAL MiB"] : []),
      "non-2xx"
    ],
    rows
  )
}

const throughputRow = (name, round, r, flag, { db, wal }) => [
  name,
  round,
  `${fmt.int(r.rps)}${flag}`,
  fmt.ms(r.p50Ms),
  fmt.ms(r.p99Ms),
  `${fmt.int(r.non2xx)}${r.socketErrors ? ` (+${r.socketErrors} sock)` : ""}`,
  fmt.s(r.serverCpuS),
  fmt.us(r.cpuUsPerReq),
  ...(db ? [fmt.s(r.dbCpuS), fmt.us(r.dbCpuUsPerReq)] : []),
  fmt.s(r.loadgenCpuS),
  fmt.mib(r.rssMiB),
  ...(wal ? [fmt.mib(r.walMiB)] : []),
  fmt.ratio(r.vsFastify),
  fmt.ratio(r.vsFloor)
]

const header = ({ db, wal }) => [
  "server",
  "round",
  "req/s",
  "p50 ms",
  "p99 ms",
  "non-2xx",
  "server CPU s",
  "CPU µs/req",
  ...(db ? ["DB CPU s", "DB CPU µs/req"] : []),
  "loadgen CPU s",
  "RSS MiB",
  ...(wal ? ["WAL MiB"] : []),
  "vs Fastify",
  "vs floor"
]

/**
 * Markdown for one summarised phase: a table per endpoint, every round and the mean.
 * `flags[server]` marks failed checks; `db` adds the database's CPU columns, `wal` the log's size
 * (write endpoints).
 */
export const throughputTables = (summary, names, flags = {}, { db = false, wal = false } = {}) => {
  const parts = []
  for (const [endpoint, e] of Object.entries(summary)) {
    const opts = { db, wal: wal && WRITES.has(endpoint) }
    const rows = []
    for (const [server, s] of Object.entries(e.servers)) {
      const flag = flags[server] ? " ⚠" : ""
      for (const r of s.rounds) rows.push(throughputRow(names[server], String(r.round), r, flag, opts))
      rows.push(throughputRow(`**${names[server]}**`, "**mean**", s.mean, flag, opts))
    }
    parts.push(`#### ${e.label}\n\n${table(header(opts), rows)}`)
  }
  return parts.join("\n\n")
}

/** Which code cache a start of Taskwright's read, when not its own from an earlier start. */
const cacheNote = (state) => (state === "cold" ? " (cold)" : state === "build" ? " (build's cache)" : "")

export const startupTable = (starts, names) => {
  const rows = []
  for (const [server, list] of Object.entries(starts)) {
    if (list.length === 0) continue
    rows.push([
      names[server],
      list.map((s) => (s.error ? "failed" : `${fmt.int(s.startupMs)}${cacheNote(s.codeCache)}`)).join(" / "),
      fmt.int(mean(list.map((s) => s.startupMs))),
      fmt.mib(mean(list.map((s) => s.startRssMiB))),
      list
        .filter((s) => s.idleRssMiB != null)
        .map((s) => `${fmt.mib(s.idleRssMiB)}${cacheNote(s.codeCache)}`)
        .join(" / ") || "–",
      list.map((s) => (s.stop ? (s.stop.clean ? "clean" : `UNCLEAN (${describeStop(s.stop)})`) : "–")).join(" / ")
    ])
  }
  return table(
    [
      "server",
      "start-up ms per start",
      "start-up ms mean",
      "RSS MiB 0.5 s after start",
      "idle RSS MiB per start (12 s idle)",
      "SIGTERM shutdown"
    ],
    rows
  )
}

/** The middle value (the mean of the middle two for an even count); null for none. */
const median = (xs) => {
  const ys = finite(xs).sort((a, b) => a - b)
  if (ys.length === 0) return null
  const m = ys.length >> 1
  return ys.length % 2 === 1 ? ys[m] : (ys[m - 1] + ys[m]) / 2
}

/** The servers of `names` that were started, in the order of `names`. */
const startedKeys = (restarts, names) => Object.keys(names).filter((k) => restarts.some((r) => r.server === k))

/**
 * Per server of `names` that was started: each start's time in ms (null where it failed), the
 * median, and the fastest and slowest.
 */
export const restartSummary = (restarts, names) =>
  Object.fromEntries(
    startedKeys(restarts, names).map((k) => {
      const mine = restarts.filter((r) => r.server === k)
      const times = finite(mine.map((r) => r.startupMs))
      return [
        k,
        {
          startsMs: mine.map((r) => r.startupMs ?? null),
          medianMs: median(times),
          minMs: times.length > 0 ? Math.min(...times) : null,
          maxMs: times.length > 0 ? Math.max(...times) : null,
          failed: mine.filter((r) => r.error !== undefined).length
        }
      ]
    })
  )

/** The alternating starts: every start in order, the median, the range, and the median over Fastify's. */
export const restartTable = (restarts, names) => {
  const summary = restartSummary(restarts, names)
  const peer = summary.C?.medianMs ?? null
  const rows = Object.keys(summary).map((k) => {
    const s = summary[k]
    return [
      names[k],
      restarts
        .filter((r) => r.server === k)
        .map((r) => (r.startupMs === undefined ? "failed" : `${fmt.int(r.startupMs)}${cacheNote(r.codeCache)}`))
        .join(" / "),
      fmt.int(s.medianMs),
      `${fmt.int(s.minMs)}–${fmt.int(s.maxMs)}`,
      peer === null || s.medianMs === null ? "–" : fmt.ratio(s.medianMs / peer)
    ]
  })
  return table(["server", "start-up ms per start", "median ms", "range ms", "median vs Fastify's"], rows)
}

const describeStop = (s) =>
  [
    s.killed ? "SIGKILLed" : null,
    s.leftovers ? "left processes" : null,
    s.code !== 0 ? `exit ${s.code ?? s.signal}` : null
  ]
    .filter(Boolean)
    .join(", ")

/**
 * The list at scale, one connection: per dataset (`{ label, list }`, `list` a summarised
 * endpoint) and server, p50 and p99 (and p99 per round), req/s and CPU per request.
 */
export const largeTable = (datasets, names, flags = {}, { db = false } = {}) => {
  const rows = []
  for (const d of datasets) {
    for (const [server, s] of Object.entries(d.list.servers)) {
      rows.push([
        d.label,
        `${names[server]}${flags[server] ? " ⚠" : ""}`,
        fmt.ms(s.mean.p50Ms),
        fmt.ms(s.mean.p99Ms),
        s.rounds.map((r) => fmt.ms(r.p99Ms)).join(" / "),
        fmt.int(s.mean.rps),
        fmt.us(s.mean.cpuUsPerReq),
        ...(db ? [fmt.us(s.mean.dbCpuUsPerReq)] : []),
        fmt.int(s.mean.non2xx + s.mean.socketErrors)
      ])
    }
  }
  return table(
    [
      "tasks",
      "server",
      "p50 ms",
      "p99 ms",
      "p99 ms per round",
      "req/s",
      "CPU µs/req",
      ...(db ? ["DB CPU µs/req"] : []),
      "non-2xx"
    ],
    rows
  )
}

/** The plans of the list query per dataset, as fenced blocks. */
export const explainBlocks = (datasets, { pg, listSql }) => {
  const out = [
    `Plan of the list query (Taskwright's, and the peers'), for the bench user and \`status = 'todo'\`, \`LIMIT 50 OFFSET 0\`:`,
    "",
    "```sql",
    listSql,
    "```"
  ]
  for (const d of datasets) {
    out.push("")
    if (!d.plan) continue
    if (d.plan.error) {
      out.push(`${d.label}: EXPLAIN failed: ${d.plan.error}`)
      continue
    }
    if (pg) {
      out.push(`${d.label}, custom plan (\`EXPLAIN (ANALYZE, BUFFERS)\`, the values bound):`)
      out.push("", "```", d.plan.custom, "```", "")
      out.push(`${d.label}, generic plan (\`plan_cache_mode = force_generic_plan\`):`)
      out.push("", "```", d.plan.generic, "```")
    } else {
      out.push(
        `${d.label} (\`EXPLAIN QUERY PLAN\`; the query alone in process, median of 200: ${fmt.ms(d.plan.medianMs)} ms):`
      )
      out.push("", "```", d.plan.text, "```")
    }
  }
  return out.join("\n")
}

export { fmt, mean }
