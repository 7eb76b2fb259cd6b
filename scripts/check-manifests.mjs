#!/usr/bin/env node
// Every package's manifest against its build: each bare import of dist/*.js, *.cjs and *.d.ts is a
// declared dependency or peer dependency (a consumer installs nothing else), each declared
// dependency is imported somewhere (nothing installed for nothing), and the fields a user sees
// (engines, repository, license, a README and a LICENSE file) are there. Run after `npm run build`.
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { builtinModules } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const builtins = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]))

/** The package a bare specifier names: `@scope/name/sub` → `@scope/name`. */
const packageOf = (specifier) => {
  const parts = specifier.split("/")
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]
}

// dist/viewer/ is the API reference's browser bundle, copied in at build time and served to
// browsers: its strings name packages (code samples) that no Node consumer ever imports.
const filesUnder = (dir) =>
  readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(c?js|d\.ts)$/.test(e.name))
    .filter((e) => !(e.parentPath ?? e.path).startsWith(join(dir, "viewer")))
    .map((e) => join(e.parentPath ?? e.path, e.name))

const importsOf = (file) => {
  const text = readFileSync(file, "utf8")
  const out = new Set()
  const patterns = [
    /\bfrom\s*["']([^"'./][^"']*)["']/g,
    /\bimport\s*\(\s*["']([^"'./][^"']*)["']\s*\)/g,
    /\bimport\s*["']([^"'./][^"']*)["']/g,
    /\brequire\(\s*["']([^"'./][^"']*)["']\s*\)/g
  ]
  for (const pattern of patterns) for (const m of text.matchAll(pattern)) out.add(m[1])
  return [...out].filter((s) => packageName.test(s) && !builtins.has(s) && !s.startsWith("node:"))
}

/** A package name, with an optional subpath. */
const packageName = /^(@[a-z0-9][\w.-]*\/)?[a-z0-9][\w.-]*(\/[\w./-]*)?$/

/** Whether the build names `dep` in a string (a package whose files it resolves and serves at run time). */
const namesPackage = (files, dep) => files.some((file) => readFileSync(file, "utf8").includes(`"${dep}`))

/**
 * Imports a package may make without declaring them: the CLI's bundle keeps its native drivers
 * external and `pg` asks for `pg-native` only when a user opts in to it.
 */
const optionalImports = new Set(["pg-native"])

let problems = 0
const problem = (pkg, text) => {
  problems += 1
  console.error(`${pkg}: ${text}`)
}

for (const name of readdirSync(join(root, "packages"))) {
  const dir = join(root, "packages", name)
  const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"))
  if (manifest.private === true) continue
  const pkg = manifest.name
  for (const field of ["engines", "repository", "license", "description"]) {
    if (manifest[field] === undefined) problem(pkg, `no "${field}" in package.json`)
  }
  if (manifest.repository?.directory !== `packages/${name}`)
    problem(pkg, `repository.directory is not packages/${name}`)
  if (manifest.engines?.node !== ">=20") problem(pkg, 'engines.node is not ">=20"')
  for (const file of ["README.md", "LICENSE"]) {
    if (!existsSync(join(dir, file))) problem(pkg, `no ${file}`)
  }
  const declared = new Set([
    ...Object.keys(manifest.dependencies ?? {}),
    ...Object.keys(manifest.peerDependencies ?? {}),
    ...Object.keys(manifest.optionalDependencies ?? {})
  ])
  if (!existsSync(join(dir, "dist"))) {
    problem(pkg, "no dist/: build first")
    continue
  }
  // The web board's build is browser assets, not modules a consumer imports.
  const assets = manifest.exports?.["."] === undefined && manifest.main === undefined && manifest.bin === undefined
  const files = assets ? [] : filesUnder(join(dir, "dist"))
  const used = new Set()
  for (const file of files) {
    for (const specifier of importsOf(file)) {
      const dep = packageOf(specifier)
      used.add(dep)
      if (dep !== pkg && !declared.has(dep) && !optionalImports.has(dep)) {
        problem(pkg, `${file.slice(dir.length + 1)} imports ${specifier}, which is not a dependency or peer dependency`)
      }
    }
  }
  for (const dep of Object.keys(manifest.dependencies ?? {})) {
    if (!used.has(dep) && !namesPackage(files, dep)) problem(pkg, `depends on ${dep}, which its build never imports`)
  }
}

if (problems > 0) {
  console.error(`${problems} problem(s) in the package manifests`)
  process.exit(1)
}
console.log(
  "package manifests: every import declared, every dependency used, engines/repository/license/README/LICENSE present"
)
