/**
 * Runs one autocannon measurement in its own process (so its CPU time is measured apart from the
 * runner's) and prints one `BENCHJSON {...}` line. Spawned by bench/lib/loadgen.mjs.
 */
import { readFileSync } from "node:fs"
import autocannon from "autocannon"

const config = JSON.parse(readFileSync(process.argv[2], "utf8"))
const { url, connections, seconds, secret, ids, endpointSpec } = config

const options = {
  url,
  connections,
  duration: seconds,
  timeout: 5,
  method: endpointSpec.method,
  headers: { authorization: `Bearer ${secret}` }
}
if (endpointSpec.body !== undefined) {
  options.body = endpointSpec.body
  options.headers["content-type"] = "application/json"
}
if (ids) {
  let i = 0
  options.requests = [
    {
      setupRequest: (req) => {
        i = i === ids.length - 1 ? 0 : i + 1
        req.path = `/api/tasks/${ids[i]}`
        return req
      }
    }
  ]
} else {
  options.url = `${url}${endpointSpec.path}`
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
