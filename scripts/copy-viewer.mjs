// Copies the API reference viewer (Scalar's standalone bundle, from the `@scalar/api-reference`
// package, a build-time dependency) into a build's `dist/viewer/`, with its version, so the server
// and the bundled CLI serve it from their own files and do not install the package (and its 150 MB
// of dependencies, which only its own build uses) beside themselves. Called by the tsup builds.
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join, resolve } from "node:path"

const PACKAGE = "@scalar/api-reference"

/** Copies the viewer into `<distDir>/viewer/`. */
export const copyViewer = (distDir) => {
  // The package's entry point, then up to its root (its exports do not name its package.json).
  let dir = dirname(createRequire(join(process.cwd(), "package.json")).resolve(PACKAGE))
  const nameAt = (d) =>
    existsSync(join(d, "package.json")) ? JSON.parse(readFileSync(join(d, "package.json"), "utf8")).name : undefined
  while (nameAt(dir) !== PACKAGE) {
    const parent = dirname(dir)
    if (parent === dir) throw new Error(`${PACKAGE} is not installed`)
    dir = parent
  }
  const { version, license } = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"))
  const out = resolve(distDir, "viewer")
  mkdirSync(out, { recursive: true })
  copyFileSync(join(dir, "dist", "browser", "standalone.js"), join(out, "scalar.js"))
  writeFileSync(
    join(out, "viewer.json"),
    `${JSON.stringify({ package: PACKAGE, version, license, file: "scalar.js" }, null, 2)}\n`
  )
}

if (import.meta.url === `file://${process.argv[1]}`) copyViewer(process.argv[2] ?? "dist")
