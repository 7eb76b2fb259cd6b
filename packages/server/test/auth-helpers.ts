/**
 * Helpers of the auth, keys, rate-limit and nginx suites: users with passwords, logins,
 * forged tokens, and real `taskwright serve` processes (the CLI bundled from source with
 * esbuild, as tsup bundles it for release) with their logs captured.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createHash, createHmac } from "node:crypto"
import { rmSync } from "node:fs"
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises"
import { Agent, request as httpRequest, type IncomingHttpHeaders } from "node:http"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { randomBase62, Users } from "@taskwright/core"
import { StoreTag, statement } from "@taskwright/core/internal"
import { runCli as runCliBundle, type TestServer } from "@taskwright/testing"
import { Effect } from "effect"
import pg from "pg"

export const ROOT = resolve(__dirname, "..", "..", "..")

export interface PasswordUser {
  readonly id: string
  readonly email: string
  readonly password: string
}

/** A user who signs in with a password. */
export const createPasswordUser = (s: TestServer, options: { readonly admin?: boolean } = {}) =>
  s.server.run(
    Effect.gen(function* () {
      const users = yield* Users
      const email = `pw-${randomBase62(8).toLowerCase()}@example.test`
      const password = `pw-${randomBase62(20)}`
      const user = yield* users.create({ email, name: "Password User", password, admin: options.admin ?? false })
      return { id: user.id, email, password } satisfies PasswordUser
    })
  )

/** Logs in and answers the session token (also the cookie's value). */
export const login = async (s: TestServer, user: PasswordUser, headers: Record<string, string> = {}) => {
  const r = await s.request<{ session: { token: string } }>("POST", "/api/auth/login", {
    body: { email: user.email, password: user.password },
    headers
  })
  if (r.status !== 200) throw new Error(`login failed: ${r.status} ${r.text}`)
  return r.body.session.token
}

/** Runs a statement that answers no rows (DDL, writes) straight on the server's store. */
export const exec = (s: TestServer, sql: string) =>
  s.server.run(Effect.flatMap(StoreTag, (store) => store.run(statement(`test:${sha256Hex(sql)}`, sql))))

/** Takes a user's admin away straight in SQL, outside the service: nothing announces the change. */
export const demoteInSql = (s: TestServer, userId: string) =>
  exec(s, `UPDATE users SET is_admin = ${s.store === "postgres" ? "false" : "0"} WHERE id = '${userId}'`)

export const cookie = (token: string) => ({ cookie: `service_session=${token}` })

/** A fresh API key of `user` with the given scopes, through the HTTP API. */
export const createKey = async (
  s: TestServer,
  credential: string,
  body: { readonly name?: string; readonly scopes: ReadonlyArray<string>; readonly expires_at?: string }
) => {
  const r = await s.request<{ id: string; secret: string }>("POST", "/api/keys", {
    key: credential,
    body: { name: "k", ...body }
  })
  if (r.status !== 201) throw new Error(`key creation failed: ${r.status} ${r.text}`)
  return r.body
}

/** Exchanges an API key for an access token. */
export const accessToken = async (s: TestServer, apiKey: string) => {
  const r = await s.request<{ access_token: string }>("POST", "/api/auth/token", { body: { api_key: apiKey } })
  if (r.status !== 200) throw new Error(`token failed: ${r.status} ${r.text}`)
  return r.body.access_token
}

const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")

/** A compact JWS with any header and payload, signed with HMAC-SHA-`bits` over `secret` (or unsigned for alg none). */
export const forgeJwt = (
  header: Record<string, unknown>,
  payload: Record<string, unknown>,
  secret: string | undefined,
  bits: 256 | 384 | 512 = 256
) => {
  const input = `${b64url(header)}.${b64url(payload)}`
  if (secret === undefined) return `${input}.`
  return `${input}.${createHmac(`sha${bits}`, secret).update(input).digest("base64url")}`
}

/** The parts of a compact JWS, decoded. */
export const decodeJwt = (token: string) => {
  const [h = "", p = ""] = token.split(".")
  return {
    header: JSON.parse(Buffer.from(h, "base64url").toString()) as Record<string, unknown>,
    payload: JSON.parse(Buffer.from(p, "base64url").toString()) as Record<string, unknown>
  }
}

export const sha256Hex = (text: string) => createHash("sha256").update(text).digest("hex")

