import { Schema } from "effect"
import { Count } from "./Bounds.js"

/**
 * A whole number from `min` to `max`, as a number (the in-process API) or as the digits of a query
 * string (HTTP), with one message for every way it can be wrong.
 */
const Digits = Schema.String.pipe(Schema.pattern(/^[0-9]{1,15}$/), Schema.compose(Schema.NumberFromString))

/**
 * A whole number from `min` to `max` given as the digits of a query string: the form the HTTP
 * contract documents and its typed client sends.
 */
export const WholeNumberQuery = (name: string, min: number, max: number, description = "", fallback?: number) =>
  Digits.pipe(
    Schema.compose(Schema.Number.pipe(Schema.int(), Schema.between(min, max))),
    Schema.annotations(wholeNumberAnnotations(name, min, max, description, fallback))
  )

/**
 * The same as a number too, as the in-process API passes it: what the services decode, so both
 * faces take the same values.
 */
export const WholeNumber = (name: string, min: number, max: number) =>
  Schema.Union(Schema.Number, Digits).pipe(
    Schema.compose(Schema.Number.pipe(Schema.int(), Schema.between(min, max))),
    Schema.annotations(wholeNumberAnnotations(name, min, max))
  )

/**
 * One message for every way a whole number can be wrong, and its range as a JSON Schema: a query
 * value is text on the wire, and OpenAPI describes it as the number it is read as (the range is
 * also the bound a 400 reports).
 */
function wholeNumberAnnotations(name: string, min: number, max: number, description = "", fallback?: number) {
  return {
    message: () => `${name} must be a whole number from ${min} to ${max}`,
    jsonSchema: {
      type: "integer",
      format: max > 2_147_483_647 ? "int64" : "int32",
      minimum: min,
      maximum: max,
      ...(fallback === undefined ? {} : { default: fallback }),
      ...(description === "" ? {} : { description })
    }
  }
}

const MAX_OFFSET = 1_000_000_000

/** The page size a list answers when it is not given one. */
export const DEFAULT_PAGE_SIZE = 50

/** The largest page size a list answers (the web board's). */
export const MAX_PAGE_SIZE = 200

/** `limit` 1-200 (default 50) and `offset` >= 0 (default 0), as the services take them. */
export const PageParams = {
  limit: Schema.optionalWith(WholeNumber("limit", 1, MAX_PAGE_SIZE), { default: () => DEFAULT_PAGE_SIZE }),
  offset: Schema.optionalWith(WholeNumber("offset", 0, MAX_OFFSET), { default: () => 0 })
}

/** {@link PageParams} as a query string carries them (the HTTP contract). */
export const PageQuery = {
  limit: Schema.optionalWith(
    WholeNumberQuery("limit", 1, MAX_PAGE_SIZE, `How many items to answer, 1 to ${MAX_PAGE_SIZE}.`, DEFAULT_PAGE_SIZE),
    { default: () => DEFAULT_PAGE_SIZE }
  ),
  offset: Schema.optionalWith(WholeNumberQuery("offset", 0, MAX_OFFSET, "How many items to skip.", 0), {
    default: () => 0
  })
}

/** The paging figures of a list answer. */
export const PageFields = {
  total: Count("How many items match, over all pages."),
  limit: Count("The page size used.", 1, MAX_PAGE_SIZE),
  offset: Count("How many items were skipped.", 0, MAX_OFFSET)
}

/** A page's bounds, decoded. */
export interface Page {
  readonly limit: number
  readonly offset: number
}
