/** The built `taskwright` binary, driven as a user would from a shell. */
import { execFile } from "node:child_process"
import { mkdtemp, readFile, rm, stat } from "node:fs/promises"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { promisify } from "node:util"
import { createPgDatabase } from "@taskwright/testing"
import Database from "better-sqlite3"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { bin, inheritedEnv, startServe } from "./serve-helpers.js"

const run = promisify(execFile)

const cli = async (args: ReadonlyArray<string>) => {
  try {
    const { stdout, stderr } = await run("node", [bin, ...args])
    return { code: 0, stdout, stderr }
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string }
    return { code: err.code, stdout: err.stdout, stderr: err.stderr }
  }
}

describe("taskwright CLI", () => {
  let dir: string
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "tw-cli-"))
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it("migrates, creates a user and a key whose secret is printed once and stored hashed", async () => {
    const migrated = await cli(["migrate", "--data-dir", dir, "--json"])
    expect(migrated.code).toBe(0)
    expect(JSON.parse(migrated.stdout).applied.length).toBeGreaterThan(0)

    const user = await cli([
      "users",
      "create",
      "--data-dir",
      dir,
      "--email",
      "ada@example.com",
      "--name",
      "Ada",
      "--json"
    ])
    expect(user.code).toBe(0)
    expect(JSON.parse(user.stdout)).toMatchObject({ email: "ada@example.com", name: "Ada", admin: false })

    const dup = await cli(["users", "create", "--data-dir", dir, "--email", "ADA@example.com", "--name", "Ada"])
    expect(dup.code).not.toBe(0)
    expect(dup.stderr).toContain("exists")

    const key = await cli([
      "keys",
      "create",
      "--data-dir",
      dir,
      "--user",
      "ada@example.com",
      "--name",
      "ci",
      "--scopes",
      "tasks:read,tasks:write",
      "--expires",
      "90d",
      "--json"
    ])
    expect(key.code).toBe(0)
    const created = JSON.parse(key.stdout) as { id: string; secret: string; scopes: Array<string>; expires_at: string }
    expect(created.secret).toMatch(/^twk_[0-9A-Za-z]{49}$/)
    expect(created.scopes).toEqual(["tasks:read", "tasks:write"])
    expect(Date.parse(created.expires_at) - Date.now()).toBeGreaterThan(89 * 86_400_000)

    const listed = await cli(["keys", "list", "--data-dir", dir, "--json"])
    expect(listed.stdout).not.toContain(created.secret)
    const db = await readFile(join(dir, "taskwright.db"))
    expect(db.includes(Buffer.from(created.secret))).toBe(false)

    const tooMuch = await cli([
      "keys",
      "create",
      "--data-dir",
      dir,
      "--user",
      "ada@example.com",
      "--name",
      "x",
      "--scopes",
      "admin"
    ])
    expect(tooMuch.code).not.toBe(0)
    expect(tooMuch.stderr).toContain("admin")
    const badScope = await cli([
      "keys",
      "create",
      "--data-dir",
      dir,
      "--user",
      "ada@example.com",
      "--name",
      "x",
      "--scopes",
      "root"
    ])
    expect(badScope.code).not.toBe(0)

    const revoked = await cli(["keys", "revoke", created.id, "--data-dir", dir, "--json"])
    expect(revoked.code).toBe(0)
    expect(JSON.parse(revoked.stdout).revoked_at).not.toBeNull()
  })

  it("refuses the users and keys the API refuses, with its messages, and stores none of them", async () => {
    const data = join(dir, "refusals")
    const store = ["--data-dir", data, "--json"]
    expect((await cli(["users", "create", ...store, "--email", "eve@example.com", "--name", "Eve"])).code).toBe(0)
    const users: Array<[ReadonlyArray<string>, string]> = [
      [["--email", "not an email", "--name", "N"], "must be an email address"],
      [["--email", "n@example.com", "--name", "  "], "name must not be empty"],
      [["--email", "n@example.com", "--name", "x".repeat(201)], "name must be at most 200 characters"],
      [["--email", "n@example.com", "--name", "N", "--password", "short"], "password must be at least 8 characters"]
    ]
    for (const [args, message] of users) {
      const r = await cli(["users", "create", ...store, ...args])
      expect(r.code, args.join(" ")).toBe(1)
      expect(r.stdout).toBe("")
      expect(JSON.parse(r.stderr).error.message).toContain(message)
    }
    const key = (...args: ReadonlyArray<string>) =>
      cli(["keys", "create", ...store, "--user", "eve@example.com", "--scopes", "tasks:read", ...args])
    const keys: Array<[ReadonlyArray<string>, string]> = [
      [["--name", ""], "a key name must be 1 to 100 characters long"],
      [["--name", "   "], "a key name must be 1 to 100 characters long"],
      [["--name", "x".repeat(5000)], "a key name must be 1 to 100 characters long"],
      [["--name", "ok", "--expires", "bogus"], "--expires takes a lifetime like 90d or 12h"]
    ]
    for (const [args, message] of keys) {
      const r = await key(...args)
      expect(r.code, args.join(" ").slice(0, 40)).toBe(1)
      expect(r.stdout).toBe("")
      expect(JSON.parse(r.stderr).error.message).toContain(message)
    }
    const made = await key("--name", "  trimmed  ")
    expect(JSON.parse(made.stdout)).toMatchObject({ name: "trimmed", scopes: ["tasks:read"], expires_at: null })
    const listed = JSON.parse((await cli(["keys", "list", ...store])).stdout) as { keys: Array<{ name: string }> }
    expect(listed.keys.map((k) => k.name)).toEqual(["trimmed"])
  })

  it("logs to stderr, engine logs included, so --json output on stdout stays JSON", async () => {
    const data = join(dir, "logs")
    expect((await cli(["users", "create", "--data-dir", data, "--email", "l@example.com", "--name", "L"])).code).toBe(0)
    // A store whose event log is gone: the engine's background pruning fails and says so in a log line.
    const db = new Database(join(data, "taskwright.db"))
    db.exec("DROP TABLE events")
    db.close()
    for (const args of [
      ["keys", "list"],
      ["users", "create", "--email", "m@example.com", "--name", "M"]
    ]) {
      const r = await cli([...args, "--data-dir", data, "--json"])
      expect(r.code).toBe(0)
      expect(r.stderr).toMatch(/^\[taskwright\] WARN pruning old events failed/m)
      expect(() => JSON.parse(r.stdout)).not.toThrow()
    }
  })

  it("serves on the given port, writes the admin key 0600, and the key works", async () => {
    const data = join(dir, "serve")
    const server = startServe(data, inheritedEnv(), [], ["--json"])
    try {
      const started = JSON.parse(await server.listening) as { url: string; admin_key_file: string }
      expect((await stat(started.admin_key_file)).mode & 0o777).toBe(0o600)
      const key = (await readFile(started.admin_key_file, "utf8")).trim()
      const r = await fetch(`${started.url}/api/tasks`, { headers: { authorization: `Bearer ${key}` } })
      expect(r.status).toBe(200)
      expect(await r.json()).toMatchObject({ tasks: [], total: 0 })
    } finally {
      await server.stop()
    }
    expect(server.child.exitCode === 0 || server.child.signalCode === "SIGTERM").toBe(true)
  })

  it("serves the live event socket from the bundle, whose ws loads at the first upgrade", async () => {
    const server = startServe(join(dir, "events"), inheritedEnv(), [], ["--json"])
    try {
      const started = JSON.parse(await server.listening) as { url: string; admin_key_file: string }
      const key = (await readFile(started.admin_key_file, "utf8")).trim()
      const socket = new WebSocket(`${started.url.replace(/^http/, "ws")}/api/events`, {
        headers: { authorization: `Bearer ${key}` }
      })
      const messages: Array<{ type?: string; data?: { title?: string } }> = []
      socket.on("message", (data) => messages.push(JSON.parse(data.toString())))
      await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject))
      const created = await fetch(`${started.url}/api/tasks`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ title: "seen live" })
      })
      expect(created.status).toBe(201)
      await expect
        .poll(() => messages.find((m) => m.type === "task.created")?.data?.title, { timeout: 5_000 })
        .toBe("seen live")
      socket.close()
    } finally {
      await server.stop()
    }
  })

  it("leaves fast-check out of its bundle: Effect's Schema imports it, nothing here calls it", async () => {
    const bundle = await readFile(join(dirname(bin), "cli.cjs"), "utf8")
    expect(bundle).not.toContain("Property failed by returning false")
    expect(bundle).not.toContain("pure-rand")
  })

  it("keeps only the Effect it uses: its modules imported one by one, not through the barrels esbuild cannot tree-shake", async () => {
    const bundle = await readFile(join(dirname(bin), "cli.cjs"), "utf8")
    // A namespace object per module imported through a barrel (`Stream_exports`), holding every export.
    const namespaces = Array.from(bundle.matchAll(/\b(\w+)_exports=\{\}/g), ([, name = ""]) => name)
    expect(
      namespaces.filter((name) => /^(Effect|Stream|Schema|Option|Layer|HttpApi\w*|Command|Options)\d*$/.test(name))
    ).toEqual([])
    // Exports of modules the service uses that nothing here calls.
    for (const unused of ["groupAdjacentBy", "zipLatestAll", "TemplateLiteralParser"])
      expect(bundle).not.toContain(unused)
    expect(bundle.length).toBeLessThan(1_800_000)
  })

  it("serves from PostgreSQL through the bundle's Node-only socket module for pg, and writes there", async () => {
    // The bundle replaces pg's lib/stream.js, whose Cloudflare check loaded undici at every start.
    const bundle = await readFile(join(dirname(bin), "cli.cjs"), "utf8")
    expect(bundle).not.toContain("Cloudflare-Workers")
    const database = await createPgDatabase("tw_cli")
    const server = startServe(join(dir, "pg"), { ...inheritedEnv(), DATABASE_URL: database.url }, [], ["--json"])
    try {
      const started = JSON.parse(await server.listening) as { url: string; admin_key_file: string }
      const key = (await readFile(started.admin_key_file, "utf8")).trim()
      const created = await fetch(`${started.url}/api/tasks`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ title: "kept in PostgreSQL" })
      })
      expect(created.status).toBe(201)
      const { id } = (await created.json()) as { id: string }
      const client = new pg.Client({ connectionString: database.url })
      await client.connect()
      try {
        const rows = await client.query("SELECT title FROM tasks WHERE id = $1", [id])
        expect(rows.rows).toEqual([{ title: "kept in PostgreSQL" }])
      } finally {
        await client.end()
      }
    } finally {
      await server.stop()
      await database.drop()
    }
  })

  it("serves HTTPS with --tls-cert and --tls-key, and its session cookie is Secure", async () => {
    const data = join(dir, "tls")
    const cert = join(dir, "cert.pem")
    const key = join(dir, "key.pem")
    await run("openssl", [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
      "-days",
      "1",
      "-keyout",
      key,
      "-out",
      cert
    ])
    expect((await cli(["serve", "--data-dir", data, "--tls-cert", cert])).stderr).toMatch(/go together/)
    const server = startServe(
      data,
      { ...inheritedEnv(), NODE_EXTRA_CA_CERTS: cert },
      [],
      ["--tls-cert", cert, "--tls-key", key, "--json"]
    )
    try {
      const started = JSON.parse(await server.listening) as { url: string }
      expect(started.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/)
      // Checked with the certificate as the only trusted root.
      const { stdout } = await run("curl", ["-sS", "--cacert", cert, `${started.url}/api/health`])
      expect(JSON.parse(stdout)).toEqual({ status: "ok" })
      const users = await cli([
        "users",
        "create",
        "--data-dir",
        data,
        "--email",
        "tls@example.test",
        "--name",
        "T",
        "--password",
        "correct horse battery"
      ])
      expect(users.code).toBe(0)
      const { stdout: headers } = await run("curl", [
        "-sS",
        "-D",
        "-",
        "-o",
        "/dev/null",
        "--cacert",
        cert,
        "-H",
        "content-type: application/json",
        "--data",
        JSON.stringify({ email: "tls@example.test", password: "correct horse battery" }),
        `${started.url}/api/auth/login`
      ])
      expect(headers).toMatch(/^set-cookie: service_session=[^\r\n]*; Secure/im)
    } finally {
      await server.stop()
    }
  })
})
