/**
 * What the OpenAPI document says that `@effect/platform`'s annotations cannot: the headers of
 * responses (the generator writes a response's description and body only), the contact of the
 * service (there is no contact annotation), and the 400 answers without the platform's own
 * `HttpApiDecodeError` (every `HttpApi` declares it, but Taskwright answers every decode failure
 * in its common envelope, so a client never sees that shape), and each endpoint's own examples of
 * its error answers (the platform shows a schema's examples only, and the error schemas are shared
 * by every endpoint): written beside each endpoint as an {@link ErrorExamples} annotation, shown as
 * the examples of its answers. Each is applied through the documented hook for this, an
 * `OpenApi.Transform` annotation.
 */
import { allScopes, errorWire } from "@taskwright/domain"
import { Context, Option } from "effect"
import { RequiredScope } from "./Security.js"

/** Marks an endpoint that spends no rate-limit budget and so sends no rate-limit headers (`/api/health`). */
export class Unmetered extends Context.Tag("@taskwright/api/Unmetered")<Unmetered, true>() {}

type Json = Record<string, unknown>

/** One error answer of an endpoint, as the document shows it. */
export interface ErrorExample {
  /** When it is answered, in a few words: the example's summary. */
  readonly summary: string
  readonly message: string
  readonly details?: Json
}

/** The statuses whose answers differ from one endpoint to the next. */
export type EndpointErrorStatus = 400 | 403 | 404 | 409

/**
 * Examples of an endpoint's own error answers, by status: its resource, its reasons, its fields
 * (the error schemas are shared by every endpoint, so their one example cannot fit each). Shown as
 * the examples of the endpoint's answer; a 403 of an endpoint that needs a scope always shows the
 * missing scope besides these.
 */
export class ErrorExamples extends Context.Tag("@taskwright/api/ErrorExamples")<
  ErrorExamples,
  Readonly<Partial<Record<EndpointErrorStatus, ReadonlyArray<ErrorExample>>>>
>() {}

/**
 * A 400 for one field; `message` when the answer's own differs from the field's (it names the field
 * first), `reason` when the answer carries one.
 */
export const fieldExample = (
  summary: string,
  path: string,
  fieldMessage: string,
  options: { readonly bounds?: Json; readonly message?: string; readonly reason?: string } = {}
): ErrorExample => ({
  summary,
  message: options.message ?? fieldMessage,
  details: {
    ...(options.reason === undefined ? {} : { reason: options.reason }),
    fields: [{ path, message: fieldMessage, ...(options.bounds === undefined ? {} : { bounds: options.bounds }) }]
  }
})

/** A 400 for a body that is not JSON, for endpoints that take none (a body sent anyway is still read). */
export const invalidJsonExample: ErrorExample = {
  summary: "A body that is not JSON",
  message: "the body is not valid JSON",
  details: { reason: "invalid_json", fields: [{ path: "body", message: "the body is not valid JSON" }] }
}

/** A 404 for a resource by id. */
export const notFoundExample = (resource: string, id: string | number): ErrorExample => ({
  summary: `No such ${resource}`,
  message: `${resource} ${id} not found`,
  details: { resource, id }
})

/** A 403 for another user's resource. */
export const ownedExample = (resource: string, id: string | number): ErrorExample => ({
  summary: `Another user's ${resource}`,
  message: `${resource} ${id} belongs to another user`,
  details: { resource, id }
})

/** The envelope of an example, with the code of its status. */
const envelopeOf = (status: number, example: ErrorExample): Json => {
  const code = Object.values(errorWire).find((wire) => wire.status === status)?.code ?? "INTERNAL_ERROR"
  return { error: { code, message: example.message, details: example.details ?? {} } }
}

/** `examples` of a media type: named after their summaries. */
const mediaExamples = (status: number, examples: ReadonlyArray<ErrorExample>): Json =>
  Object.fromEntries(
    examples.map((example) => [
      example.summary
        .toLowerCase()
        .replace(/[^a-z0-9]+/g, "_")
        .replace(/^_|_$/g, ""),
      { summary: example.summary, value: envelopeOf(status, example) }
    ])
  )

/** What a credential without the endpoint's scope is told. */
const missingScope = (scope: string): ErrorExample => ({
  summary: `The credential lacks ${scope}`,
  message: `this credential lacks the ${scope} scope`,
  details: { required_scope: scope }
})

const integerHeader = (description: string, minimum = 0) => ({
  description,
  schema: { type: "integer", format: "int64", minimum, maximum: Number.MAX_SAFE_INTEGER }
})

/** The rate-limit headers of every answer that spent the budget. */
export const rateLimitHeaders = {
  "X-RateLimit-Limit": integerHeader("Requests per minute of the budget this request spent."),
  "X-RateLimit-Remaining": integerHeader("Requests left in the budget this minute."),
  "X-RateLimit-Reset": integerHeader("When the budget is full again, in Unix seconds.")
}

const retryAfter = (when: string) => ({
  "Retry-After": integerHeader(`Seconds to wait before trying again; ${when}.`, 1)
})

const wwwAuthenticate = {
  "WWW-Authenticate": {
    description: "How to authenticate (RFC 6750): always Bearer.",
    schema: { type: "string", maxLength: 200, pattern: "^Bearer" }
  }
}

/** Headers a response carries besides the ones every answer has. */
export type ResponseHeaders = Readonly<Record<string, { readonly description: string; readonly schema: Json }>>

const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

