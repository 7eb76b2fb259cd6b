import { mkdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { defineProject } from "vitest/config"

// Tests import the workspace packages' TypeScript sources (the `@taskwright/source` export
// condition), so `npm test` needs no build first.
const conditions = ["@taskwright/source", "module", "node", "development|production"]

// The tests' temporary directory, which test servers also take as their projects root: one of
// its own, so that a checkout made in the system's temporary directory (a CI clone in `mktemp -d`)
// is not inside the projects root, which the sandbox hides from agents (the scripted agent the
// tests run lives in the checkout).
const testTmp = join(tmpdir(), "taskwright-tests")
mkdirSync(testTmp, { recursive: true })

export const packageProject = (name: string) =>
  defineProject({
    resolve: { conditions },
    ssr: { resolve: { conditions } },
    test: {
      name,
      include: ["test/**/*.test.ts"],
      env: { TMPDIR: testTmp },
      testTimeout: 30_000,
      hookTimeout: 60_000
    }
  })
