/**
 * A fast path for decoding what a client sends, compiled from the same schema as Effect's own
 * decoder and answering only when it is sure.
 *
 * Effect's parser builds an `Either` per node and an issue tree per failure, which is right for
 * reporting what is wrong and costs a few microseconds per request when nothing is: more than the
 * rest of a write's work in the service. For the valid input of every request, this compiles the
 * schema's AST into plain checks that call the schema's own refinement filters and transformations
 * (no rule is written twice) and build the same output. Anything it does not handle, or any doubt,
 * answers {@link UNSURE}, and the caller decodes with Effect, which gives the verdict and the
 * messages. So it can only be faster, never different (a property test holds it to that).
 */
import { Either, Option, SchemaAST } from "effect"

/** The fast path cannot tell: decode with Effect. */
export const UNSURE: unique symbol = Symbol("FastDecode/UNSURE")

/** Decodes `input`, or answers {@link UNSURE}. */
export type FastDecode = (input: unknown) => unknown

/** What Effect does with a key a struct does not declare: refuse it (bodies) or drop it (queries). */
export type ExcessProperty = "error" | "ignore"

const options = (excess: ExcessProperty): SchemaAST.ParseOptions => ({ errors: "all", onExcessProperty: excess })

/** Answers a value decoded by a transformation or filter step, when Effect answered at once. */
const rightOf = (result: unknown): unknown => {
  if (!Either.isEither(result)) return UNSURE
  return Either.isRight(result) ? result.right : UNSURE
}

/** The AST nodes this compiles; anything else makes the whole schema Effect's alone. */
const compileNode = (ast: SchemaAST.AST, excess: ExcessProperty, generate: boolean): FastDecode | undefined => {
  // Annotations that change how Effect parses a node: leave those nodes to Effect.
  if (Option.isSome(SchemaAST.getParseOptionsAnnotation(ast))) return undefined
  if (Option.isSome(SchemaAST.getDecodingFallbackAnnotation(ast))) return undefined
  const parseOptions = options(excess)
  switch (ast._tag) {
    case "StringKeyword":
      return (input) => (typeof input === "string" ? input : UNSURE)
    case "NumberKeyword":
      return (input) => (typeof input === "number" && Number.isFinite(input) ? input : UNSURE)
    case "BooleanKeyword":
      return (input) => (typeof input === "boolean" ? input : UNSURE)
    case "Literal": {
      const literal = ast.literal
      return (input) => (input === literal ? input : UNSURE)
    }
    case "Refinement": {
      const from = compileNode(ast.from, excess, generate)
      if (from === undefined) return undefined
      const filter = ast.filter
      return (input) => {
        const value = from(input)
        if (value === UNSURE) return UNSURE
        return Option.isNone(filter(value, parseOptions, ast)) ? value : UNSURE
      }
    }
    case "Transformation": {
      const from = compileNode(ast.from, excess, generate)
      const to = compileNode(ast.to, excess, generate)
      if (from === undefined || to === undefined) return undefined
      // `Schema.compose`: the value passes from one schema to the next unchanged.
      if (SchemaAST.isComposeTransformation(ast.transformation)) {
        return (input) => {
          const a = from(input)
          return a === UNSURE ? UNSURE : to(a)
        }
      }
      if (SchemaAST.isTypeLiteralTransformation(ast.transformation)) {
        return compileFieldTransformations(ast.transformation, from, to)
      }
      const decode = ast.transformation.decode
      return (input) => {
        const a = from(input)
        if (a === UNSURE) return UNSURE
        const b = rightOf(decode(a, parseOptions, ast, input))
        return b === UNSURE ? UNSURE : to(b)
      }
    }
    case "Union":
      return compileUnion(ast, excess, generate)
    case "TupleType":
      return compileArray(ast, excess, generate)
    case "TypeLiteral":
      return compileStruct(ast, excess, generate)
    default:
      return undefined
  }
}

/**
 * `optionalWith(..., { default })` and its kin: the struct decoded, each field's transformation
 * applied as Effect applies it (the field taken out, put back when it has a value), then the
 * struct of the type side decoded from that.
 */
