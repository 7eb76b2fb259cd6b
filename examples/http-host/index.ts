// A node:http application with routes of its own, serving Taskwright's whole HTTP API under
// /tasks-api beside them (the same gate, scopes, errors, /tasks-api/api/openapi.json and docs).
// With Express the same is `app.use("/tasks-api", tw.nodeHandler)`: Express strips the prefix.
// Run with --smoke to call both and exit.
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { makeClient } from "@taskwright/api"
import { createTaskwright } from "@taskwright/embedded"

const tw = await createTaskwright({ database: ":memory:" })
const taskwright = tw.http({ prefix: "/tasks-api" })

const server = createServer((req, res) => {
  if (req.url === "/tasks-api" || req.url?.startsWith("/tasks-api/")) return taskwright.nodeHandler(req, res)
  if (req.url === "/") {
    res.writeHead(200, { "content-type": "text/plain" })
    res.end("The host application's own home page\n")
    return
  }
  res.writeHead(404, { "content-type": "text/plain" })
  res.end("not found\n")
})
await new Promise<void>((resolve) => server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", resolve))
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
console.log(`listening on ${url}; the API is under ${url}/tasks-api/api`)

if (process.argv.includes("--smoke")) {
  console.log("own route", (await fetch(`${url}/`)).status, (await (await fetch(`${url}/`)).text()).trim())
  const anonymous = await fetch(`${url}/tasks-api/api/tasks`)
  console.log("api without a key", anonymous.status, await anonymous.text())
  // The typed client, pointed at the prefix, with the bootstrap admin's key.
  const client = makeClient({ baseUrl: `${url}/tasks-api`, apiKey: tw.adminKey })
  const task = await client.tasks.create({ title: "Mounted beside my routes" })
  console.log("api with a key", task.title, (await client.tasks.list()).total)
  const openapi = await fetch(`${url}/tasks-api/api/openapi.json`)
  console.log("openapi", openapi.status)
  server.close()
  server.closeAllConnections()
  await tw.close()
}
