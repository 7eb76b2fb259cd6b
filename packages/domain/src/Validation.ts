/**
 * Decoding of what a client sends, and the 400 it gets when that fails: one message per field, in
 * words a person reads ("title must be 1 to 500 characters long"), never the schema's own
 * notation, with the bound the value broke. Every service decodes its input with {@link decoder},
 * so every face (HTTP, in-process) refuses the same input with the same answer.
 */
import { Effect, Either, Exit, Option, ParseResult, Schema, SchemaAST } from "effect"
import { BadRequest } from "./Errors.js"
import { compileFastDecode, UNSURE } from "./FastDecode.js"

/** At most this many fields are listed in `details.fields` (the first ones found). */
export const MAX_FIELD_PROBLEMS = 100
/** A field's path is cut to this many characters in a message (a key can be as long as a body). */
export const MAX_PATH_TEXT = 200
/** The longest message of an error. */
export const MAX_MESSAGE_LENGTH = 1000

/** Where the input came from: it names the input in messages about the whole of it. */
export type InputPlace = "body" | "query" | "path" | "input"

/** One offending field: where, what is wrong, and the bounds of the value when it has any. */
export interface FieldProblem {
  readonly path: string
  readonly message: string
  readonly bounds?: Readonly<Record<string, unknown>>
}

type Bounds = Record<string, unknown>

const BOUND_KEYS = [
  "minLength",
  "maxLength",
  "minItems",
  "maxItems",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum"
] as const

/** The bounds a refinement's JSON Schema annotation states (`minLength`, `maximum`, ...). */
const boundsOf = (ast: SchemaAST.AST): Bounds => {
  const json = Option.getOrUndefined(SchemaAST.getJSONSchemaAnnotation(ast)) as Record<string, unknown> | undefined
  const out: Bounds = {}
  if (json === undefined) return out
  for (const key of BOUND_KEYS) if (typeof json[key] === "number") out[key] = json[key]
  if (json.type === "integer") out.integer = true
  return out
}

