// Taskwright inside a host process: an in-memory store, the fast HTTP path on a free port,
// and the bootstrap admin key used to create and list a task. Build first: `npm run build`.
import { mkdtemp, readFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { settingsFromEnv } from "@taskwright/core"
import { serve } from "@taskwright/server"

const dataDir = await mkdtemp(join(tmpdir(), "taskwright-example-"))
const server = await serve(settingsFromEnv(process.env, { dataDir, databaseUrl: ":memory:" }), {
  port: 0,
  host: "127.0.0.1"
})
const key = (await readFile(join(dataDir, "admin-key.txt"), "utf8")).trim()
const api = (method, path, body) =>
  fetch(server.url + path, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body)
  }).then((r) => r.json())

console.log("created", await api("POST", "/api/tasks", { title: "Try Taskwright embedded", priority: "high" }))
console.log("listed", await api("GET", "/api/tasks?limit=5"))
await server.close()
