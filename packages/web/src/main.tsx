import { render } from "preact"
import { App, prefetchMe } from "./app.js"
import { prefetchTasks } from "./boardData.js"
import { labels } from "./resources.js"
import "./styles.css"

// The first reads go out before the first drawing, each taking the answer the browser preloaded
// with the page (packages/server/src/WebAssets.ts): who is signed in, and on the board its tasks,
// asked for with the session check rather than after it.
prefetchMe()
if (location.pathname === "/") {
  prefetchTasks()
  void labels.reload()
}

const root = document.getElementById("app")
if (root !== null) render(<App />, root)
