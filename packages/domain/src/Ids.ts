/**
 * Identifiers of every resource, as branded schemas, and the random generator behind them.
 * Shapes follow DECISIONS.md: `proj_` + 16 base62 characters, tasks are store-assigned integers.
 */
import { ParseResult, Schema } from "effect"

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** `n` base62 characters from the CSPRNG, without modulo bias (rejection sampling). */
export const randomBase62 = (n: number): string => {
  let out = ""
  while (out.length < n) {
    // Web Crypto: the same CSPRNG on Node and in a browser.
    for (const byte of globalThis.crypto.getRandomValues(new Uint8Array(n * 2))) {
      // 248 = 4 * 62: bytes at or above it would favour the first characters.
      if (byte < 248) out += BASE62[byte % 62]
      if (out.length === n) break
    }
  }
  return out
}

/** `prefix` + `_` + 16 base62 characters: the id of a `what`, with an example for the reference. */
const prefixedId = <const Brand extends string>(prefix: string, brand: Brand, what: string, example: string) => {
  const message = () => `must look like ${prefix}_ followed by 16 letters or digits`
  const pattern = new RegExp(`^${prefix}_[0-9A-Za-z]{16}$`)
  return Schema.String.pipe(
    Schema.length(prefix.length + 17, { message }),
    Schema.pattern(pattern, {
      message,
      title: `${what.replace(/^an? /, "")} id`,
      description: `The id of ${what}: ${prefix}_ followed by 16 letters or digits.`,
      examples: [example]
    }),
    Schema.brand(brand)
  )
}

export const ProjectId = prefixedId("proj", "ProjectId", "a project", "proj_4bT9xQ2mLk7Wz1Rv")
export type ProjectId = typeof ProjectId.Type
export const RunId = prefixedId("run", "RunId", "an agent run", "run_8Hc3JqN5vX0pTe6Y")
export type RunId = typeof RunId.Type
export const LabelId = prefixedId("lbl", "LabelId", "a label", "lbl_2Fk8sPq0ZrW4mN7d")
export type LabelId = typeof LabelId.Type
export const UserId = prefixedId("usr", "UserId", "a user", "usr_6Vn1bR9eTy3Ka5Lq")
export type UserId = typeof UserId.Type
export const ApiKeyId = prefixedId("key", "ApiKeyId", "an API key", "key_0Qm7Zc2Wx9Hs4Pd1")
export type ApiKeyId = typeof ApiKeyId.Type

/** Task ids are positive integers assigned by the store. */
export const TaskId = Schema.Number.pipe(
  Schema.int(),
  Schema.positive(),
  Schema.lessThanOrEqualTo(Number.MAX_SAFE_INTEGER, {
    title: "task id",
    description: "The id of a task: a positive whole number assigned by the service.",
    jsonSchema: { maximum: Number.MAX_SAFE_INTEGER, format: "int64" },
    examples: [42]
  }),
  Schema.brand("TaskId")
)
export type TaskId = typeof TaskId.Type

const TASK_ID_DIGITS = /^[1-9][0-9]{0,15}$/

/**
 * A task id as it arrives in a path segment: digits only, so `/api/tasks/1e3` or `/api/tasks/0x1`
 * is a 400. One transformation with the checks inside, because it is decoded on every task request.
 */
export const TaskIdFromString = Schema.transformOrFail(Schema.String, Schema.Number.pipe(Schema.brand("TaskId")), {
  strict: true,
  decode: (s, _, ast) => {
    const n = TASK_ID_DIGITS.test(s) ? Number(s) : Number.NaN
    return n <= Number.MAX_SAFE_INTEGER
      ? ParseResult.succeed(n)
      : ParseResult.fail(new ParseResult.Type(ast, s, "must be a positive integer"))
  },
  encode: (n) => ParseResult.succeed(String(n))
}).annotations({
  description: "The id of a task: a positive whole number assigned by the service.",
  jsonSchema: { pattern: "^[1-9][0-9]{0,15}$", maxLength: 16 },
  examples: [TaskId.make(42)]
})

export const newProjectId = (): ProjectId => ProjectId.make(`proj_${randomBase62(16)}`)
export const newRunId = (): RunId => RunId.make(`run_${randomBase62(16)}`)
export const newLabelId = (): LabelId => LabelId.make(`lbl_${randomBase62(16)}`)
export const newUserId = (): UserId => UserId.make(`usr_${randomBase62(16)}`)
export const newApiKeyId = (): ApiKeyId => ApiKeyId.make(`key_${randomBase62(16)}`)
