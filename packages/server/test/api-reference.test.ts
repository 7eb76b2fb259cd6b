/**
 * docs/api.md, the reference readable where the repository is hosted, is what
 * scripts/api-reference.mjs makes of the document the server serves: a change to the contract
 * without the page regenerated fails here. `UPDATE_API_REFERENCE=1` rewrites the page instead.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { startTestServer } from "@taskwright/testing"
import { describe, expect, it } from "vitest"
import { REFERENCE_FILE, renderReference } from "../../../scripts/api-reference.mjs"

describe("docs/api.md", () => {
  it("is the reference generated from the served OpenAPI document", async () => {
    const server = await startTestServer({ store: "sqlite" })
    try {
      const r = await server.request<Record<string, unknown>>("GET", "/api/openapi.json")
      const page = renderReference(r.body)
      if (process.env.UPDATE_API_REFERENCE === "1") writeFileSync(REFERENCE_FILE, page)
      const committed = readFileSync(REFERENCE_FILE, "utf8")
      expect(
        committed === page,
        "docs/api.md is out of date: run `npm run build && node scripts/api-reference.mjs` (or this test with UPDATE_API_REFERENCE=1)"
      ).toBe(true)
      // It reads as a reference: every operation of the document has its section.
      for (const item of Object.values(r.body.paths as Record<string, Record<string, { summary: string }>>)) {
        for (const op of Object.values(item)) expect(page).toContain(`### ${op.summary}`)
      }
    } finally {
      await server.close()
    }
  })
})
