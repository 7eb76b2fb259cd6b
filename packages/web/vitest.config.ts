import { defineProject, mergeConfig } from "vitest/config"
import { packageProject } from "../../vitest.shared.js"

export default mergeConfig(
  packageProject("web"),
  defineProject({
    test: {
      globalSetup: ["./test/global-setup.ts"],
      // A browser flow with an agent run takes a while on a loaded two-core machine.
      testTimeout: 180_000,
      // One browser suite at a time: each drives Chromium and a server, and the budgets suite
      // measures rendering, which a second browser on the same two cores would distort.
      pool: "forks",
      // After every other project, not beside one: a suite of the server's (a flood, a bench of
      // its own) on the other core would be what the budgets measure.
      sequence: { groupOrder: 1 },
      poolOptions: { forks: { singleFork: true } },
      hookTimeout: 120_000,
      // What a page shows next can take seconds on a loaded machine (a default of 1 s failed
      // there); a wait that means "at once" says so with its own timeout.
      expect: { poll: { timeout: 10_000 } }
    }
  })
)