const compileFieldTransformations = (
  transformation: SchemaAST.TypeLiteralTransformation,
  from: FastDecode,
  to: FastDecode
): FastDecode => {
  const steps = transformation.propertySignatureTransformations
  const hasOwn = Object.prototype.hasOwnProperty
  return (input) => {
    const value = from(input)
    if (value === UNSURE) return UNSURE
    const record = value as Record<PropertyKey, unknown>
    for (const step of steps) {
      const moved = step.decode(hasOwn.call(record, step.from) ? Option.some(record[step.from]) : Option.none())
      delete record[step.from]
      if (Option.isSome(moved)) record[step.to] = moved.value
    }
    return to(record)
  }
}

/** The `typeof`s a value of `ast` may have (refinements and transformations looked through), when they are known. */
const baseTypes = (ast: SchemaAST.AST): ReadonlyArray<string> | undefined => {
  switch (ast._tag) {
    case "StringKeyword":
      return ["string"]
    case "NumberKeyword":
      return ["number"]
    case "BooleanKeyword":
      return ["boolean"]
    case "TypeLiteral":
    case "TupleType":
      return ["object"]
    case "Literal":
      return [ast.literal === null ? "null" : typeof ast.literal]
    case "Refinement":
    case "Transformation":
      return baseTypes(ast.from)
    case "Union": {
      const types: Array<string> = []
      for (const member of ast.types) {
        const inner = baseTypes(member)
        if (inner === undefined) return undefined
        types.push(...inner)
      }
      return [...new Set(types)]
    }
    default:
      return undefined
  }
}

/** A value's type as {@link baseTypes} names it. */
const typeOf = (value: unknown): string => (value === null ? "null" : Array.isArray(value) ? "object" : typeof value)

/** A union's members, nested unions spread (`optional(NullOr(X))`); `undefined` for a nested one Effect parses its own way. */
const members = (ast: SchemaAST.Union): Array<SchemaAST.AST | undefined> =>
  ast.types.flatMap((member) =>
    !SchemaAST.isUnion(member)
      ? [member]
      : Option.isSome(SchemaAST.getParseOptionsAnnotation(member)) ||
          Option.isSome(SchemaAST.getDecodingFallbackAnnotation(member))
        ? [undefined]
        : members(member)
  )

/**
 * Literals, `undefined` (an optional field's, given in process) and members told
 * apart by the type of the value (a number or the digits of a query string): then at most one
 * member can take a value, and trying it gives Effect's answer.
 */
const compileUnion = (ast: SchemaAST.Union, excess: ExcessProperty, generate: boolean): FastDecode | undefined => {
  const literals = new Set<SchemaAST.LiteralValue>()
  const literalTypes = new Set<string>()
  const byType = new Map<string, FastDecode>()
  let takesUndefined = false
  for (const member of members(ast)) {
    if (member === undefined) return undefined
    if (SchemaAST.isUndefinedKeyword(member)) {
      takesUndefined = true
      continue
    }
    if (SchemaAST.isLiteral(member)) {
      literals.add(member.literal)
      literalTypes.add(typeOf(member.literal))
      continue
    }
    const types = baseTypes(member)
    if (types === undefined || types.some((type) => byType.has(type))) return undefined
    const decode = compileNode(member, excess, generate)
    if (decode === undefined) return undefined
    for (const type of types) byType.set(type, decode)
  }
  // A literal another member could also take: which one Effect picks is its business.
  for (const type of literalTypes) if (byType.has(type)) return undefined
  return (input) => {
    if (input === undefined) return takesUndefined ? undefined : UNSURE
    if (literals.has(input as SchemaAST.LiteralValue)) return input
    const decode = byType.get(typeOf(input))
    return decode === undefined ? UNSURE : decode(input)
  }
}

/** `Schema.Array(item)`: no fixed elements, one rest type. */
const compileArray = (ast: SchemaAST.TupleType, excess: ExcessProperty, generate: boolean): FastDecode | undefined => {
  const [rest, ...more] = ast.rest
  if (ast.elements.length > 0 || rest === undefined || more.length > 0) return undefined
  const item = compileNode(rest.type, excess, generate)
  if (item === undefined) return undefined
  return (input) => {
    if (!Array.isArray(input)) return UNSURE
    const out = new Array<unknown>(input.length)
    for (let i = 0; i < input.length; i++) {
      const value = item(input[i])
      if (value === UNSURE) return UNSURE
      out[i] = value
    }
    return out
  }
}

