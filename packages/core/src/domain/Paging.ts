import { Schema } from "effect"

const digits = (what: string) =>
  Schema.String.pipe(Schema.pattern(/^[0-9]{1,9}$/, { message: () => `${what} must be a whole number` }))

/** `limit` 1-200 (default 50) and `offset` >= 0 (default 0), as they arrive in a query string. */
export const PageParams = {
  limit: Schema.optionalWith(
    digits("limit").pipe(
      Schema.compose(Schema.NumberFromString),
      Schema.compose(Schema.Int.pipe(Schema.between(1, 200, { message: () => "limit must be between 1 and 200" })))
    ),
    { default: () => 50 }
  ),
  offset: Schema.optionalWith(digits("offset").pipe(Schema.compose(Schema.NumberFromString)), {
    default: () => 0
  })
}

export interface Page {
  readonly limit: number
  readonly offset: number
}
