// Taskwright inside a plain Node program: no server, no Effect. One engine on a SQLite file,
// typed operations as a user, a refused input caught as a TaskwrightError, and a close() after
// which the process exits.
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createTaskwright, TaskwrightError } from "@taskwright/embedded"

const dir = await mkdtemp(join(tmpdir(), "taskwright-example-"))
const tw = await createTaskwright({ database: join(dir, "taskwright.db") })

const ada = await tw.users.create({ email: "ada@example.com", name: "Ada" })
const me = tw.as(ada.id)

const task = await me.tasks.create({ title: "Try Taskwright embedded", priority: "high", labels: ["docs"] })
console.log("created", task.id, task.title, task.status)

await me.tasks.update(task.id, { status: "in_progress" })
const board = await me.tasks.list({ status: "in_progress" })
console.log(
  "in progress",
  board.total,
  board.tasks.map((t) => t.title)
)

try {
  await me.tasks.create({ title: "" })
} catch (error) {
  if (!(error instanceof TaskwrightError)) throw error
  console.log("refused", error.status, error.code, JSON.stringify(error.details))
}

// Another user cannot see Ada's task: ownership is enforced as over HTTP.
const bob = await tw.users.create({ email: "bob@example.com", name: "Bob" })
const seen = await tw
  .as(bob.email)
  .tasks.get(task.id)
  .catch((error: unknown) => (error instanceof TaskwrightError ? error.code : "unexpected"))
console.log("bob reading ada's task", seen)

await tw.close()
await rm(dir, { recursive: true, force: true })
console.log("closed")
