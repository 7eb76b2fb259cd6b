/**
 * The decoders' fast path answers only what Effect's decoder would answer: for every request
 * schema and generated input (valid, nearly valid, anything), when the fast path decodes, Effect
 * decodes too, to the same value with the same key order; when Effect refuses, the fast path has
 * left it to Effect. And it does take the valid inputs, or it would be dead weight.
 */
import {
  AgentUpdate,
  ApiKeyCreate,
  ApiKeyListParams,
  EventSubscription,
  LabelCreate,
  LabelListParams,
  LoginRequest,
  ProjectCreate,
  ProjectDeleteParams,
  ProjectListParams,
  PullRequestReviewCreate,
  ReviewCreate,
  RunLogsParams,
  RunStart,
  TaskCreate,
  TaskListParams,
  TaskUpdate,
  TokenRequest,
  UserCreate
} from "@taskwright/domain"
import { Arbitrary, Either, FastCheck as fc, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { compileFastDecode, type ExcessProperty, UNSURE } from "../src/FastDecode.js"

const bodies = {
  AgentUpdate,
  ApiKeyCreate,
  LabelCreate,
  LoginRequest,
  ProjectCreate,
  PullRequestReviewCreate,
  ReviewCreate,
  RunStart,
  TaskCreate,
  TaskUpdate,
  TokenRequest,
  UserCreate
} as const
const queries = {
  ApiKeyListParams,
  EventSubscription,
  LabelListParams,
  ProjectDeleteParams,
  ProjectListParams,
  RunLogsParams,
  TaskListParams
} as const

// Effect's arbitrary of each schema's type, encoded: what a well-behaved client sends. (Its
// arbitraries of some refinements, `Trimmed` among them, also give values their schema refuses:
// those are left out.) Where it cannot make one (patterns with lookaheads, template literals),
// inputs written here.
const written: Record<string, fc.Arbitrary<unknown>> = {
  RunStart: fc.record(
    {
      agent: fc.constantFrom("claude-code", "codex", "gemini", "command", "my-agent"),
      autonomy: fc.constantFrom("read-only", "workspace-write", "danger-full-access"),
      branch: fc.constantFrom("taskwright/task-42", "feature/login", "fix-1")
    },
    { requiredKeys: ["agent"] }
  ),
  PullRequestReviewCreate: fc.record(
    {
      repo: fc.constantFrom("octo-org/hello-world", "a/b", "example/website.git"),
      pr_number: fc.integer({ min: 1, max: 100_000 }),
      agent: fc.constantFrom("claude-code", "codex"),
      post: fc.boolean()
    },
    { requiredKeys: ["repo", "pr_number", "agent"] }
  ),
  RunLogsParams: fc.record(
    {
      since: fc
        .date({ min: new Date("2020-01-01T00:00:00Z"), max: new Date("2030-01-01T00:00:00Z"), noInvalidDate: true })
        .map((d) => d.toISOString()),
      after: fc.nat().map(String),
      limit: fc.integer({ min: 1, max: 1000 }).map(String)
    },
    { requiredKeys: [] }
  ),
  EventSubscription: fc.record(
    {
      since: fc.oneof(fc.nat().map(String), fc.nat()),
      topics: fc.array(fc.constantFrom("tasks", "projects", "labels", "runs", "run:run_0123456789abcdef"), {
        maxLength: 5
      })
    },
    { requiredKeys: [] }
  )
}

const validInputs = (name: string, schema: Schema.Schema.AnyNoContext): fc.Arbitrary<unknown> => {
  const byHand = written[name]
  if (byHand !== undefined) return byHand
  const encode = Schema.encodeEither(schema)
  return Arbitrary.make(schema)
    .map((value) => encode(value))
    .filter(Either.isRight)
    .map((encoded) => encoded.right)
}

/** Left to Effect whole: a template literal (`run:<run_id>`) and a record (an agent's `env`) are not compiled. */
const notCompiled = new Set(["EventSubscription", "AgentUpdate"])

/** A valid input with one thing changed: a field replaced, added or removed, or padded with blanks. */
const nearlyValid = (valid: fc.Arbitrary<unknown>) =>
  fc
    .tuple(valid, fc.nat(), fc.jsonValue({ maxDepth: 2 }), fc.constantFrom("replace", "add", "remove", "pad"))
    .map(([input, n, junk, how]) => {
      if (typeof input !== "object" || input === null) return input
      const copy: Record<string, unknown> = { ...(input as Record<string, unknown>) }
      const keys = Object.keys(copy)
      const key = keys[n % Math.max(1, keys.length)]
      if (how === "add") copy[`extra${n}`] = junk
      else if (key === undefined) return copy
      else if (how === "remove") delete copy[key]
      else if (how === "pad") copy[key] = typeof copy[key] === "string" ? ` ${copy[key]}\t` : junk
      else copy[key] = junk
      return copy
    })

/** Both forms of the fast path: structs as generated code, and as closures (where code cannot be generated). */
const forms = [{ generateCode: true }, { generateCode: false }] as const

const check = (schema: Schema.Schema.AnyNoContext, excess: ExcessProperty, input: unknown) => {
  const effect = Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: excess })(input)
  for (const form of forms) {
    const fast = compileFastDecode(schema.ast, excess, form)
    const answer = fast === undefined ? UNSURE : fast(input)
    if (answer === UNSURE) continue
    expect(Either.isRight(effect), `fast path decoded what Effect refuses: ${JSON.stringify(input)}`).toBe(true)
    if (Either.isRight(effect)) {
      expect(answer).toStrictEqual(effect.right)
      expect(JSON.stringify(answer)).toBe(JSON.stringify(effect.right))
    }
  }
}