/** Every bound stated along a chain of refinements (`String.pipe(minLength(1), maxLength(500))`). */
const chainBounds = (ast: SchemaAST.AST): Bounds => {
  let bounds: Bounds = {}
  let current: SchemaAST.AST = ast
  while (SchemaAST.isRefinement(current)) {
    bounds = { ...boundsOf(current), ...bounds }
    current = current.from
  }
  return bounds
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`

const range = (min: unknown, max: unknown, one: string, many: string): string | undefined => {
  if (typeof min === "number" && typeof max === "number") return `must be ${min} to ${max} ${many} long`
  if (typeof max === "number") return `must be at most ${plural(max, one, many)} long`
  if (typeof min === "number") return `must be at least ${plural(min, one, many)} long`
  return undefined
}

/** A sentence for a broken bound, or undefined when the bounds say nothing useful. */
const boundsSentence = (b: Bounds): string | undefined => {
  const length = range(b.minLength, b.maxLength, "character", "characters")
  if (length !== undefined) return length
  if (b.minItems !== undefined || b.maxItems !== undefined) {
    const { minItems: min, maxItems: max } = b
    if (typeof min === "number" && typeof max === "number") return `must hold ${min} to ${max} items`
    if (typeof max === "number") return `must hold at most ${plural(max, "item", "items")}`
    if (typeof min === "number") return `must hold at least ${plural(min, "item", "items")}`
  }
  const min = b.minimum ?? b.exclusiveMinimum
  const max = b.maximum ?? b.exclusiveMaximum
  const kind = b.integer === true ? "a whole number" : "a number"
  if (typeof min === "number" && typeof max === "number") return `must be ${kind} from ${min} to ${max}`
  if (typeof min === "number") return `must be ${kind} of at least ${min}`
  if (typeof max === "number") return `must be ${kind} of at most ${max}`
  if (b.integer === true) return "must be a whole number"
  return undefined
}

/** The literal values a union of literals allows (`"low" | "medium"`), if that is what it is. */
const literals = (ast: SchemaAST.AST): ReadonlyArray<SchemaAST.LiteralValue> | undefined => {
  if (SchemaAST.isLiteral(ast)) return [ast.literal]
  if (SchemaAST.isUnion(ast)) {
    const out: Array<SchemaAST.LiteralValue> = []
    for (const member of ast.types) {
      const values = literals(member)
      if (values === undefined) return undefined
      out.push(...values)
    }
    return out
  }
  return undefined
}

const quote = (value: SchemaAST.LiteralValue) => (typeof value === "string" ? `"${value}"` : String(value))

/** What a value of `ast` must be, in words. */
const expectation = (ast: SchemaAST.AST): string => {
  const values = literals(ast)
  if (values !== undefined) {
    const shown = values.filter((v) => v !== null)
    const nullable = shown.length < values.length ? " (or null)" : ""
    return shown.length === 1
      ? `must be ${quote(shown[0] ?? "")}${nullable}`
      : `must be one of ${shown.map(quote).join(", ")}${nullable}`
  }
  switch (ast._tag) {
    case "StringKeyword":
    case "TemplateLiteral":
      return "must be a string"
    case "NumberKeyword":
      return "must be a number"
    case "BooleanKeyword":
      return "must be true or false"
    case "TypeLiteral":
      return "must be a JSON object"
    case "TupleType":
      return "must be an array"
    case "Refinement":
      return boundsSentence(chainBounds(ast)) ?? expectation(ast.from)
    case "Transformation":
      return expectation(ast.from)
    case "Union": {
      const members = ast.types.filter((t) => !(SchemaAST.isLiteral(t) && t.literal === null))
      const first = members[0]
      return first === undefined ? "has the wrong type" : expectation(first)
    }
    default:
      return "has the wrong type"
  }
}

/** The schema's own message for this issue, when the schema states one. */
const annotated = (ast: SchemaAST.AST, issue: ParseResult.ParseIssue): string | undefined => {
  const annotation = Option.getOrUndefined(SchemaAST.getMessageAnnotation(ast))
  if (annotation === undefined) return undefined
  const out = annotation(issue)
  if (typeof out === "string") return out
  if (Effect.isEffect(out)) return undefined
  return typeof out.message === "string" ? out.message : undefined
}

interface Found {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
  readonly bounds: Bounds
}

/** The leaf problems of an issue, each with its path; `inherited` carries the bounds of enclosing refinements. */
const collect = (
  issue: ParseResult.ParseIssue,
  path: ReadonlyArray<PropertyKey>,
  inherited: Bounds,
  out: Array<Found>
): void => {
  switch (issue._tag) {
    case "Pointer":
      return collect(issue.issue, path.concat(issue.path), {}, out)
    case "Missing":
      out.push({ path, message: "is required", bounds: {} })
      return
    case "Unexpected":
      out.push({ path, message: "is not a field of this request", bounds: {} })
      return
    case "Forbidden":
      out.push({ path, message: "could not be checked", bounds: {} })
      return
    case "Type": {
      const message = annotated(issue.ast, issue) ?? issue.message ?? expectation(issue.ast)
      out.push({ path, message, bounds: {} })
      return
    }
    case "Refinement": {
      // A failure before the refinement's own check is about what it refines: its message is not for that.
      if (issue.kind === "From") return collect(issue.issue, path, { ...boundsOf(issue.ast), ...inherited }, out)
      // A bound is reported when it is what the value broke: a length, a count, a range.
      const broke = Object.keys(boundsOf(issue.ast)).length > 0
      const bounds = broke ? { ...chainBounds(issue.ast), ...inherited } : {}
      const message = annotated(issue.ast, issue) ?? filterMessage(issue.issue) ?? boundsSentence(bounds)
      out.push({ path, message: message ?? "has an invalid value", bounds })
      return
    }
    case "Transformation": {
      const own = annotated(issue.ast, issue)
      if (own !== undefined) {
        out.push({ path, message: own, bounds: boundsOf(issue.ast) })
        return
      }
      return collect(issue.issue, path, inherited, out)
    }
    case "Composite": {
      const own = annotated(issue.ast, issue)
      if (own !== undefined) {
        out.push({ path, message: own, bounds: {} })
        return
      }
      const issues = Array.isArray(issue.issues) ? issue.issues : [issue.issues as ParseResult.ParseIssue]
      if (SchemaAST.isUnion(issue.ast)) {
        // A union failed in every member: the member a person meant is the one that is not `null`
        // (`NullOr(ProjectId)`), or, for a choice of literals, all of them at once.
        if (literals(issue.ast) !== undefined) {
          out.push({ path, message: expectation(issue.ast), bounds: {} })
          return
        }
        const meant = issues.find((i) => !(i._tag === "Type" && SchemaAST.isLiteral(i.ast))) ?? issues[0]
        if (meant !== undefined) collect(meant, path, inherited, out)
        return
      }
      const keys = SchemaAST.isTypeLiteral(issue.ast) ? issue.ast.indexSignatures[0]?.parameter : undefined
      for (const sub of issues) {
        // A name a record does not take (`env` keys) is refused for what is wrong with the name.
        if (keys !== undefined && sub._tag === "Pointer" && sub.issue._tag === "Unexpected") {
          const problem = nameProblem(keys, sub.path)
          if (problem !== undefined) {
            out.push({ path: path.concat(sub.path), message: problem, bounds: {} })
            continue
          }
        }
        collect(sub, path, inherited, out)
      }
      return
    }
  }
}

/** The words a filter answered with (`Schema.filter(... || "paths are listed once each")`). */
const filterMessage = (issue: ParseResult.ParseIssue): string | undefined =>
  issue._tag === "Type" ? issue.message : undefined

/** A path as messages show it: dotted, cut to {@link MAX_PATH_TEXT} characters. */
/** Why a record refuses `key` as a name, in the words of its key schema. */
const nameProblem = (keys: SchemaAST.AST, key: PropertyKey | ReadonlyArray<PropertyKey>): string | undefined => {
  const name = Array.isArray(key) ? key[0] : key
  const result = ParseResult.decodeUnknownEither(Schema.make(keys))(typeof name === "symbol" ? String(name) : name)
  if (Either.isRight(result)) return undefined
  const found: Array<Found> = []
  collect(result.left, [], {}, found)
  const first = found[0]?.message
  return first === undefined ? undefined : /^(must|is|has|could) /.test(first) ? `the name ${first}` : first
}

const pathText = (path: ReadonlyArray<PropertyKey>) => clip(path.map(String).join("."), MAX_PATH_TEXT)

const clip = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max - 1)}…`)

