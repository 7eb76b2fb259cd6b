/**
 * Numbers and text as the API answers and takes them, with their bounds stated where a reader of
 * the OpenAPI document sees them. Inputs are checked against their bounds; what the server answers
 * is documented with the bounds its inputs and its own code keep, without being checked again when
 * a client reads it (a typed client must not fail on an answer because of a documentation detail).
 */
import { Schema } from "effect"

/** The largest integer a JSON number carries exactly. */
export const MAX_SAFE = Number.MAX_SAFE_INTEGER

/** A whole number the server answers, from `minimum` to `maximum` (default: 0 to {@link MAX_SAFE}). */
export const Count = (description: string, minimum = 0, maximum = MAX_SAFE) =>
  Schema.Number.annotations({
    jsonSchema: { type: "integer", format: maximum > 2_147_483_647 ? "int64" : "int32", minimum, maximum, description }
  })

/** Text the server answers, at most `maxLength` characters. */
export const Text = (maxLength: number, description?: string) =>
  Schema.String.annotations({ jsonSchema: { maxLength }, ...(description === undefined ? {} : { description }) })

/** Text the server answers, of the shape `pattern` and at most `maxLength` characters. */
export const ShapedText = (pattern: RegExp, maxLength: number, description: string) =>
  Schema.String.annotations({ jsonSchema: { pattern: pattern.source, maxLength }, description })

/**
 * A whole number from `min` to `max` that a client sends in a body, checked, with one message in
 * words for every way it can be wrong.
 */
export const WholeNumberIn = (name: string, min: number, max: number, description: string) => {
  const message = () => `${name} must be a whole number from ${min} to ${max}`
  return Schema.Number.annotations({ message }).pipe(
    Schema.int({ message }),
    Schema.between(min, max, {
      message,
      title: name,
      description,
      jsonSchema: { minimum: min, maximum: max, format: max > 2_147_483_647 ? "int64" : "int32" }
    })
  )
}

/**
 * Text a client sends with the spaces around it dropped, then 1 to `max` characters, with one
 * message for both bounds. The document describes the text as sent.
 */
export const TrimmedText = (message: string, max: number, description: string) =>
  Schema.compose(
    Schema.Trim,
    Schema.String.pipe(
      Schema.minLength(1, { message: () => message }),
      Schema.maxLength(max, { message: () => message })
    )
  ).annotations({ jsonSchema: { type: "string", minLength: 1, maxLength: max, description } })
