import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { brotliCompressSync, constants, gzipSync } from "node:zlib"
import { defineConfig, type Plugin } from "vite"

const COMPRESSIBLE = /\.(js|css|html|svg|json|txt|map)$/

const filesUnder = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? filesUnder(path) : [path]
  })

/**
 * Writes `.br` and `.gz` beside every text asset once the bundle is on disk, at the strongest
 * settings: the server sends them as they are, so no request pays for compression.
 */
const precompress = (): Plugin => {
  let outDir = "dist"
  return {
    name: "taskwright-precompress",
    apply: "build",
    configResolved(config) {
      outDir = resolve(config.root, config.build.outDir)
    },
    closeBundle() {
      for (const file of filesUnder(outDir)) {
        if (!COMPRESSIBLE.test(file)) continue
        const data = readFileSync(file)
        writeFileSync(
          `${file}.br`,
          brotliCompressSync(data, {
            params: {
              [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
              [constants.BROTLI_PARAM_SIZE_HINT]: data.length
            }
          })
        )
        writeFileSync(`${file}.gz`, gzipSync(data, { level: 9 }))
      }
    }
  }
}

export default defineConfig({
  // jsxDev off: a build started from the test runner (NODE_ENV=test) must equal a production one.
  esbuild: { jsx: "automatic", jsxImportSource: "preact", jsxDev: false },
  build: {
    target: "es2022",
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    // Every browser this targets has module preloading; the polyfill would be dead weight.
    modulePreload: { polyfill: false },
    reportCompressedSize: false
  },
  plugins: [precompress()],
  // `npm run dev -w packages/web` against a server on :3000. The Host header is kept, so the
  // API's CSRF check sees the page's own origin.
  server: { proxy: { "/api": { target: "http://127.0.0.1:3000", ws: true } } }
})
