import { render } from "preact"
import { App, prefetchMe } from "./app.js"
import { prefetchTasks } from "./boardData.js"
import { labels } from "./resources.js"
import "./styles.css"

/** How long the first drawing waits for the first reads; then the app draws its own loading states. */
const FIRST_DRAWING_WAIT_MS = 500

// The first reads go out before the first drawing, each taking the answer the browser preloaded
// with the page (packages/server/src/WebAssets.ts): who is signed in, and on the board its tasks
// and labels, asked for with the session check rather than after it.
const reads: Array<Promise<unknown>> = [prefetchMe()]
if (location.pathname === "/") reads.push(prefetchTasks(), labels.reload())

// The first drawing waits for those answers (index.html says "Loading" meanwhile), so the page is
// laid out and painted once with its content: not once with the header and a loading state, then
// again, nor with the signed-in user's effects (the events socket) run between the two.
const root = document.getElementById("app")
const waited = new Promise((done) => setTimeout(done, FIRST_DRAWING_WAIT_MS))
void Promise.race([Promise.allSettled(reads), waited]).then(() => {
  if (root === null) return
  // The app draws its own loading state, if it still waits.
  root.replaceChildren()
  render(<App />, root)
})
