import { ParseResult, Schema } from "effect"

/** ISO 8601 UTC with milliseconds, `2026-11-21T23:43:04.123Z`: the only timestamp shape on the wire and at rest. */
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
export const Timestamp = Schema.String.pipe(
  Schema.pattern(ISO_MS, {
    message: () => "must be an ISO 8601 UTC timestamp like 2026-11-21T23:43:04.123Z",
    description: "An ISO 8601 UTC time with milliseconds.",
    jsonSchema: { pattern: ISO_MS.source, format: "date-time", minLength: 24, maxLength: 24 },
    examples: ["2026-11-21T23:43:04.123Z"]
  })
)
export type Timestamp = typeof Timestamp.Type

let lastMs = Number.NaN
let lastText = ""

/**
 * The current time as a {@link Timestamp}. Formatted once per millisecond: a busy server asks
 * several times a millisecond, and formatting costs more than a request's other bookkeeping.
 */
export const now = (): Timestamp => {
  const ms = Date.now()
  if (ms !== lastMs) {
    lastMs = ms
    lastText = new Date(ms).toISOString()
  }
  return lastText
}

/** Accepts any ISO 8601 instant a client may send (`since=...`) and normalises it. */
export const TimestampFromInput = Schema.transformOrFail(
  Schema.String.pipe(
    Schema.maxLength(64, {
      message: () => "must be an ISO 8601 timestamp like 2026-11-21T23:43:04.123Z",
      title: "time"
    })
  ),
  Timestamp,
  {
    strict: true,
    decode: (s, _, ast) => {
      const ms = /^\d{4}-\d{2}-\d{2}T/.test(s) ? Date.parse(s) : Number.NaN
      return Number.isNaN(ms)
        ? ParseResult.fail(new ParseResult.Type(ast, s, "must be an ISO 8601 timestamp"))
        : ParseResult.succeed(new Date(ms).toISOString())
    },
    encode: ParseResult.succeed
  }
).annotations({
  description: "An ISO 8601 time (a time zone offset is honoured; UTC when none is given).",
  jsonSchema: { format: "date-time" }
})
