// A script using the typed client against a running server (`taskwright serve`):
//   TASKWRIGHT_URL=http://127.0.0.1:3000 TASKWRIGHT_API_KEY=$(cat data/admin-key.txt) node dist/client-script/index.js
// Inputs and results are the API's JSON; every failure is a TaskwrightError with the envelope's
// status, code, message and details.
import { makeClient, TaskwrightError } from "@taskwright/api"

const client = makeClient({
  baseUrl: process.env.TASKWRIGHT_URL ?? "http://127.0.0.1:3000",
  apiKey: process.env.TASKWRIGHT_API_KEY
})

console.log("health", (await client.system.health()).status)
const me = await client.auth.me()
console.log("signed in as", me.user.email, "with", me.scopes.join(","))

const label = await client.labels.create({ name: `example-${Date.now()}`, color: "#3366ff" })
const task = await client.tasks.create({ title: "Written by the typed client", labels: [label.name] })
console.log("created", task.id, task.title, task.labels)

const updated = await client.tasks.update(task.id, { status: "todo", priority: "urgent" })
console.log("updated", updated.status, updated.priority)

const page = await client.tasks.list({ status: "todo", limit: 10 })
console.log("todo", page.total, "of limit", page.limit)

for (const attempt of [() => client.tasks.get(2_000_000_000), () => client.tasks.create({ title: "x".repeat(501) })]) {
  try {
    await attempt()
  } catch (error) {
    if (!(error instanceof TaskwrightError)) throw error
    console.log("failed as expected", error.status, error.code, error.message)
  }
}

console.log("deleted", (await client.tasks.delete(task.id)).success)
