import { defineConfig } from "tsup"
import { libraryBuild } from "../../tsup.shared.js"

// Two entries: the public API, and `./internal` for Taskwright's own packages (shared code in chunks).
export default defineConfig({ ...libraryBuild, entry: ["src/index.ts", "src/internal.ts"] })
