import { fileURLToPath } from "node:url"
import { defineConfig } from "tsup"
import { copyViewer } from "../../scripts/copy-viewer.mjs"

// The CLI ships as one bundle with its dependencies inlined (Effect included): start-up and
// per-request cost both measured lower than loading hundreds of ESM modules (docs/serving.md).
// Native addons and optional native drivers stay external.
export default defineConfig({
  entry: ["src/main.ts"],
  format: ["esm"],
  target: "node20",
  platform: "node",
  sourcemap: false,
  clean: true,
  minifyWhitespace: true,
  minifySyntax: true,
  treeshake: true,
  noExternal: [/^(?!better-sqlite3|@node-rs\/argon2|pg-native)/],
  external: ["better-sqlite3", "@node-rs/argon2", "pg-native"],
  // @effect/cli's file-option parsers, never called here: 230 KB less to compile at every start.
  esbuildOptions: (options) => {
    const standIn = fileURLToPath(new URL("./src/unused-parsers.ts", import.meta.url))
    options.alias = { yaml: standIn, toml: standIn, ini: standIn }
  },
  // The API reference viewer is a file the server serves, not code: it goes beside the bundle.
  onSuccess: async () => copyViewer("dist"),
  banner: {
    // Bundled CommonJS dependencies (pg, ws) call require(); give the ESM bundle one.
    js: "#!/usr/bin/env node\nimport { createRequire as __twCreateRequire } from 'node:module'; const require = __twCreateRequire(import.meta.url);"
  }
})
