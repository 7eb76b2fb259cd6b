/**
 * The documents served beside the contract: the OpenAPI document (generated from the `HttpApi`,
 * with this server's version) and the API reference that reads it, drawn by Scalar's standalone
 * viewer served from this server (the `@scalar/api-reference` package), so the reference works on
 * a host with no way out and the page trusts no other origin.
 */
import { existsSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { OpenApi } from "@effect/platform"
import { TaskwrightApi } from "@taskwright/api"
import type { Document } from "./http/Dispatcher.js"
import { VERSION } from "./version.js"

/** The OpenAPI document of the contract, with this server's version. */
export const openApiDocument = (): OpenApi.OpenAPISpec => OpenApi.fromApi(documentedApi)

const documentedApi = TaskwrightApi.annotate(OpenApi.Version, VERSION)

const VIEWER_PACKAGE = "@scalar/api-reference"

/** The viewer's standalone bundle, found through its installed package (a file, never bundled into code). */
export interface Viewer {
  readonly version: string
  readonly file: string
}

/**
 * Finds Scalar's standalone bundle: the copy a build put in `dist/viewer/` beside this module
 * (the server's build and the bundled CLI's both carry one: the package is only a build-time
 * dependency), else the package itself where it is installed (the workspace, running from source).
 * Undefined when neither is there.
 */
export const findViewer = (from: string = import.meta.url): Viewer | undefined => {
  const copied = new URL("./viewer/viewer.json", from)
  try {
    const manifest = JSON.parse(readFileSync(copied, "utf8")) as { readonly version?: string; readonly file?: string }
    const file = new URL(`./viewer/${manifest.file ?? "scalar.js"}`, from)
    if (existsSync(file)) return { version: manifest.version ?? "0", file: fileURLToPath(file) }
  } catch {
    // not a build with its own copy
  }
  try {
    // The package's entry point, then up to its root (its exports do not name its package.json).
    let dir = dirname(createRequire(from).resolve(VIEWER_PACKAGE))
    for (;;) {
      const manifest = join(dir, "package.json")
      if (existsSync(manifest)) {
        const pkg = JSON.parse(readFileSync(manifest, "utf8")) as { readonly name?: string; readonly version?: string }
        if (pkg.name === VIEWER_PACKAGE) {
          const file = join(dir, "dist", "browser", "standalone.js")
          return existsSync(file) ? { version: pkg.version ?? "0", file } : undefined
        }
      }
      const parent = dirname(dir)
      if (parent === dir) return undefined
      dir = parent
    }
  } catch {
    return undefined
  }
}

/**
 * The reference page's policy: scripts, styles, images, fonts and requests from this origin only.
 * Inline styles are allowed because the viewer sets its theme with `<style>` elements; no inline
 * script is (the page configures the viewer through a data attribute).
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "object-src 'none'"
].join("; ")

const pageHeaders: ReadonlyArray<readonly [string, string]> = [
  ["content-security-policy", DOCS_CSP],
  ["referrer-policy", "no-referrer"],
  ["x-frame-options", "DENY"],
  ["cross-origin-opener-policy", "same-origin"],
  ["cache-control", "no-cache"]
]

/** What the viewer is told: the document, and none of its features that reach another service. */
const viewerConfiguration = {
  url: "/api/openapi.json",
  withDefaultFonts: false,
  telemetry: false,
  showDeveloperTools: "never",
  agent: { disabled: true },
  mcp: { disabled: true },
  documentDownloadType: "json",
  hideClientButton: true
}

const escapeAttribute = (text: string) =>
  text.replaceAll("&", "&amp;").replaceAll('"', "&quot;").replaceAll("<", "&lt;").replaceAll(">", "&gt;")

const docsPage = (script: string) => `<!doctype html>
<html lang="en">
  <head>
    <title>Taskwright API reference</title>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <link rel="icon" href="data:," />
  </head>
  <body>
    <script id="api-reference" data-url="/api/openapi.json" data-configuration="${escapeAttribute(JSON.stringify(viewerConfiguration))}"></script>
    <script src="${script}"></script>
  </body>
</html>
`

const missingViewerPage = `<!doctype html>
<html lang="en">
  <head>
    <title>Taskwright API reference</title>
    <meta charset="utf-8" />
  </head>
  <body>
    <h1>Taskwright API reference</h1>
    <p>The reference viewer (the ${VIEWER_PACKAGE} package) is not installed beside this server.
    The OpenAPI document is at <a href="/api/openapi.json">/api/openapi.json</a>.</p>
  </body>
</html>
`

/**
 * `/api/openapi.json` and `/api/docs` (each built on its first request: start-up time and memory
 * most servers never need), and the viewer's script at a path that names its version, so a
 * browser keeps it until the viewer is upgraded.
 */
export const makeApiDocuments = (viewer: Viewer | undefined = findViewer()): ReadonlyArray<Document> => {
  const openapi: Document = {
    path: "/api/openapi.json",
    contentType: "application/json; charset=utf-8",
    body: () => JSON.stringify(openApiDocument())
  }
  if (viewer === undefined) {
    return [
      openapi,
      { path: "/api/docs", contentType: "text/html; charset=utf-8", body: missingViewerPage, headers: pageHeaders }
    ]
  }
  const script = `/api/docs/scalar-${viewer.version}.js`
  return [
    openapi,
    { path: "/api/docs", contentType: "text/html; charset=utf-8", body: () => docsPage(script), headers: pageHeaders },
    {
      path: script,
      contentType: "text/javascript; charset=utf-8",
      body: () => readFileSync(viewer.file, "utf8"),
      headers: [
        ["cache-control", "public, max-age=31536000, immutable"],
        ["cross-origin-resource-policy", "same-origin"]
      ]
    }
  ]
}

/** The documents of this server. */
export const apiDocuments: ReadonlyArray<Document> = makeApiDocuments()
