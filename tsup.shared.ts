import { defineConfig } from "tsup"

/** The build of every library package: ESM with declarations, one entry. */
export const libraryBuild = defineConfig({
  entry: ["src/index.ts"],
  format: ["esm"],
  target: "node20",
  dts: { compilerOptions: { composite: false } },
  sourcemap: true,
  clean: true,
  // Keep `node:` in built-in imports (tsup strips it by default): Node 20 needs no compatibility,
  // and a bundler or test runner that inlines the build (vite-node, in a workspace) takes a bare
  // "timers/promises" for a file path.
  removeNodeProtocol: false
})