/** `must ...` sentences are given their subject; sentences that name it already are kept. */
const sentence = (subject: string, message: string) =>
  /^(must|is|has|could) /.test(message) ? `${subject} ${message}` : message

/** The problems of a failed decode, one per field, in words. */
export const fieldProblems = (error: ParseResult.ParseError, place: InputPlace): ReadonlyArray<FieldProblem> => {
  const found: Array<Found> = []
  collect(error.issue, [], {}, found)
  const seen = new Set<string>()
  const out: Array<FieldProblem> = []
  for (const f of found) {
    if (out.length === MAX_FIELD_PROBLEMS) break
    const path = f.path.length === 0 ? place : pathText(f.path)
    if (seen.has(path)) continue
    seen.add(path)
    const subject = f.path.length === 0 ? `the ${place}` : path
    out.push({
      path,
      message: clip(sentence(subject, f.message), MAX_MESSAGE_LENGTH),
      ...(Object.keys(f.bounds).length === 0 ? {} : { bounds: f.bounds })
    })
  }
  return out
}

/** The 400 for a failed decode: the first problem as the message, every problem in `details.fields`. */
export const invalidInput = (error: ParseResult.ParseError, place: InputPlace): BadRequest => {
  const fields = fieldProblems(error, place)
  return new BadRequest({ message: fields[0]?.message ?? `the ${place} is invalid`, details: { fields } })
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: finding a NUL is the point
const SUSPECT = /[\u0000\uD800-\uDFFF]/
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/**
 * The first string of a decoded value holding a NUL or an unpaired UTF-16 surrogate: PostgreSQL
 * refuses both, SQLite would keep them and answer something else, so no store is handed either.
 */
const unsafeString = (
  value: unknown,
  path: ReadonlyArray<PropertyKey>
): { readonly path: ReadonlyArray<PropertyKey>; readonly nul: boolean } | undefined => {
  if (typeof value === "string") {
    // Most strings hold neither a NUL nor any surrogate: one quick scan says so.
    if (!SUSPECT.test(value)) return undefined
    if (value.includes("\u0000")) return { path, nul: true }
    return LONE_SURROGATE.test(value) ? { path, nul: false } : undefined
  }
  if (typeof value !== "object" || value === null) return undefined
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unsafeString(value[i], [...path, i])
      if (found !== undefined) return found
    }
    return undefined
  }
  for (const [key, inner] of Object.entries(value)) {
    const found = unsafeString(inner, [...path, key])
    if (found !== undefined) return found
  }
  return undefined
}

const unsafeInput = (
  found: { readonly path: ReadonlyArray<PropertyKey>; readonly nul: boolean },
  place: InputPlace
) => {
  const path = found.path.length === 0 ? place : pathText(found.path)
  const message = `${path} ${found.nul ? "holds a NUL character (\\u0000)" : "holds an unpaired UTF-16 surrogate"}, which no field accepts`
  return new BadRequest({ message, details: { reason: found.nul ? "nul" : "surrogate", fields: [{ path, message }] } })
}

/**
 * A decoder for client input: the schema compiled once, all errors reported, and, for bodies,
 * unknown fields refused (a query's unknown parameters are ignored: caches and proxies add them).
 * Answers an Exit (an Effect already complete), so it costs no fiber, and a synchronous caller
 * can read it directly.
 *
 * Compiled at its first input, not where it is declared: modules declare theirs at load, and a
 * server start compiled some twenty that most starts never call.
 */
export const decoder = <A, I>(
  schema: Schema.Schema<A, I>,
  place: InputPlace
): ((input: unknown) => Exit.Exit<A, BadRequest>) => {
  let compiled: ((input: unknown) => Exit.Exit<A, BadRequest>) | undefined
  return (input) => {
    compiled ??= compileDecoder(schema, place)
    return compiled(input)
  }
}

const compileDecoder = <A, I>(schema: Schema.Schema<A, I>, place: InputPlace) => {
  const excess = place === "query" ? "ignore" : "error"
  const decode = Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: excess })
  // The valid input of a request decoded without Effect's issue bookkeeping; Effect decides the rest.
  const fast = compileFastDecode(schema.ast, excess)
  return (input: unknown): Exit.Exit<A, BadRequest> => {
    let value: unknown = fast === undefined ? UNSURE : fast(input)
    if (value === UNSURE) {
      const result = decode(input)
      if (Either.isLeft(result)) return Exit.fail(invalidInput(result.left, place))
      value = result.right
    }
    const unsafe = unsafeString(value, [])
    return unsafe === undefined ? Exit.succeed(value as A) : Exit.fail(unsafeInput(unsafe, place))
  }
}
