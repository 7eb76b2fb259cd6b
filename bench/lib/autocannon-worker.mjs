/**
 * Runs one autocannon measurement in its own process (so its CPU time is measured apart from the
 * runner's) and prints one `BENCHJSON {...}` line. Spawned by bench/lib/loadgen.mjs.
 */
import { readFileSync } from "node:fs"
import autocannon from "autocannon"

const { url, connections, seconds, plan } = JSON.parse(readFileSync(process.argv[2], "utf8"))

const options = { url, connections, duration: seconds, timeout: 5, headers: plan.headers }
if (plan.sequence) {
  // DELETE: every id once, from the sequence's start.
  let id = plan.sequence.from - 1
  options.requests = [
    {
      setupRequest: (req) => {
        id++
        req.method = "DELETE"
        req.path = `/api/tasks/${id}`
        return req
      }
    }
  ]
} else {
  let i = (plan.start ?? 0) - 1
  options.requests = [
    {
      setupRequest: (req) => {
        i = i === plan.requests.length - 1 ? 0 : i + 1
        const r = plan.requests[i]
        req.method = r.method
        req.path = r.path
        if (r.body !== undefined) req.body = r.body
        return req
      }
    }
  ]
}

const result = await autocannon(options)
const completed = result.requests.total
console.log(
  `BENCHJSON ${JSON.stringify({
    requests: completed,
    seconds: result.duration,
    rps: completed / result.duration,
    p50Ms: result.latency.p50,
    p90Ms: result.latency.p90,
    p99Ms: result.latency.p99,
    maxMs: result.latency.max,
    non2xx: result.non2xx,
    statuses: {
      "1xx": result["1xx"],
      "2xx": result["2xx"],
      "3xx": result["3xx"],
      "4xx": result["4xx"],
      "5xx": result["5xx"]
    },
    socketErrors: result.errors,
    socketErrorDetail: { errors: result.errors, timeouts: result.timeouts }
  })}`
)