/** A free TCP port on loopback. */
export const freePort = () =>
  new Promise<number>((resolvePort, reject) => {
    const srv = createServer()
    srv.once("error", reject)
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address()
      srv.close(() => resolvePort(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

// ---------------------------------------------------------------------------------------------
// Real server processes

let bundle: Promise<string> | undefined

/** The CLI bundled from the workspace sources (packages inlined, npm dependencies external). */
export const cliBundle = (): Promise<string> => {
  bundle ??= (async () => {
    const esbuild = await import("esbuild")
    // Inside the repository, so that the bundle's npm imports resolve from its node_modules.
    const dir = join(ROOT, "node_modules", ".cache", "taskwright-tests")
    await mkdir(dir, { recursive: true })
    const outfile = join(dir, `cli-${process.pid}-${randomBase62(6)}.mjs`)
    process.once("exit", () => rmSync(outfile, { force: true }))
    await esbuild.build({
      entryPoints: [join(ROOT, "packages/cli/src/main.ts")],
      outfile,
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      conditions: ["@taskwright/source"],
      logLevel: "error",
      plugins: [
        {
          name: "external-npm",
          setup(build) {
            build.onResolve({ filter: /^[^./]/ }, (args) =>
              args.path.startsWith("@taskwright/") ? undefined : { path: args.path, external: true }
            )
          }
        }
      ]
    })
    return outfile
  })()
  return bundle
}

export interface ServerProcess {
  readonly url: string
  readonly dataDir: string
  readonly adminKey: string
  readonly child: ChildProcess
  /** Everything the process wrote to stdout and stderr so far. */
  log(): string
  stop(): Promise<void>
}

/** Starts `taskwright serve` as its own process (port 0), on `databaseUrl` or a SQLite file in `dataDir`. */
export const startServerProcess = async (
  options: { readonly dataDir?: string; readonly databaseUrl?: string; readonly env?: Record<string, string> } = {}
): Promise<ServerProcess> => {
  const main = await cliBundle()
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), "tw-proc-")))
  const args = [main, "serve", "--port", "0", "--data-dir", dataDir, "--json"]
  if (options.databaseUrl !== undefined) args.push("--database", options.databaseUrl)
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    // Projects in the tests' temporary directories, as the in-process harness allows.
    env: { PATH: process.env.PATH ?? "", TASKWRIGHT_PROJECTS_ROOT: tmpdir(), ...options.env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  let stdout = ""
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString()
    stdout += chunk.toString()
  })
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString()
  })
  const started = await new Promise<{ url: string; admin_key_file: string | null }>((resolveStart, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), 20_000)
    // `serve --json` prints one (pretty-printed) JSON object once it listens.
    const onData = () => {
      let started: { url: string; admin_key_file: string | null }
      try {
        started = JSON.parse(stdout) as typeof started
      } catch {
        return
      }
      clearTimeout(timer)
      child.stdout?.off("data", onData)
      resolveStart(started)
    }
    child.stdout?.on("data", onData)
    child.once("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`server exited with ${code}:\n${output}`))
    })
  })
  const adminKey = (await readFile(join(dataDir, "admin-key.txt"), "utf8").catch(() => "")).trim()
  return {
    url: started.url,
    dataDir,
    adminKey,
    child,
    log: () => output,
    stop: async () => {
      await new Promise<void>((done) => {
        if (child.exitCode !== null || child.signalCode !== null) return done()
        child.once("exit", () => done())
        child.kill("SIGTERM")
      })
      if (options.dataDir === undefined) await rm(dataDir, { recursive: true, force: true })
    }
  }
}

/** Runs the workspace's CLI once and answers its exit code and output. */
export const runCli = async (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  runCliBundle(await cliBundle(), args, { env: { PATH: process.env.PATH ?? "", ...env }, cwd: ROOT })

// ---------------------------------------------------------------------------------------------
// PostgreSQL databases shared by several servers

/** Every value of every row of every table of a PostgreSQL database, as text. */
export const dumpPg = async (databaseUrl: string) => {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    const tables = await client.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    )
    let out = ""
    for (const { table_name } of tables.rows) {
      const rows = await client.query(`SELECT * FROM "${table_name}"`)
      out += `${table_name}\n${JSON.stringify(rows.rows)}\n`
    }
    return out
  } finally {
    await client.end()
  }
}

export const removeDir = (dir: string) => rm(dir, { recursive: true, force: true })

/**
 * Waits, when the current fixed window (aligned to the epoch, as the limiter's are) has less
 * than 15 s left, for the next one to begin, so that a test counting hits against a budget
 * never straddles two windows (the second would start again from one).
 */
export const freshWindow = async (windowMs = 60_000) => {
  const into = Date.now() % windowMs
  if (into > windowMs - 15_000) await new Promise((resolve) => setTimeout(resolve, windowMs - into + 50))
}

// ---------------------------------------------------------------------------------------------
// Load

export interface BurstResult {
  readonly statuses: Record<number, number>
  readonly responses: ReadonlyArray<{ readonly status: number; readonly headers: IncomingHttpHeaders }>
}

/**
 * Sends `n` requests at once (over up to `connections` keep-alive sockets, all in flight
 * together) and counts the statuses.
 */
export const burst = async (
  url: string,
  n: number,
  options: { readonly method?: string; readonly headers?: Record<string, string>; readonly connections?: number } = {}
): Promise<BurstResult> => {
  const agent = new Agent({ keepAlive: true, maxSockets: options.connections ?? 128 })
  try {
    const responses = await Promise.all(
      Array.from(
        { length: n },
        () =>
          new Promise<{ status: number; headers: IncomingHttpHeaders }>((done, fail) => {
            const req = httpRequest(
              url,
              { method: options.method ?? "GET", headers: options.headers, agent },
              (res) => {
                res.resume()
                res.on("end", () => done({ status: res.statusCode ?? 0, headers: res.headers }))
              }
            )
            req.on("error", fail)
            req.end()
          })
      )
    )
    const statuses: Record<number, number> = {}
    for (const r of responses) statuses[r.status] = (statuses[r.status] ?? 0) + 1
    return { statuses, responses }
  } finally {
    agent.destroy()
  }
}
