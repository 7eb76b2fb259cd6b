/** Decode failures answer in words: each field, what is wrong with it, and the bound it broke. */
import { decoder, TaskCreate, TaskListParams } from "@taskwright/domain"
import { Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"

const failure = (effect: Effect.Effect<unknown, { readonly message: string; readonly details: unknown }>) => {
  const exit = Effect.runSyncExit(effect)
  if (Exit.isSuccess(exit)) throw new Error("expected a failure")
  return exit.cause._tag === "Fail" ? exit.cause.error : Effect.runSync(Effect.die(exit.cause))
}

describe("decoder", () => {
  const create = decoder(TaskCreate, "body")
  const list = decoder(TaskListParams, "query")

  it("says what is wrong with each field, in words, with the bounds", () => {
    const error = failure(create({ title: "", priority: "asap", labels: ["x".repeat(51)], extra: 1 }))
    expect(error.details).toEqual({
      fields: [
        { path: "extra", message: "extra is not a field of this request" },
        { path: "title", message: "title must be 1 to 500 characters long", bounds: { minLength: 1, maxLength: 500 } },
        { path: "priority", message: 'priority must be one of "low", "medium", "high", "urgent"' },
        {
          path: "labels.0",
          message: "a label name must be 1 to 50 characters long",
          bounds: { minLength: 1, maxLength: 50 }
        }
      ]
    })
    expect(error.message).toBe("extra is not a field of this request")
  })

  it("a body that is not an object is named as such", () => {
    for (const body of [[1], "title", 42, null]) {
      expect(failure(create(body)).message).toBe("the body must be a JSON object")
    }
  })

  it("no message carries schema notation", () => {
    for (const bad of [{ title: 5 }, { title: "x".repeat(501) }, { title: "ok", project_id: "p" }, {}]) {
      const { details } = failure(create(bad)) as { details: { fields: Array<{ message: string }> } }
      for (const field of details.fields) expect(field.message).not.toMatch(/Expected|readonly|\||<->|=>|Brand/)
    }
  })

  it("paging takes numbers and query digits alike, with defaults", () => {
    expect(Effect.runSync(list({}))).toEqual({ limit: 50, offset: 0 })
    expect(Effect.runSync(list({ limit: 5, offset: "10" }))).toEqual({ limit: 5, offset: 10 })
    expect(failure(list({ limit: 100_000 })).message).toBe("limit must be a whole number from 1 to 200")
    expect(failure(list({ offset: -5 })).message).toBe("offset must be a whole number from 0 to 1000000000")
  })
})