describe.each([
  ...Object.entries(bodies).map(([name, schema]) => [name, schema, "error"] as const),
  ...Object.entries(queries).map(([name, schema]) => [name, schema, "ignore"] as const)
])("the fast decode of %s", (name, schema: Schema.Schema.AnyNoContext, excess) => {
  const valid = validInputs(name, schema)
  const fast = compileFastDecode(schema.ast, excess)

  it("compiles, or is left to Effect whole", () => {
    expect(fast === undefined).toBe(notCompiled.has(name))
  })

  it("answers as Effect does for valid, nearly valid and arbitrary input", () => {
    fc.assert(
      fc.property(fc.oneof(valid, nearlyValid(valid), fc.jsonValue()), (input) => check(schema, excess, input)),
      { numRuns: 1000 }
    )
  })

  it.skipIf(notCompiled.has(name))("decodes valid input itself", () => {
    let taken = 0
    let runs = 0
    fc.assert(
      fc.property(valid, (input) => {
        runs++
        if (fast !== undefined && fast(input) !== UNSURE) taken++
      }),
      { numRuns: 200 }
    )
    // Generated strings may hold what the fast path leaves to Effect (a lone surrogate, ...).
    expect(taken / runs).toBeGreaterThan(0.5)
  })
})

describe.each(forms)("the fast decode of a task (%o)", (form) => {
  const fast = compileFastDecode(TaskCreate.ast, "error", form)
  it("trims, keeps the key order of the schema, and refuses to guess", () => {
    expect(fast?.({ labels: ["  bug "], title: "  Fix it ", priority: "high" })).toStrictEqual({
      title: "Fix it",
      priority: "high",
      labels: ["bug"]
    })
    expect(fast?.({ title: "   " })).toBe(UNSURE)
    expect(fast?.({ title: "x", extra: 1 })).toBe(UNSURE)
    expect(fast?.({ title: "x", priority: "asap" })).toBe(UNSURE)
    expect(fast?.({ title: "x", description: undefined })).toStrictEqual({ title: "x", description: undefined })
    expect(fast?.([{ title: "x" }])).toBe(UNSURE)
    expect(fast?.({ title: "x", [Symbol("extra")]: 1 })).toBe(UNSURE)
    expect(fast?.(JSON.parse('{"title":"x","__proto__":{"admin":true}}'))).toBe(UNSURE)
    const hidden = { title: "x" }
    Object.defineProperty(hidden, "extra", { value: 1, enumerable: false })
    expect(fast?.(hidden)).toBe(UNSURE)
  })
})
