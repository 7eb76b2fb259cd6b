/**
 * Summaries (means and ratios) and the markdown tables.
 */
import { ENDPOINTS } from "./loadgen.mjs"

const mean = (xs) => {
  const ys = xs.filter((x) => typeof x === "number" && Number.isFinite(x))
  return ys.length === 0 ? null : ys.reduce((a, b) => a + b, 0) / ys.length
}
const sum = (xs) => xs.reduce((a, b) => a + (b ?? 0), 0)

const fmt = {
  int: (x) => (x === null || x === undefined ? "–" : Math.round(x).toLocaleString("en-US")),
  ms: (x) => (x === null || x === undefined ? "–" : x < 10 ? x.toFixed(2) : x.toFixed(1)),
  s: (x) => (x === null || x === undefined ? "–" : x.toFixed(2)),
  mib: (x) => (x === null || x === undefined ? "–" : x.toFixed(0)),
  ratio: (x) => (x === null || x === undefined || !Number.isFinite(x) ? "–" : `${x.toFixed(2)}×`),
  us: (x) => (x === null || x === undefined ? "–" : x.toFixed(0))
}

const table = (header, rows) => {
  const lines = [`| ${header.join(" | ")} |`, `|${header.map((_h, i) => (i < 2 ? "---" : "---:")).join("|")}|`]
  for (const r of rows) lines.push(`| ${r.join(" | ")} |`)
  return lines.join("\n")
}

const ratio = (a, b) => (a == null || b == null || b === 0 ? null : a / b)

/**
 * `measurements`: [{ phase, round, server, tasks, endpoint, result }] where result has rps, p50Ms,
 * p99Ms, non2xx, socketErrors, serverCpuS, loadgenCpuS, rssMiB, requests.
 * Answers per endpoint and server: each round with its ratios, and the mean.
 */
export const summarise = (measurements, serverKeys, { phase, tasks, endpoints }) => {
  const out = {}
  for (const endpoint of endpoints) {
    const of = (server) =>
      measurements
        .filter((m) => m.phase === phase && m.endpoint === endpoint && m.server === server && m.tasks === tasks)
        .sort((a, b) => a.round - b.round)
    const rounds = [...new Set(measurements.filter((m) => m.phase === phase).map((m) => m.round))].sort((a, b) => a - b)
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
    out[endpoint] = { label: ENDPOINTS[endpoint].label, rounds, servers: byServer }
  }
  return out
}

const throughputRow = (name, round, r, flag, db) => [
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
  fmt.ratio(r.vsFastify),
  fmt.ratio(r.vsFloor)
]

const HEADER = [
  "server",
  "round",
  "req/s",
  "p50 ms",
  "p99 ms",
  "non-2xx",
  "server CPU s",
  "CPU µs/req",
  "loadgen CPU s",
  "RSS MiB",
  "vs Fastify",
  "vs floor"
]

/** With `db` (PostgreSQL), the database backends' CPU follows the server's. */
const header = (db) => (db ? [...HEADER.slice(0, 8), "DB CPU s", "DB CPU µs/req", ...HEADER.slice(8)] : HEADER)

/**
 * Markdown for one summarised phase: a table per endpoint. `flags[server]` marks failed checks;
 * `db` adds the database's CPU columns.
 */
export const throughputTables = (summary, names, flags = {}, { db = false } = {}) => {
  const parts = []
  for (const [, e] of Object.entries(summary)) {
    const rows = []
    for (const [server, s] of Object.entries(e.servers)) {
      const flag = flags[server] ? " ⚠" : ""
      for (const r of s.rounds) rows.push(throughputRow(names[server], String(r.round), r, flag, db))
      rows.push(throughputRow(`**${names[server]}**`, "**mean**", s.mean, flag, db))
    }
    parts.push(`### ${e.label}\n\n${table(header(db), rows)}`)
  }
  return parts.join("\n\n")
}

export const startupTable = (starts, names) => {
  const rows = []
  for (const [server, list] of Object.entries(starts)) {
    if (list.length === 0) continue
    rows.push([
      names[server],
      list.map((s) => (s.error ? "failed" : fmt.int(s.startupMs))).join(" / "),
      fmt.int(mean(list.map((s) => s.startupMs))),
      fmt.mib(mean(list.map((s) => s.idleRssMiB))),
      list.map((s) => (s.stop ? (s.stop.clean ? "clean" : `UNCLEAN (${describeStop(s.stop)})`) : "–")).join(" / ")
    ])
  }
  return table(["server", "start-up ms per start", "start-up ms mean", "idle RSS MiB", "SIGTERM shutdown"], rows)
}

const describeStop = (s) =>
  [
    s.killed ? "SIGKILLed" : null,
    s.leftovers ? "left processes" : null,
    s.code !== 0 ? `exit ${s.code ?? s.signal}` : null
  ]
    .filter(Boolean)
    .join(", ")

/** The large-table run: list at 1 connection, growth from the small to the large seed. */
export const largeTable = (small, large, names, sizes, flags = {}, { db = false } = {}) => {
  const rows = []
  const servers = new Set([...Object.keys(small.servers), ...Object.keys(large.servers)])
  for (const server of servers) {
    for (const [label, s] of [
      [sizes.small, small.servers[server]],
      [sizes.large, large.servers[server]]
    ]) {
      if (!s) continue
      rows.push([
        names[server],
        label,
        s.rounds.map((r) => fmt.ms(r.p99Ms)).join(" / "),
        `${fmt.int(s.mean.rps)}${flags[server] ? " ⚠" : ""}`,
        fmt.ms(s.mean.p50Ms),
        fmt.ms(s.mean.p99Ms),
        fmt.int(s.mean.non2xx),
        fmt.us(s.mean.cpuUsPerReq),
        ...(db ? [fmt.us(s.mean.dbCpuUsPerReq)] : []),
        fmt.ratio(s.mean.p99VsFastify),
        fmt.ratio(s.mean.p99VsFloor)
      ])
    }
    const a = small.servers[server]?.mean
    const b = large.servers[server]?.mean
    if (a && b) {
      rows.push([
        names[server],
        "growth ×",
        "",
        fmt.ratio(b.rps / a.rps),
        fmt.ratio(b.p50Ms / a.p50Ms),
        fmt.ratio(b.p99Ms / a.p99Ms),
        "",
        fmt.ratio(b.cpuUsPerReq / a.cpuUsPerReq),
        ...(db ? [fmt.ratio(b.dbCpuUsPerReq / a.dbCpuUsPerReq)] : []),
        "",
        ""
      ])
    }
  }
  return table(
    [
      "server",
      "tasks",
      "p99 ms per round",
      "req/s",
      "p50 ms",
      "p99 ms",
      "non-2xx",
      "CPU µs/req",
      ...(db ? ["DB CPU µs/req"] : []),
      "p99 vs Fastify",
      "p99 vs floor"
    ],
    rows
  )
}

export { fmt, mean }
