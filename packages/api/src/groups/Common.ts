import { Schema } from "effect"

/** `{success: true}`: the answer of deletions. */
export const Success = Schema.Struct({ success: Schema.Literal(true) }).annotations({
  description: "Done.",
  examples: [{ success: true }]
})

/** A field with a default (`Schema.optionalWith(s, { default })`) made plainly optional. */
type WithoutDefault<P> =
  P extends Schema.PropertySignature<":", infer A, infer K, "?:", infer I, true, infer R>
    ? Schema.PropertySignature<"?:", A | undefined, K, "?:", I, false, R>
    : P

/** The fields of a query schema with their defaults dropped. */
export type QueryFields<F extends Schema.Struct.Fields> = { readonly [K in keyof F]: WithoutDefault<F[K]> }

/**
 * A query schema as the contract declares it: a parameter with a default (`limit`, `offset`) is
 * optional on both sides, so the typed clients may leave it out (`{ urlParams: {} }`). The
 * services decode every query themselves and apply the defaults; the OpenAPI document still shows
 * them (each parameter's `default`).
 */
export const contractQuery = <F extends Schema.Struct.Fields>(
  query: Schema.Struct<F>
): Schema.Struct<QueryFields<F>> => {
  const fields: Record<string, Schema.Struct.Field> = {}
  for (const [name, field] of Object.entries<Schema.Struct.Field>(query.fields)) {
    const ast = field.ast
    fields[name] =
      ast instanceof Schema.PropertySignatureTransformation && ast.from.isOptional && !ast.to.isOptional
        ? Schema.makePropertySignature(
            new Schema.PropertySignatureDeclaration(
              ast.from.type,
              true,
              ast.from.isReadonly,
              ast.from.annotations,
              undefined
            )
          )
        : field
  }
  return Schema.Struct(fields as QueryFields<F>)
}
