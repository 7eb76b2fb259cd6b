/**
 * Authenticated keys and sessions are remembered in memory; a revocation or a logout must still
 * bite on the next request, whether it comes through the API or from another process (the CLI, or
 * another server, on the same store).
 */
import { execFile } from "node:child_process"
import { join } from "node:path"
import { promisify } from "node:util"
import { CREDENTIAL_FRESH_FOR_MS, settingsFromEnv, Users } from "@taskwright/core"
import { serve } from "@taskwright/server"
import { startTestServer, type TestServer, type TestStore } from "@taskwright/testing"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { accessToken, cookie, createPasswordUser, demoteInSql, login as loginAs } from "./auth-helpers.js"

const run = promisify(execFile)
const cli = join(__dirname, "..", "..", "cli", "dist", "main.js")

describe.each<TestStore>(["sqlite-file", "postgres"])("the key cache on %s", (store) => {
  let s: TestServer
  beforeAll(async () => {
    // Token requests and refusals spend the anonymous budget (10 a minute by default).
    s = await startTestServer({ store, env: { TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "1000" } })
  })
  afterAll(async () => {
    await s.close()
  })

  const keyOf = async () => {
    const user = await s.createUser({ scopes: ["tasks:read"] })
    const rows = await s.query<{ id: string }>("SELECT id FROM api_keys WHERE user_id = ?", [user.id])
    return { secret: user.key, id: rows[0]?.id ?? "" }
  }
  const status = async (secret: string) => (await s.request("GET", "/api/tasks", { key: secret })).status

  it("refuses a key revoked through the API on the very next request", async () => {
    const key = await keyOf()
    expect(await status(key.secret)).toBe(200)
    expect(await status(key.secret)).toBe(200)
    const revoked = await s.request("DELETE", `/api/keys/${key.id}`, { key: s.adminKey })
    expect(revoked.status).toBe(200)
    expect(await status(key.secret)).toBe(401)
  })

  it("refuses a key rotated through the API at once, and takes the new secret", async () => {
    const key = await keyOf()
    expect(await status(key.secret)).toBe(200)
    const rotated = await s.request<{ secret: string }>("POST", `/api/keys/${key.id}/rotate`, { key: s.adminKey })
    expect(rotated.status).toBe(200)
    expect(await status(key.secret)).toBe(401)
    expect(await status(rotated.body.secret)).toBe(200)
  })

  it("refuses a key revoked by the CLI in another process", async () => {
    const key = await keyOf()
    expect(await status(key.secret)).toBe(200)
    expect(await status(key.secret)).toBe(200)
    const env = { ...process.env, DATABASE_URL: store === "postgres" ? s.databaseUrl : "" }
    await run("node", [cli, "keys", "revoke", key.id, "--data-dir", s.dataDir], { env })
    // SQLite: the file's data_version is read at most every 5 ms; PostgreSQL: the announcement
    // arrives as a NOTIFY a moment after the CLI's commit.
    expect(await soon(() => status(key.secret))).toBe(401)
  })

  /** An access token made from `secret`, used twice (so it is remembered with its key). */
  const rememberedToken = async (secret: string) => {
    const made = await s.request<{ access_token: string }>("POST", "/api/auth/token", { body: { api_key: secret } })
    expect(made.status).toBe(200)
    expect(await status(made.body.access_token)).toBe(200)
    expect(await status(made.body.access_token)).toBe(200)
    return made.body.access_token
  }

  it("refuses a remembered access token on the very next request after its key is revoked or rotated", async () => {
    const revokedKey = await keyOf()
    const revokedToken = await rememberedToken(revokedKey.secret)
    // Another key's token, remembered too, is not affected.
    const other = await keyOf()
    const otherToken = await rememberedToken(other.secret)
    expect((await s.request("DELETE", `/api/keys/${revokedKey.id}`, { key: s.adminKey })).status).toBe(200)
    expect(await status(revokedToken)).toBe(401)
    expect(await status(otherToken)).toBe(200)

    const rotatedKey = await keyOf()
    const rotatedToken = await rememberedToken(rotatedKey.secret)
    const rotated = await s.request<{ secret: string }>("POST", `/api/keys/${rotatedKey.id}/rotate`, {
      key: s.adminKey
    })
    expect(rotated.status).toBe(200)
    expect(await status(rotatedToken)).toBe(401)
    expect(await status(await rememberedToken(rotated.body.secret))).toBe(200)
  })

  it("refuses a remembered access token soon after the CLI revokes its key in another process", async () => {
    const key = await keyOf()
    const token = await rememberedToken(key.secret)
    const env = { ...process.env, DATABASE_URL: store === "postgres" ? s.databaseUrl : "" }
    await run("node", [cli, "keys", "revoke", key.id, "--data-dir", s.dataDir], { env })
    expect(await soon(() => status(token))).toBe(401)
  })

  it("refuses a session cookie at once after a logout here, and soon after a logout on another server", async () => {
    const user = await createPasswordUser(s)
    const login = async () => cookie(await loginAs(s, user))
    const me = async (headers: Record<string, string>) => (await s.request("GET", "/api/auth/me", { headers })).status
    const here = await login()
    expect(await me(here)).toBe(200)
    expect(await me(here)).toBe(200)
    const out = await s.request("POST", "/api/auth/logout", { headers: { ...here, origin: s.url } })
    expect(out.status).toBe(200)
    expect(await me(here)).toBe(401)

    const there = await login()
    expect(await me(there)).toBe(200)
    expect(await me(there)).toBe(200)
    const other = await serve(
      settingsFromEnv({}, { dataDir: s.dataDir, databaseUrl: store === "postgres" ? s.databaseUrl : undefined }),
      { port: 0, host: "127.0.0.1", log: "silent" }
    )
    try {
      const logout = await fetch(`${other.url}/api/auth/logout`, {
        method: "POST",
        headers: { ...there, origin: other.url }
      })
      expect(logout.status).toBe(200)
    } finally {
      await other.close()
    }
    expect(await soon(() => me(there))).toBe(401)
  })

  it("sees an admin demoted in SQL, outside the API, within CREDENTIAL_FRESH_FOR_MS on every kind of credential", async () => {
    const boss = await createPasswordUser(s, { admin: true })
    const bossKey = await s.server.run(
      Effect.flatMap(Users, (users) =>
        users.createKey({ userId: boss.id, name: "boss", scopes: ["admin"], expiresAt: null })
      )
    )
    const credentials: Record<string, Record<string, string>> = {
      "API key": { authorization: `Bearer ${bossKey.secret}` },
      "access token": { authorization: `Bearer ${await accessToken(s, bossKey.secret)}` },
      session: cookie(await loginAs(s, boss))
    }
    const scopesOf = async (headers: Record<string, string>) => {
      const me = await s.request<{ scopes: ReadonlyArray<string> }>("GET", "/api/auth/me", { headers })
      expect(me.status).toBe(200)
      return me.body.scopes
    }
    // Each remembered: asked twice.
    for (const headers of Object.values(credentials)) {
      expect(await scopesOf(headers)).toContain("admin")
      expect(await scopesOf(headers)).toContain("admin")
    }
    // Nothing is announced: no process of the service made this change.
    await demoteInSql(s, boss.id)
    const demotedAt = Date.now()
    for (const [kind, headers] of Object.entries(credentials)) {
      let scopes = await scopesOf(headers)
      while (scopes.includes("admin") && Date.now() - demotedAt < CREDENTIAL_FRESH_FOR_MS + 2_000) {
        await new Promise((resolve) => setTimeout(resolve, 50))
        scopes = await scopesOf(headers)
      }
      expect({ kind, admin: scopes.includes("admin") }).toEqual({ kind, admin: false })
    }
  }, 20_000)
})

/** The answer once it is 401, or the last one after half a second of asking. */
const soon = async (ask: () => Promise<number>) => {
  let answer = await ask()
  for (let i = 0; i < 50 && answer !== 401; i++) {
    await new Promise((resolve) => setTimeout(resolve, 10))
    answer = await ask()
  }
  return answer
}
