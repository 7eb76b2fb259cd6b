import { Schema } from "effect"

/** `{success: true}`: the answer of deletions. */
export const Success = Schema.Struct({ success: Schema.Literal(true) }).annotations({
  description: "Done.",
  examples: [{ success: true }]
})
