/**
 * A real nginx (`auth_request`) in front of a small upstream, asking Taskwright's
 * `/api/auth/verify` about every request: a valid API key, access token or session cookie
 * passes and the upstream receives `X-User-Id` / `X-Scopes` (a client-sent `X-User-Id` is
 * overwritten); no credential is 401; a missing `?scope=` is 403; a POST with a body goes
 * through without hanging, even with the naive config that forwards the body's headers to the
 * check; and an over-budget caller without a credential gets 401, never a 500.
 *
 * Needs nginx with the auth_request module (`scripts/ci-install-nginx.sh`).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { chmod, mkdir, mkdtemp, writeFile } from "node:fs/promises"
import { createServer, type IncomingHttpHeaders, type Server } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startTestServer, type TestServer, testStores } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  accessToken,
  cookie,
  createKey,
  createPasswordUser,
  freePort,
  freshWindow,
  login,
  removeDir
} from "./auth-helpers.js"

const NGINX = ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"].find((p) => existsSync(p))

interface Seen {
  readonly method: string
  readonly url: string
  readonly headers: IncomingHttpHeaders
  readonly bodyLength: number
}

/** The protected application: records what reaches it. */
const startUpstream = async () => {
  const seen: Array<Seen> = []
  const server: Server = createServer((req, res) => {
    let length = 0
    req.on("data", (c: Buffer) => {
      length += c.length
    })
    req.on("end", () => {
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, bodyLength: length })
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ user: req.headers["x-user-id"] ?? null, scopes: req.headers["x-scopes"] ?? null }))
    })
  })
  const port = await freePort()
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve))
  return { port, seen, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

const config = (dir: string, port: number, taskwright: number, upstream: number) => `
worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 512; }
http {
  access_log ${dir}/access.log;
  client_body_temp_path ${dir}/tmp/body;
  proxy_temp_path ${dir}/tmp/proxy;
  fastcgi_temp_path ${dir}/tmp/fastcgi;
  uwsgi_temp_path ${dir}/tmp/uwsgi;
  scgi_temp_path ${dir}/tmp/scgi;
  client_max_body_size 10m;

  upstream taskwright {
    server 127.0.0.1:${taskwright};
    keepalive 8;
  }

  server {
    listen 127.0.0.1:${port};

    # The application: every request is checked by Taskwright first.
    location / {
      auth_request /_auth;
      auth_request_set $tw_user $upstream_http_x_user_id;
      auth_request_set $tw_scopes $upstream_http_x_scopes;
      proxy_set_header X-User-Id $tw_user;
      proxy_set_header X-Scopes $tw_scopes;
      proxy_pass http://127.0.0.1:${upstream};
    }

    # An area that needs the admin scope.
    location /admin/ {
      auth_request /_auth_admin;
      auth_request_set $tw_user $upstream_http_x_user_id;
      proxy_set_header X-User-Id $tw_user;
      proxy_pass http://127.0.0.1:${upstream};
    }

    # The documented way: no body, no Content-Length.
    location = /_auth {
      internal;
      proxy_pass http://taskwright/api/auth/verify;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Original-URI $request_uri;
    }

    # The naive way: the original request's headers (Content-Length included) reach the check.
    location = /_auth_admin {
      internal;
      proxy_pass http://taskwright/api/auth/verify?scope=admin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    }
  }
}
`

const startNginx = async (taskwrightPort: number, upstreamPort: number) => {
  if (NGINX === undefined) throw new Error("nginx is not installed: run scripts/ci-install-nginx.sh")
  const dir = await mkdtemp(join(tmpdir(), "tw-nginx-"))
  await mkdir(join(dir, "tmp"), { recursive: true })
  // Workers run as an unprivileged user when nginx starts as root: they must reach the temp dirs.
  await chmod(dir, 0o755)
  await chmod(join(dir, "tmp"), 0o777)
  const port = await freePort()
  const conf = join(dir, "nginx.conf")
  await writeFile(conf, config(dir, port, taskwrightPort, upstreamPort))
  execFileSync(NGINX, ["-t", "-q", "-p", dir, "-e", join(dir, "error.log"), "-c", conf])
  const child: ChildProcess = spawn(NGINX, ["-p", dir, "-e", join(dir, "error.log"), "-c", conf], {
    stdio: "ignore"
  })
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; i < 100; i++) {
    try {
      await fetch(`${url}/_ready`)
      break
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  return {
    url,
    stop: async () => {
      await new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve()
        child.once("exit", () => resolve())
        child.kill("SIGQUIT")
      })
      if (process.env.KEEP_NGINX) console.log(dir)
      else await removeDir(dir)
    }
  }
}

