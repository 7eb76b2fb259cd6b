#!/usr/bin/env node
// The packages as a user gets them: `npm pack` every package, install the tarballs into empty
// directories outside the workspace (with effect and @effect/* at the peer ranges), and there:
//
// - compile the examples with `tsc --strict` and `skipLibCheck: false` against the installed
//   declarations, and run each of them (the typed-client script against `taskwright serve` started
//   from the installed CLI, the vitest suite with the installed vitest);
// - check that `npm ls effect` finds one copy of effect;
// - check the code cache the CLI's postinstall writes beside its bundle, there and in a global
//   install done as the CLI's README says;
// - check that a consumer installing only @taskwright/api has no better-sqlite3, pg or
//   @node-rs/argon2 in its node_modules, and that its code compiles and runs there.
//
// Nothing there can reach the workspace's links or TypeScript sources. Run after `npm run build`
// (and scripts/check-manifests.mjs). `--keep` leaves the directories for a look.
import { execFile, spawn } from "node:child_process"
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"

const exec = promisify(execFile)
const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const keep = process.argv.includes("--keep")
const started = Date.now()
const work = mkdtempSync(join(tmpdir(), "taskwright-pack-"))
const readJson = (file) => JSON.parse(readFileSync(file, "utf8"))
const rootManifest = readJson(join(root, "package.json"))

const step = (text) => console.log(`[pack-check ${((Date.now() - started) / 1000).toFixed(0)}s] ${text}`)
const fail = (text) => {
  console.error(`pack-check: ${text}`)
  process.exitCode = 1
}

/** A command's stdout and stderr; its output is shown when it fails. */
const runWithStderr = async (cwd, command, args, options = {}) => {
  try {
    return await exec(command, args, {
      cwd,
      maxBuffer: 64 * 1024 * 1024,
      timeout: options.timeout ?? 600_000,
      env: { ...cleanEnv, ...options.env }
    })
  } catch (error) {
    console.error(`$ ${command} ${args.join(" ")}  (in ${cwd})\n${error.stdout ?? ""}${error.stderr ?? ""}`)
    throw error
  }
}

/** A command's output; its output is shown when it fails. */
const run = async (cwd, command, args, options = {}) => (await runWithStderr(cwd, command, args, options)).stdout

/** Only what npm and node need: nothing of a surrounding npm, vitest or workspace run leaks in. */
const cleanEnv = Object.fromEntries(
  Object.entries(process.env).filter(([name]) => !/^(npm_|VITEST|NODE_OPTIONS$|INIT_CWD$)/i.test(name))
)

// ---------------------------------------------------------------------------------------------
step(`packing every package into ${work}/tarballs`)
const tarballs = join(work, "tarballs")
mkdirSync(tarballs)
const packages = readdirSync(join(root, "packages")).map((dir) => ({
  dir,
  manifest: readJson(join(root, "packages", dir, "package.json"))
}))
const tarball = new Map()
for (const { dir, manifest } of packages) {
  const [packed] = JSON.parse(
    await run(join(root, "packages", dir), "npm", ["pack", "--json", "--pack-destination", tarballs])
  )
  tarball.set(manifest.name, join(tarballs, packed.filename))
  const files = packed.files.map((f) => f.path)
  const big = packed.files.filter((f) => f.size > 1024 * 1024 && f.path.endsWith(".map"))
  if (big.length > 0) fail(`${manifest.name} ships source maps over 1 MB: ${big.map((f) => f.path).join(", ")}`)
  if (files.some((f) => f.startsWith("src/"))) fail(`${manifest.name} ships its TypeScript sources`)
  for (const needed of ["README.md", "LICENSE", "package.json"]) {
    if (!files.includes(needed)) fail(`${manifest.name}'s tarball has no ${needed}`)
  }
  console.log(
    `  ${manifest.name}: ${packed.filename}, ${(packed.size / 1024).toFixed(0)} kB packed, ${files.length} files`
  )
}

/** What a consumer's package.json says: the tarballs for our packages, the registry for the rest. */
const dependenciesOf = (ranges) =>
  Object.fromEntries(
    Object.entries(ranges).map(([name, range]) => [name, tarball.has(name) ? `file:${tarball.get(name)}` : range])
  )

const install = async (dir, dependencies) => {
  writeFileSync(
    join(dir, "package.json"),
    `${JSON.stringify(
      {
        name: "taskwright-consumer",
        private: true,
        type: "module",
        dependencies,
        // better-sqlite3 builds its addon, esbuild (vitest's) checks its binary, taskwright writes
        // its code cache.
        allowScripts: { "better-sqlite3": true, esbuild: true, taskwright: true }
      },
      null,
      2
    )}\n`
  )
  // Our packages depend on each other at 0.1.0, which only the tarballs provide.
  await run(dir, "npm", ["install", "--no-audit", "--no-fund", "--no-package-lock", "--loglevel=error"])
}

