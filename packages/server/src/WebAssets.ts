/**
 * The web board's static files (the `@taskwright/web` package's `dist/`), served from memory:
 * read once at start-up with their `.br`/`.gz` siblings (compressed here once when the build
 * did not), then answered by `Accept-Encoding` with an `ETag`, `304` for a matching
 * `If-None-Match`, long-lived caching for hashed assets, `no-cache` for `index.html`, and a
 * Content-Security-Policy that allows only this origin (no inline script, no other host).
 *
 * The app's own routes (`/`, `/tasks/:id`, `/projects`, `/settings/keys`, `/settings/agents`)
 * answer `index.html`; another method on them is 405 with `Allow` (OPTIONS: 204); any other path is
 * declined, so the caller's JSON 404 stands.
 */
import { createHash } from "node:crypto"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, extname, join, relative, sep } from "node:path"
import { brotliCompressSync, constants, gzipSync } from "node:zlib"

/**
 * The request as this module needs it: the server's exchange (`http/Dispatcher.ts`) has this
 * shape, and so can any host's adapter.
 */
export interface SiteRequest {
  readonly method: string
  /** The path without the query. */
  readonly pathname: string
  header(name: string): string | undefined
  /** Sends the answer: `headers` as a flat name, value, name, value array. */
  respond(status: number, headers: Array<string>, body: string | Uint8Array): void
}

/**
 * Answers a request on one of the web app's paths (GET and HEAD with the file; OPTIONS and other
 * methods with `Allow`), or declines (false) so the caller answers instead.
 */
export interface WebAssets {
  /** Where the files were read from. */
  readonly root: string
  readonly serve: (request: SiteRequest) => boolean
}

interface Asset {
  readonly type: string
  readonly identity: Buffer
  readonly br: Buffer | undefined
  readonly gzip: Buffer | undefined
  readonly etag: string
  readonly cacheControl: string
  readonly document: boolean
}

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".txt": "text/plain; charset=utf-8",
  ".webmanifest": "application/manifest+json",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".webp": "image/webp",
  ".woff2": "font/woff2"
}

const COMPRESSIBLE = new Set([".html", ".js", ".mjs", ".css", ".svg", ".json", ".map", ".txt", ".webmanifest"])

/** Vite writes content-hashed names under `assets/`: they never change, so caches keep them. */
const IMMUTABLE = "public, max-age=31536000, immutable"

const CLIENT_ROUTES = [
  /^\/$/,
  /^\/tasks\/[1-9][0-9]{0,14}$/,
  /^\/projects$/,
  /^\/settings\/keys$/,
  /^\/settings\/agents$/
]

/**
 * The app's first reads, asked of the browser with the page itself (`Link: rel=preload`), so they
 * are on their way while the script still loads: who is signed in on every screen, and on `/`
 * (the board) the first two pages of tasks. The app's own first fetches of the same addresses
 * (`src/main.tsx` in `@taskwright/web`) take these answers; a visitor signed out gets 401s, as
 * those fetches would.
 */
const preload = (path: string) => `<${path}>; rel=preload; as=fetch; crossorigin=anonymous`
const PRELOAD_ME = preload("/api/auth/me")
const PRELOAD_BOARD = [0, 200].map((offset) => preload(`/api/tasks?limit=200&offset=${offset}`)).join(", ")

/** A `Host` that can go into a header value as is: a name or address and an optional port. */
const SAFE_HOST = /^([A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(:[0-9]{1,5})?$/

/**
 * The page's policy: everything from this origin only, and the events socket (`ws:`/`wss:` of
 * the same host, spelled out for browsers whose `'self'` does not cover WebSockets).
 */
export const contentSecurityPolicy = (host: string | undefined): string => {
  const socket = host !== undefined && SAFE_HOST.test(host) ? ` ws://${host} wss://${host}` : ""
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    "manifest-src 'self'",
    `connect-src 'self'${socket}`,
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "object-src 'none'"
  ].join("; ")
}

const filesUnder = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? filesUnder(path) : [path]
  })

const smaller = (candidate: Buffer | undefined, than: Buffer): Buffer | undefined =>
  candidate !== undefined && candidate.length < than.length ? candidate : undefined

const readSibling = (file: string): Buffer | undefined => (existsSync(file) ? readFileSync(file) : undefined)

const loadAsset = (file: string, url: string): Asset => {
  const ext = extname(file).toLowerCase()
  const identity = readFileSync(file)
  let br: Buffer | undefined
  let gzip: Buffer | undefined
  if (COMPRESSIBLE.has(ext)) {
    br =
      readSibling(`${file}.br`) ??
      brotliCompressSync(identity, {
        params: { [constants.BROTLI_PARAM_QUALITY]: 9, [constants.BROTLI_PARAM_SIZE_HINT]: identity.length }
      })
    gzip = readSibling(`${file}.gz`) ?? gzipSync(identity, { level: 9 })
  }
  const document = ext === ".html"
  return {
    type: TYPES[ext] ?? "application/octet-stream",
    identity,
    br: smaller(br, identity),
    gzip: smaller(gzip, identity),
    // Weak: the same validator stands for every encoding of the file.
    etag: `W/"${createHash("sha256").update(identity).digest("base64url").slice(0, 22)}"`,
    cacheControl: url.startsWith("/assets/") ? IMMUTABLE : "no-cache",
    document
  }
}

