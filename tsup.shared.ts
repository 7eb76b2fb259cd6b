import { defineConfig } from "tsup"

/** The build of every library package: ESM with declarations, one entry. */
export const libraryBuild = defineConfig({
  entry: ["src/index.ts"],
  format: ["esm"],
  target: "node20",
  dts: { compilerOptions: { composite: false } },
  sourcemap: true,
  clean: true
})