const addHeaders = (response: unknown, headers: ResponseHeaders): void => {
  if (!isRecord(response)) return
  response.headers = { ...(isRecord(response.headers) ? response.headers : {}), ...headers }
}

/**
 * An `OpenApi.Transform` for one operation: adds `headers` to the responses of the statuses named
 * (headers only this endpoint sends: `Set-Cookie` of login, `X-User-Id` of verify).
 */
export const operationHeaders =
  (byStatus: Readonly<Record<number, ResponseHeaders>>) =>
  (operation: Json): Json => {
    const responses = operation.responses
    if (isRecord(responses)) {
      for (const [status, headers] of Object.entries(byStatus)) addHeaders(responses[status], headers)
    }
    return operation
  }

const DECODE_ERROR = "#/components/schemas/HttpApiDecodeError"
/** The platform's decode error and the schemas only it uses. */
const DECODE_ERROR_SCHEMAS = ["HttpApiDecodeError", "Issue", "PropertyKey"]

/**
 * A 400 answer as Taskwright sends it: the platform's own decode error taken out of it. False when
 * nothing is left (an endpoint that never answers 400).
 */
const withoutDecodeError = (response: Json, badRequest: string): boolean => {
  const content = response.content
  if (!isRecord(content)) return true
  for (const [type, media] of Object.entries(content)) {
    if (!isRecord(media) || !isRecord(media.schema)) continue
    if (media.schema.$ref === DECODE_ERROR) {
      delete content[type]
      continue
    }
    const anyOf = media.schema.anyOf
    if (!Array.isArray(anyOf)) continue
    const kept = anyOf.filter((s) => !(isRecord(s) && s.$ref === DECODE_ERROR))
    media.schema = kept.length === 1 ? kept[0] : { ...media.schema, anyOf: kept }
  }
  response.description = badRequest
  return Object.keys(content).length > 0
}

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]

/**
 * The API-level `OpenApi.Transform`: the contact; rate-limit headers on every answer but the
 * 413 (refused before the budget is counted) and those of {@link Unmetered} endpoints;
 * `Retry-After` on 429 and 503; `WWW-Authenticate` on 401; 400 without the platform's decode error;
 * each endpoint's {@link ErrorExamples}, and the missing scope on the 403 of one that needs a scope.
 */
export const documentApi =
  (options: {
    readonly groups: ReadonlyArray<{
      readonly annotations: Context.Context<never>
      readonly endpoints: Readonly<
        Record<string, { readonly method: string; readonly path: string; readonly annotations: Context.Context<never> }>
      >
    }>
    readonly contact: Json
    readonly badRequest: string
  }) =>
  (spec: Json): Json => {
    const unmetered = new Set<string>()
    const examples = new Map<string, Readonly<Partial<Record<number, ReadonlyArray<ErrorExample>>>>>()
    for (const group of options.groups) {
      for (const endpoint of Object.values(group.endpoints)) {
        const key = `${endpoint.method.toLowerCase()} ${endpoint.path.replace(/:(\w+)\??/g, "{$1}")}`
        if (Option.isSome(Context.getOption(endpoint.annotations, Unmetered))) unmetered.add(key)
        const scope = Context.getOption(endpoint.annotations, RequiredScope).pipe(
          Option.orElse(() => Context.getOption(group.annotations, RequiredScope))
        )
        const own: Readonly<Partial<Record<EndpointErrorStatus, ReadonlyArray<ErrorExample>>>> = Option.getOrElse(
          Context.getOption(endpoint.annotations, ErrorExamples),
          () => ({})
        )
        const needed = Option.getOrUndefined(scope)
        const scoped =
          needed !== undefined && (allScopes as ReadonlyArray<string>).includes(needed) ? [missingScope(needed)] : []
        examples.set(key, { ...own, 403: [...scoped, ...(own[403] ?? [])] })
      }
    }
    const paths = isRecord(spec.paths) ? spec.paths : {}
    for (const [path, item] of Object.entries(paths)) {
      if (!isRecord(item)) continue
      for (const method of METHODS) {
        const operation = item[method]
        if (!isRecord(operation) || !isRecord(operation.responses)) continue
        const metered = !unmetered.has(`${method} ${path}`)
        const own = examples.get(`${method} ${path}`) ?? {}
        for (const [status, response] of Object.entries(operation.responses)) {
          if (!isRecord(response)) continue
          if (status === "400" && !withoutDecodeError(response, options.badRequest)) {
            // The platform's decode error was all this 400 held: the endpoint never answers 400.
            delete operation.responses[status]
            continue
          }
          const shown = own[Number(status)] ?? []
          const media = isRecord(response.content) ? response.content["application/json"] : undefined
          if (shown.length > 0 && isRecord(media)) media.examples = mediaExamples(Number(status), shown)
          if (metered && status !== "413") addHeaders(response, rateLimitHeaders)
          if (status === "429") addHeaders(response, retryAfter("always sent"))
          if (status === "503") addHeaders(response, retryAfter("sent when trying again later may help"))
          if (status === "401") addHeaders(response, wwwAuthenticate)
        }
      }
    }
    const components = isRecord(spec.components) ? spec.components : {}
    const schemas = isRecord(components.schemas) ? components.schemas : {}
    for (const name of DECODE_ERROR_SCHEMAS) delete schemas[name]
    const info = isRecord(spec.info) ? spec.info : {}
    return { ...spec, info: { ...info, contact: options.contact } }
  }

/** `Retry-After` as the proxy check sends it on a 401 or 403 once the caller's budget is spent. */
export const verifyRetryAfter = retryAfter("sent when the caller's budget is spent")
