import { defineConfig } from "tsup"

// The CLI ships as one bundle (workspace packages inlined): faster start-up, measured in the server README.
export default defineConfig({
  entry: ["src/main.ts"],
  format: ["esm"],
  target: "node20",
  platform: "node",
  sourcemap: true,
  clean: true,
  noExternal: [/^@taskwright\//],
  external: [/^(?!@taskwright\/)[^./]/],
  banner: { js: "#!/usr/bin/env node" }
})