/**
 * The installed CLI's code cache (its postinstall, scripts/prime-code-cache.mjs): one file beside
 * the bundle, owned as the bundle is and writable by its owner alone, or a first start compiles.
 */
const checkInstallCache = (cliDir) => {
  const dist = join(cliDir, "dist")
  const caches = readdirSync(dist).filter((name) => name.startsWith("cli-") && name.endsWith(".v8"))
  if (caches.length !== 1) return fail(`expected one code cache in ${dist} after install, found ${caches.length}`)
  const cache = statSync(join(dist, caches[0]))
  if ((cache.mode & 0o777) !== 0o644 || cache.uid !== statSync(join(dist, "cli.cjs")).uid || cache.size < 500_000)
    return fail(`the installed code cache ${caches[0]}: mode ${(cache.mode & 0o777).toString(8)}, ${cache.size} bytes`)
  console.log(`  ${caches[0]}: ${cache.size} bytes, 0644`)
}

// ---------------------------------------------------------------------------------------------
// The full consumer: every package, the examples' dependencies, TypeScript.
const consumer = join(work, "consumer")
mkdirSync(consumer)
const examplesDir = join(root, "examples")
const examples = readdirSync(examplesDir).filter((name) => existsSync(join(examplesDir, name, "package.json")))
const wanted = {
  typescript: rootManifest.devDependencies.typescript,
  "@types/node": rootManifest.devDependencies["@types/node"]
}
for (const name of examples) {
  const manifest = readJson(join(examplesDir, name, "package.json"))
  Object.assign(wanted, manifest.dependencies, manifest.devDependencies)
}
// The peers of every library package, at their ranges.
for (const { manifest } of packages) Object.assign(wanted, manifest.peerDependencies)
for (const name of tarball.keys()) wanted[name] = "0.1.0"
step(`installing ${Object.keys(wanted).length} packages into ${consumer}`)
await install(consumer, dependenciesOf(wanted))

step("one copy of effect")
const effectCopies = new Set(
  (await run(consumer, "npm", ["ls", "effect", "--all", "--parseable"]))
    .split("\n")
    .filter((line) => line.trim() !== "")
)
console.log(`  npm ls effect: ${[...effectCopies].join(", ")}`)
if (effectCopies.size !== 1) fail(`expected one copy of effect, found ${effectCopies.size}`)
for (const name of ["@effect/platform", "@effect/sql"]) {
  const copies = new Set(
    (await run(consumer, "npm", ["ls", name, "--all", "--parseable"])).split("\n").filter((l) => l.trim() !== "")
  )
  if (copies.size !== 1) fail(`expected one copy of ${name}, found ${copies.size}`)
}
if (readdirSync(join(consumer, "node_modules", "@taskwright")).some((name) => name.endsWith(".ts"))) {
  fail("TypeScript sources in node_modules/@taskwright")
}

step("the code cache the CLI's postinstall wrote beside its bundle")
checkInstallCache(join(consumer, "node_modules", "taskwright"))

step("npm install --global, as the CLI's README says")
const globalPrefix = join(work, "global")
{
  // @taskwright/web is not on a registry yet: its tarball, installed beside the CLI, stands in. npm
  // names a package installed from a file by its path in --allow-scripts, and one from the
  // registry by its name, as the README has it.
  const allowed = ["better-sqlite3", tarball.get("taskwright")].join(",")
  const args = ["install", "--global", "--prefix", globalPrefix, `--allow-scripts=${allowed}`]
  const { stderr } = await runWithStderr(work, "npm", [
    ...args,
    "--no-audit",
    "--no-fund",
    tarball.get("@taskwright/web"),
    tarball.get("taskwright")
  ])
  if (/allowScripts/.test(stderr)) fail(`the README's --allow-scripts leaves an install script out:\n${stderr}`)
  checkInstallCache(join(globalPrefix, "lib", "node_modules", "taskwright"))
  const printed = (await run(work, join(globalPrefix, "bin", "taskwright"), ["--version"])).trim()
  if (printed !== "0.1.0") fail(`the global taskwright --version printed ${printed}`)
}

step("tsc --strict, skipLibCheck false, on the examples")
for (const name of examples) cpSync(join(examplesDir, name), join(consumer, name), { recursive: true })
cpSync(join(examplesDir, "tsconfig.json"), join(consumer, "tsconfig.json"))
for (const name of examples) rmSync(join(consumer, name, "package.json"))
await run(consumer, process.execPath, [join(consumer, "node_modules", "typescript", "bin", "tsc"), "-p", "."])

/** Runs a compiled example and checks its output says what it must. */
const runExample = async (dir, name, args, expected, env = {}) => {
  const output = await run(dir, process.execPath, [join(dir, "dist", name, "index.js"), ...args], {
    env,
    timeout: 60_000
  })
  for (const text of expected) {
    if (!output.includes(text)) fail(`${name} did not print "${text}":\n${output}`)
  }
  if (/Executing an Effect versioned/.test(output)) fail(`${name}: two Effect versions met at run time`)
  console.log(`  ${name}: ok`)
}