/** A struct of named fields, without index signatures: present fields decoded in declaration order. */
const compileStruct = (
  ast: SchemaAST.TypeLiteral,
  excess: ExcessProperty,
  generate: boolean
): FastDecode | undefined => {
  if (ast.indexSignatures.length > 0) return undefined
  const fields: Array<Field> = []
  for (const ps of ast.propertySignatures) {
    if (typeof ps.name !== "string") return undefined
    const decode = compileNode(ps.type, excess, generate)
    if (decode === undefined) return undefined
    fields.push({ name: ps.name, optional: ps.isOptional, decode })
  }
  return (generate ? generatedStruct(fields, excess) : undefined) ?? closureStruct(fields, excess)
}

interface Field {
  readonly name: string
  readonly optional: boolean
  readonly decode: FastDecode
}

/**
 * The struct check written out for its own fields (as Ajv compiles a JSON Schema): each field read
 * by name at a site of its own. One closure shared by every schema's structs sees every shape of
 * object, and V8's property lookups there go megamorphic (measured: 4 us of a POST's decode, 0.5
 * once generated). Field names reach the source only as JSON string literals. Where code cannot be
 * generated (a page whose Content-Security-Policy forbids it), {@link closureStruct} does the same.
 */
const generatedStruct = (fields: ReadonlyArray<Field>, excess: ExcessProperty): FastDecode | undefined => {
  const lines = fields.map((field, i) => {
    const key = JSON.stringify(field.name)
    const absent = field.optional ? "" : " else return UNSURE"
    return `if (hasOwn.call(input, ${key})) { v = d[${i}](input[${key}]); if (v === UNSURE) return UNSURE; out[${key}] = v }${absent}`
  })
  const cases = fields.map((field) => `case ${JSON.stringify(field.name)}:`).join(" ")
  const excessCheck =
    excess === "error" && fields.length > 0
      ? `for (const k of Reflect.ownKeys(input)) switch (k) { ${cases} continue; default: return UNSURE }`
      : excess === "error"
        ? "if (Reflect.ownKeys(input).length > 0) return UNSURE"
        : ""
  const body = [
    'if (typeof input !== "object" || input === null || Array.isArray(input)) return UNSURE',
    excessCheck,
    "const out = {}",
    "let v",
    ...lines,
    "return out"
  ].join("\n")
  try {
    const make = new Function("UNSURE", "hasOwn", "d", `return function decodeStruct(input) {\n${body}\n}`)
    return make(
      UNSURE,
      Object.prototype.hasOwnProperty,
      fields.map((f) => f.decode)
    ) as FastDecode
  } catch {
    return undefined
  }
}

const closureStruct = (fields: ReadonlyArray<Field>, excess: ExcessProperty): FastDecode => {
  const known = new Set(fields.map((f) => f.name))
  const hasOwn = Object.prototype.hasOwnProperty
  return (input) => {
    if (typeof input !== "object" || input === null || Array.isArray(input)) return UNSURE
    const record = input as Record<string, unknown>
    if (excess === "error") {
      // Unknown names (symbols too) are Effect's to refuse, with its message.
      for (const key of Reflect.ownKeys(record)) if (typeof key !== "string" || !known.has(key)) return UNSURE
    }
    const out: Record<string, unknown> = {}
    for (const field of fields) {
      if (!hasOwn.call(record, field.name)) {
        if (field.optional) continue
        return UNSURE
      }
      const value = field.decode(record[field.name])
      if (value === UNSURE) return UNSURE
      out[field.name] = value
    }
    return out
  }
}

/**
 * The fast path for `schema`'s AST, or `undefined` when it uses something the fast path leaves to
 * Effect (then every input goes to Effect).
 */
export const compileFastDecode = (
  ast: SchemaAST.AST,
  excess: ExcessProperty,
  options: { readonly generateCode?: boolean } = {}
): FastDecode | undefined => compileNode(ast, excess, options.generateCode ?? true)