/** What the app's paths answer to: the API lists OPTIONS in `Allow` as well, since it answers it. */
const ALLOW = "GET, HEAD, OPTIONS"

/**
 * Another method on one of the app's paths: `OPTIONS` is 204 with `Allow`, anything else 405 with
 * `Allow` and the API's error envelope, as the API answers a known path with another method.
 */
const otherMethod = (request: SiteRequest): void => {
  const headers = ["allow", ALLOW, "x-content-type-options", "nosniff", "cache-control", "no-store"]
  if (request.method === "OPTIONS") {
    request.respond(204, headers, "")
    return
  }
  const body = JSON.stringify({
    error: {
      code: "METHOD_NOT_ALLOWED",
      message: `${request.method} is not allowed on ${request.pathname}; allowed: ${ALLOW}`,
      details: { allow: ALLOW.split(", ") }
    }
  })
  headers.push("content-type", "application/json; charset=utf-8", "content-length", String(Buffer.byteLength(body)))
  request.respond(405, headers, body)
}

/** Which encodings the client accepts (`q=0` refuses one). */
const accepts = (header: string | undefined, coding: string): boolean => {
  if (header === undefined) return false
  for (const part of header.split(",")) {
    const [name, ...params] = part.trim().split(";")
    if (name?.trim().toLowerCase() !== coding) continue
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="))
    return q === undefined || Number(q.slice(2)) > 0
  }
  return false
}

const opaque = (tag: string): string => (tag.startsWith("W/") ? tag.slice(2) : tag)

/** `If-None-Match` compared weakly, as a GET's must be. */
const matches = (ifNoneMatch: string | undefined, etag: string): boolean =>
  ifNoneMatch?.split(",").some((t) => {
    const tag = t.trim()
    return tag === "*" || opaque(tag) === opaque(etag)
  }) === true

/** The built app's directory inside the installed `@taskwright/web` package, if it is there. */
export const findWebRoot = (): string | undefined => {
  try {
    const pkg = createRequire(import.meta.url).resolve("@taskwright/web/package.json")
    const dist = join(dirname(pkg), "dist")
    return existsSync(join(dist, "index.html")) ? dist : undefined
  } catch {
    return undefined
  }
}

const loaded = new Map<string, WebAssets>()

/**
 * Reads the app's files from `root` (default: the installed `@taskwright/web` package); none
 * when there is no build, in which case the server answers only the API.
 */
export const loadWebAssets = (root: string | undefined = findWebRoot()): WebAssets | undefined => {
  if (root === undefined || !existsSync(join(root, "index.html"))) return undefined
  const cached = loaded.get(root)
  if (cached !== undefined) return cached
  const assets = new Map<string, Asset>()
  for (const file of filesUnder(root)) {
    if (file.endsWith(".br") || file.endsWith(".gz")) continue
    const url = `/${relative(root, file).split(sep).join("/")}`
    assets.set(url, loadAsset(file, url))
  }
  const index = assets.get("/index.html")
  if (index === undefined) return undefined

  const serve = (request: SiteRequest): boolean => {
    const { method, pathname } = request
    if (pathname === "/api" || pathname.startsWith("/api/")) return false
    const asset = assets.get(pathname) ?? (CLIENT_ROUTES.some((r) => r.test(pathname)) ? index : undefined)
    if (asset === undefined) return false
    if (method !== "GET" && method !== "HEAD") {
      otherMethod(request)
      return true
    }
    const headers = [
      "content-type",
      asset.type,
      "cache-control",
      asset.cacheControl,
      "etag",
      asset.etag,
      "x-content-type-options",
      "nosniff",
      "cross-origin-resource-policy",
      "same-origin"
    ]
    if (asset.br !== undefined || asset.gzip !== undefined) headers.push("vary", "Accept-Encoding")
    if (asset.document) {
      headers.push(
        "link",
        pathname === "/" ? `${PRELOAD_ME}, ${PRELOAD_BOARD}` : PRELOAD_ME,
        "content-security-policy",
        contentSecurityPolicy(request.header("host")),
        "referrer-policy",
        "same-origin",
        "x-frame-options",
        "DENY",
        "cross-origin-opener-policy",
        "same-origin"
      )
    }
    if (matches(request.header("if-none-match"), asset.etag)) {
      request.respond(304, headers, "")
      return true
    }
    const acceptEncoding = request.header("accept-encoding")
    let body = asset.identity
    if (asset.br !== undefined && accepts(acceptEncoding, "br")) {
      body = asset.br
      headers.push("content-encoding", "br")
    } else if (asset.gzip !== undefined && accepts(acceptEncoding, "gzip")) {
      body = asset.gzip
      headers.push("content-encoding", "gzip")
    }
    headers.push("content-length", String(body.length))
    request.respond(200, headers, method === "HEAD" ? "" : body)
    return true
  }

  const web: WebAssets = { root, serve }
  loaded.set(root, web)
  return web
}

/**
 * The server's site handler: the app's files, or (without a build of `@taskwright/web`) a handler
 * that declines every request, so only the API answers.
 */
export const webSite = (root?: string): ((request: SiteRequest) => boolean) =>
  loadWebAssets(root)?.serve ?? (() => false)
