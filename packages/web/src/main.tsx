import { render } from "preact"
import { App } from "./app.js"
import { prefetchTasks } from "./boardData.js"
import { labels } from "./resources.js"
import "./styles.css"

// The board's data is asked for with the session check, not after it: one round trip less
// before the first drawing of a board of a thousand tasks.
if (location.pathname === "/") {
  prefetchTasks()
  void labels.reload()
}

const root = document.getElementById("app")
if (root !== null) render(<App />, root)