describe.each(testStores())("nginx auth_request in front of an upstream, Taskwright on %s", (store) => {
  let s: TestServer
  let upstream: Awaited<ReturnType<typeof startUpstream>>
  let nginx: Awaited<ReturnType<typeof startNginx>>
  let user: { id: string; key: string }

  beforeAll(async () => {
    s = await startTestServer({ store, env: { TASKWRIGHT_TRUST_PROXY: "1" } })
    upstream = await startUpstream()
    nginx = await startNginx(Number(new URL(s.url).port), upstream.port)
    user = await s.createUser({ scopes: ["tasks:read", "projects:read"] })
  })
  afterAll(async () => {
    await nginx?.stop()
    await upstream?.close()
    await s?.close()
  })

  const via = (path: string, init: RequestInit = {}) =>
    fetch(`${nginx.url}${path}`, { ...init, signal: AbortSignal.timeout(10_000) })

  it("passes a valid API key and hands the upstream X-User-Id and X-Scopes", async () => {
    const before = upstream.seen.length
    const r = await via("/app/page?x=1", { headers: { authorization: `Bearer ${user.key}` } })
    expect(r.status).toBe(200)
    expect(await r.json()).toEqual({ user: user.id, scopes: "tasks:read,projects:read" })
    const seen = upstream.seen.slice(before)
    expect(seen).toHaveLength(1)
    expect(seen[0]?.url).toBe("/app/page?x=1")
    expect(seen[0]?.headers["x-user-id"]).toBe(user.id)
    expect(seen[0]?.headers["x-scopes"]).toBe("tasks:read,projects:read")
  })

  it("overwrites an X-User-Id the client sends", async () => {
    const r = await via("/app", {
      headers: { authorization: `Bearer ${user.key}`, "x-user-id": "usr_SPOOFEDSPOOFEDX", "x-scopes": "admin" }
    })
    expect(r.status).toBe(200)
    expect(await r.json()).toEqual({ user: user.id, scopes: "tasks:read,projects:read" })
    expect(upstream.seen.at(-1)?.headers["x-user-id"]).toBe(user.id)
  })

  it("passes an access token and a session cookie", async () => {
    const token = await accessToken(s, (await createKey(s, user.key, { scopes: ["tasks:read"] })).secret)
    const byToken = await via("/app", { headers: { authorization: `Bearer ${token}` } })
    expect(byToken.status).toBe(200)
    expect(await byToken.json()).toEqual({ user: user.id, scopes: "tasks:read" })

    const person = await createPasswordUser(s)
    const session = await login(s, person)
    const byCookie = await via("/app", { headers: cookie(session) })
    expect(byCookie.status).toBe(200)
    expect(((await byCookie.json()) as { user: string }).user).toBe(person.id)
  })

  it("answers 401 without a credential or with a bad one, and the upstream never sees the request", async () => {
    const before = upstream.seen.length
    const none = await via("/app", { headers: { "x-user-id": user.id } })
    expect(none.status).toBe(401)
    expect(none.headers.get("www-authenticate")).toMatch(/^Bearer/)
    expect((await via("/app", { headers: { authorization: "Bearer twk_nope" } })).status).toBe(401)
    expect((await via("/app", { headers: cookie("x".repeat(43)) })).status).toBe(401)
    const revoked = await createKey(s, user.key, { scopes: ["tasks:read"] })
    await s.request("DELETE", `/api/keys/${revoked.id}`, { key: user.key })
    expect((await via("/app", { headers: { authorization: `Bearer ${revoked.secret}` } })).status).toBe(401)
    expect(upstream.seen.length).toBe(before)
  })

  it("answers 403 when ?scope= is not held, and passes when it is", async () => {
    expect((await via("/admin/panel", { headers: { authorization: `Bearer ${user.key}` } })).status).toBe(403)
    const r = await via("/admin/panel", { headers: { authorization: `Bearer ${s.adminKey}` } })
    expect(r.status).toBe(200)
    expect(upstream.seen.at(-1)?.url).toBe("/admin/panel")
  })

  it("lets a POST with a body through without hanging, with either config", async () => {
    const body = "x".repeat(256 * 1024)
    for (const path of ["/app/upload", "/admin/upload"]) {
      const t0 = Date.now()
      const r = await via(path, {
        method: "POST",
        headers: { authorization: `Bearer ${s.adminKey}`, "content-type": "text/plain" },
        body
      })
      expect(r.status).toBe(200)
      expect(Date.now() - t0).toBeLessThan(5000)
      expect(upstream.seen.at(-1)).toMatchObject({ method: "POST", url: path, bodyLength: body.length })
    }
    // And refused ones answer at once too.
    const refused = await via("/app/upload", { method: "POST", body })
    expect(refused.status).toBe(401)
  })

  it("never turns an over-budget caller into a 500: 401 without a credential, valid keys still pass", async () => {
    await freshWindow()
    const statuses: Array<number> = []
    for (let i = 0; i < 15; i++) statuses.push((await via("/app")).status)
    expect(statuses.every((x) => x === 401)).toBe(true)
    // The same budget, asked directly through the API, is spent: proof the check above was over it.
    const direct = await s.request("GET", "/api/tasks")
    expect(direct.status).toBe(429)
    expect((await via("/app", { headers: { authorization: `Bearer ${user.key}` } })).status).toBe(200)
  })
})
