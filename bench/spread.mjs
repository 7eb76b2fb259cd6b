#!/usr/bin/env node
/**
 * The spread over several runs of `bench/run.mjs`: for each store and endpoint, Taskwright's
 * req/s and p99 over Fastify's in each run (the mean of the run's rounds), and their range.
 *
 *   node bench/spread.mjs bench/results/run1.json bench/results/run2.json bench/results/run3.json
 *
 * Prints markdown; a run that lacks a store or an endpoint shows a dash there.
 */
import { readFileSync } from "node:fs"
import { basename } from "node:path"

const files = process.argv.slice(2)
if (files.length === 0) {
  console.error("usage: node bench/spread.mjs <result.json> ...")
  process.exit(2)
}
const runs = files.map((file) => ({ name: basename(file, ".json"), result: JSON.parse(readFileSync(file, "utf8")) }))

const ratio = (x) => (typeof x === "number" && Number.isFinite(x) ? `${x.toFixed(2)}×` : "–")
const mean = (xs) => (xs.length === 0 ? undefined : xs.reduce((a, b) => a + b, 0) / xs.length)
const range = (xs) => (xs.length === 0 ? "–" : `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}×`)

/** Taskwright's per-round ratios of one endpoint in one run: req/s and p99 over Fastify's. */
const ratios = (store, endpoint) => {
  const rounds = store?.summary?.main?.[endpoint]?.servers?.A?.rounds ?? []
  const rps = rounds.map((r) => r.vsFastify).filter(Number.isFinite)
  const p99 = rounds.map((r) => r.p99VsFastify).filter(Number.isFinite)
  return { rps: mean(rps), p99: mean(p99) }
}

const out = []
for (const storeName of ["sqlite", "pg"]) {
  // A run of both stores holds each under `stores`; a run of one store (`BENCH_STORE=sqlite`) is that store.
  const stores = runs.map(
    (run) => run.result.stores?.[storeName] ?? (run.result.store === storeName ? run.result : undefined)
  )
  if (stores.every((s) => s === undefined)) continue
  const endpoints = new Map()
  for (const s of stores) for (const [key, e] of Object.entries(s?.summary?.main ?? {})) endpoints.set(key, e.label)
  out.push(`### ${storeName === "pg" ? "PostgreSQL" : "SQLite"}: Taskwright over Fastify, per run`)
  out.push("")
  out.push(
    `req/s ratio (> 1 is faster) and p99 ratio (< 1 is a shorter tail), each the mean of the run's rounds; runs: ${runs
      .map((r, i) => `${i + 1} \`${r.name}\` (build ${stores[i]?.taskwright?.build ?? "?"})`)
      .join(", ")}.`
  )
  out.push("")
  out.push(
    `| endpoint | ${runs.map((_, i) => `req/s run ${i + 1}`).join(" | ")} | req/s range | ${runs.map((_, i) => `p99 run ${i + 1}`).join(" | ")} | p99 range |`
  )
  out.push(`|---|${runs.map(() => "---:").join("|")}|---:|${runs.map(() => "---:").join("|")}|---:|`)
  for (const [key, label] of endpoints) {
    const each = stores.map((s) => ratios(s, key))
    const rps = each.map((e) => e.rps).filter((x) => x !== undefined)
    const p99 = each.map((e) => e.p99).filter((x) => x !== undefined)
    out.push(
      `| ${label} | ${each.map((e) => ratio(e.rps)).join(" | ")} | ${range(rps)} | ${each.map((e) => ratio(e.p99)).join(" | ")} | ${range(p99)} |`
    )
  }
  out.push("")
}
console.log(out.join("\n"))
