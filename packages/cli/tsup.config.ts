import { fileURLToPath } from "node:url"
import { defineConfig } from "tsup"
import { copyViewer } from "../../scripts/copy-viewer.mjs"
import { namespaceImports } from "./scripts/namespace-imports.js"

// The CLI ships as one bundle with its dependencies inlined (Effect included): start-up and
// per-request cost both measured lower than loading hundreds of ESM modules (docs/serving.md).
// Native addons and optional native drivers stay external. The bundle is CommonJS so that the
// entry (`dist/main.js`, src/start.ts) can compile it through V8's code cache, which Node 20
// offers to a script and not to an ES module.
export default defineConfig([
  {
    entry: { cli: "src/main.ts" },
    format: ["cjs"],
    target: "node20",
    platform: "node",
    sourcemap: false,
    // Everything but the entry, which the other build writes at the same time.
    clean: ["!main.js"],
    minifyWhitespace: true,
    minifySyntax: true,
    treeshake: true,
    noExternal: [/^(?!better-sqlite3|@node-rs\/argon2|pg-native)/],
    external: ["better-sqlite3", "@node-rs/argon2", "pg-native"],
    // The bundle's own location, where the source asks for `import.meta.url`.
    define: { "import.meta.url": "__taskwrightBundleUrl" },
    banner: { js: "const __taskwrightBundleUrl = require('node:url').pathToFileURL(__filename).href;" },
    // Stand-ins for code never called here: @effect/cli's file-option parsers (230 KB less to
    // compile at every start) and fast-check, which Effect's Schema imports for arbitraries.
    esbuildOptions: (options) => {
      const parsers = fileURLToPath(new URL("./src/unused-parsers.ts", import.meta.url))
      const fastCheck = fileURLToPath(new URL("./src/unused-fast-check.ts", import.meta.url))
      options.alias = { yaml: parsers, toml: parsers, ini: parsers, "fast-check": fastCheck }
    },
    esbuildPlugins: [
      // Effect imported module by module, which esbuild tree-shakes, rather than through its
      // barrels, which it does not: 2.2 MB became 1.6 (scripts/namespace-imports.ts).
      namespaceImports(),
      // pg's socket module, replaced by its Node branch: deciding whether this is a Cloudflare
      // Worker loaded Node's undici at every start on PostgreSQL (src/pg-node-stream.ts).
      {
        name: "pg-node-stream",
        setup: (build) => {
          const nodeStream = fileURLToPath(new URL("./src/pg-node-stream.ts", import.meta.url))
          build.onResolve({ filter: /^\.\/stream$/ }, (args) =>
            /[\\/]pg[\\/]lib[\\/]connection\.js$/.test(args.importer) ? { path: nodeStream } : undefined
          )
        }
      }
    ],
    // The API reference viewer is a file the server serves, not code: it goes beside the bundle.
    onSuccess: async () => copyViewer("dist")
  },
  {
    entry: { main: "src/start.ts" },
    format: ["esm"],
    target: "node20",
    platform: "node",
    sourcemap: false,
    clean: false,
    banner: { js: "#!/usr/bin/env node" }
  }
])
