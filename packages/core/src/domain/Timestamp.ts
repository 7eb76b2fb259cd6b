import { ParseResult, Schema } from "effect"

/** ISO 8601 UTC with milliseconds, `2026-11-21T23:43:04.123Z`: the only timestamp shape on the wire and at rest. */
export const Timestamp = Schema.String.pipe(
  Schema.pattern(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, {
    message: () => "must be an ISO 8601 UTC timestamp like 2026-11-21T23:43:04.123Z"
  })
)
export type Timestamp = typeof Timestamp.Type

/** The current time as a {@link Timestamp}. */
export const now = (): Timestamp => new Date().toISOString()

/** Accepts any ISO 8601 instant a client may send (`since=...`) and normalises it. */
export const TimestampFromInput = Schema.transformOrFail(Schema.String, Timestamp, {
  strict: true,
  decode: (s, _, ast) => {
    const ms = /^\d{4}-\d{2}-\d{2}T/.test(s) ? Date.parse(s) : Number.NaN
    return Number.isNaN(ms)
      ? ParseResult.fail(new ParseResult.Type(ast, s, "must be an ISO 8601 timestamp"))
      : ParseResult.succeed(new Date(ms).toISOString())
  },
  encode: ParseResult.succeed
})
