/**
 * Identifiers of every resource, as branded schemas, and the random generator behind them.
 * Shapes follow DECISIONS.md: `proj_` + 16 base62 characters, tasks are store-assigned integers.
 */
import { randomBytes } from "node:crypto"
import { ParseResult, Schema } from "effect"

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** `n` base62 characters from the CSPRNG, without modulo bias (rejection sampling). */
export const randomBase62 = (n: number): string => {
  let out = ""
  while (out.length < n) {
    for (const byte of randomBytes(n * 2)) {
      // 248 = 4 * 62: bytes at or above it would favour the first characters.
      if (byte < 248) out += BASE62[byte % 62]
      if (out.length === n) break
    }
  }
  return out
}

const prefixedId = <const Brand extends string>(prefix: string, brand: Brand) =>
  Schema.String.pipe(
    Schema.pattern(new RegExp(`^${prefix}_[0-9A-Za-z]{16}$`), {
      message: () => `must look like ${prefix}_ followed by 16 letters or digits`
    }),
    Schema.brand(brand)
  )

export const ProjectId = prefixedId("proj", "ProjectId")
export type ProjectId = typeof ProjectId.Type
export const RunId = prefixedId("run", "RunId")
export type RunId = typeof RunId.Type
export const LabelId = prefixedId("lbl", "LabelId")
export type LabelId = typeof LabelId.Type
export const UserId = prefixedId("usr", "UserId")
export type UserId = typeof UserId.Type
export const ApiKeyId = prefixedId("key", "ApiKeyId")
export type ApiKeyId = typeof ApiKeyId.Type

/** Task ids are positive integers assigned by the store. */
export const TaskId = Schema.Int.pipe(
  Schema.positive(),
  Schema.lessThanOrEqualTo(Number.MAX_SAFE_INTEGER),
  Schema.brand("TaskId")
)
export type TaskId = typeof TaskId.Type

/**
 * A task id as it arrives in a path segment: digits only, so `/api/tasks/1e3` or `/api/tasks/0x1`
 * is a 400. One transformation with the checks inside, because it is decoded on every task request.
 */
export const TaskIdFromString = Schema.transformOrFail(Schema.String, Schema.Number.pipe(Schema.brand("TaskId")), {
  strict: true,
  decode: (s, _, ast) => {
    const n = /^[1-9][0-9]{0,15}$/.test(s) ? Number(s) : Number.NaN
    return n <= Number.MAX_SAFE_INTEGER
      ? ParseResult.succeed(n)
      : ParseResult.fail(new ParseResult.Type(ast, s, "must be a positive integer"))
  },
  encode: (n) => ParseResult.succeed(String(n))
})

export const newProjectId = (): ProjectId => ProjectId.make(`proj_${randomBase62(16)}`)
export const newRunId = (): RunId => RunId.make(`run_${randomBase62(16)}`)
export const newLabelId = (): LabelId => LabelId.make(`lbl_${randomBase62(16)}`)
export const newUserId = (): UserId => UserId.make(`usr_${randomBase62(16)}`)
export const newApiKeyId = (): ApiKeyId => ApiKeyId.make(`key_${randomBase62(16)}`)
