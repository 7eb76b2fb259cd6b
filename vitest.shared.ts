import { defineProject } from "vitest/config"

// Tests import the workspace packages' TypeScript sources (the `@taskwright/source` export
// condition), so `npm test` needs no build first.
const conditions = ["@taskwright/source", "module", "node", "development|production"]

export const packageProject = (name: string) =>
  defineProject({
    resolve: { conditions },
    ssr: { resolve: { conditions } },
    test: {
      name,
      include: ["test/**/*.test.ts"],
      testTimeout: 30_000,
      hookTimeout: 60_000
    }
  })
