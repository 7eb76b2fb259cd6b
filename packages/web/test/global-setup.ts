/**
 * Builds the app before the browser suites when `dist/` is missing or older than a source file,
 * so `npx vitest run packages/web` tests what the sources say (the root `npm test` builds first).
 */
import { existsSync, readdirSync, statSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "vite"

const root = fileURLToPath(new URL("..", import.meta.url))

const newest = (path: string): number =>
  statSync(path).isDirectory()
    ? Math.max(0, ...readdirSync(path).map((name) => newest(join(path, name))))
    : statSync(path).mtimeMs

export default async function setup(): Promise<void> {
  const index = join(root, "dist", "index.html")
  const sources = Math.max(
    newest(join(root, "src")),
    newest(join(root, "public")),
    newest(join(root, "index.html")),
    newest(join(root, "vite.config.ts"))
  )
  if (existsSync(index) && statSync(index).mtimeMs >= sources) return
  await build({ root, configFile: join(root, "vite.config.ts"), mode: "production", logLevel: "warn" })
}
