import { startTestServer } from "@taskwright/testing"
import { expect, it } from "vitest"

it("serves health", async () => {
  const s = await startTestServer()
  const r = await s.request("GET", "/api/health")
  expect(r.status).toBe(200)
  await s.close()
})