step("running the examples from the installed packages")
await runExample(
  consumer,
  "embedded-node",
  [],
  ["created 1 Try Taskwright embedded backlog", "refused 400 BAD_REQUEST", "closed"]
)
await runExample(
  consumer,
  "http-host",
  ["--smoke"],
  ["own route 200", "api without a key 401", "api with a key Mounted beside my routes 1", "openapi 200"]
)
await runExample(
  consumer,
  "effect-host",
  ["--smoke"],
  ["own route 200", "api without a key 401", "api with a key 201", "bad input 400"]
)
const vitest = await run(
  consumer,
  process.execPath,
  [join(consumer, "node_modules", "vitest", "vitest.mjs"), "run", "--root", join(consumer, "vitest-harness")],
  // Plain text to match: with CI set (as CI services set it), vitest's colours are on even in a pipe.
  { timeout: 120_000, env: { NO_COLOR: "1" } }
)
if (!/Tests\s+4 passed/.test(vitest)) fail(`the vitest-harness suite did not pass:\n${vitest}`)
else console.log("  vitest-harness: ok")

step("taskwright serve from the installed CLI")
const dataDir = join(work, "data")
const server = spawn(
  join(consumer, "node_modules", ".bin", "taskwright"),
  ["serve", "--port", "0", "--data-dir", dataDir, "--json"],
  {
    cwd: work,
    env: cleanEnv,
    stdio: ["ignore", "pipe", "pipe"]
  }
)
let serverOutput = ""
server.stdout.on("data", (chunk) => {
  serverOutput += chunk
})
server.stderr.on("data", (chunk) => {
  serverOutput += chunk
})
const url = await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error(`taskwright serve did not start:\n${serverOutput}`)), 30_000)
  server.stdout.on("data", () => {
    const block = /^\{[\s\S]*?^\}$/m.exec(serverOutput)?.[0]
    if (block === undefined) return
    clearTimeout(timer)
    resolve(JSON.parse(block).url)
  })
  server.once("exit", (code) => reject(new Error(`taskwright serve exited with ${code}:\n${serverOutput}`)))
})
const adminKey = readFileSync(join(dataDir, "admin-key.txt"), "utf8").trim()
const board = await fetch(`${url}/`)
if (board.status !== 200 || !(board.headers.get("content-type") ?? "").startsWith("text/html")) {
  fail(`the installed server does not serve the web board at / (${board.status})`)
}

try {
  const clientChecks = ["signed in as admin@localhost", "failed as expected 404 NOT_FOUND", "deleted true"]
  const clientEnv = { TASKWRIGHT_URL: url, TASKWRIGHT_API_KEY: adminKey }
  await runExample(consumer, "client-script", [], clientChecks, clientEnv)

  // ---------------------------------------------------------------------------------------------
  // A consumer of the contract alone: the client, no engine.
  const apiOnly = join(work, "api-only")
  mkdirSync(apiOnly)
  const apiManifest = packages.find((p) => p.manifest.name === "@taskwright/api").manifest
  step(`installing only @taskwright/api into ${apiOnly}`)
  await install(
    apiOnly,
    dependenciesOf({
      "@taskwright/api": "0.1.0",
      // Not on a registry yet: the tarball stands in for what npm would fetch.
      "@taskwright/domain": "0.1.0",
      ...apiManifest.peerDependencies,
      typescript: wanted.typescript,
      "@types/node": wanted["@types/node"]
    })
  )
  for (const driver of ["better-sqlite3", "pg", "@node-rs/argon2", "@taskwright/core"]) {
    if (existsSync(join(apiOnly, "node_modules", driver))) fail(`an api-only consumer has ${driver} in node_modules`)
  }
  const installed = readdirSync(join(apiOnly, "node_modules")).filter((name) => !name.startsWith("."))
  console.log(`  node_modules: ${installed.join(" ")}`)
  cpSync(join(examplesDir, "client-script", "index.ts"), join(apiOnly, "client-script", "index.ts"))
  writeFileSync(
    join(apiOnly, "tsconfig.json"),
    JSON.stringify({ ...readJson(join(examplesDir, "tsconfig.json")), include: ["client-script/*.ts"] }, null, 2)
  )
  step("tsc --strict, skipLibCheck false, on the client script alone")
  await run(apiOnly, process.execPath, [join(apiOnly, "node_modules", "typescript", "bin", "tsc"), "-p", "."])
  await runExample(apiOnly, "client-script", [], clientChecks, clientEnv)
} finally {
  server.kill("SIGTERM")
  await new Promise((resolve) => (server.exitCode === null ? server.once("exit", resolve) : resolve()))
}
if (server.exitCode !== 0 && server.signalCode === null)
  fail(`taskwright serve exited with ${server.exitCode} on SIGTERM`)

if (keep) console.log(`kept ${work}`)
else rmSync(work, { recursive: true, force: true })
step(process.exitCode === 1 ? "FAILED" : "every check passed")
