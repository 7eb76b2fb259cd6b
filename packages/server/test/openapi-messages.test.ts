/**
 * Every decode failure answers in words. The contract is walked with `HttpApi.reflect`: for each
 * endpoint, bad path values, bad query values and bad bodies generated from its own schemas
 * (fast-check) go through a real server, and every 400 must name each field with a message in
 * words, never the schema's notation; nothing a client sends may be a 500.
 */
import { HttpApi, OpenApiJsonSchema } from "@effect/platform"
import { TaskwrightApi } from "@taskwright/api"
import { startTestServer, type TestServer } from "@taskwright/testing"
import { Either, Option, Schema, type SchemaAST } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

type Json = Record<string, unknown>
const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

/** What a message must never show: the schema language's own words and symbols. */
const NOTATION =
  /Expected|readonly|\||<->|=>|Brand|[{}]|\bSchema\b|Refinement|Transformation|TypeLiteral|Union|Declaration|NumberFromString|\bTrim\b|filter\(|minLength\(|maxLength\(|\bactual\b|\bis missing\b|undefined|\[object /

interface Endpoint {
  readonly name: string
  readonly method: string
  readonly path: string
  readonly pathSchema: Schema.Schema<unknown, unknown> | undefined
  readonly query: Json | undefined
  readonly body: Json | undefined
}

/** A JSON Schema of `schema`, its references resolved. */
const jsonSchemaOf = (schema: { readonly ast: SchemaAST.AST }): Json => {
  const defs: Json = {}
  const made: unknown = OpenApiJsonSchema.makeWithDefs(Schema.make<unknown, unknown, never>(schema.ast), { defs })
  const root = isRecord(made) ? made : {}
  const resolve = (node: unknown): Json => {
    if (!isRecord(node)) return {}
    if (typeof node.$ref === "string") return resolve(defs[node.$ref.split("/").pop() ?? ""])
    if (Array.isArray(node.allOf) && node.allOf.length === 1 && node.type === undefined) {
      return { ...resolve(node.allOf[0]), ...node, allOf: undefined }
    }
    return node
  }
  const out = resolve(root)
  return {
    ...out,
    properties: Object.fromEntries(Object.entries((out.properties ?? {}) as Json).map(([k, v]) => [k, resolve(v)]))
  }
}

const endpoints: Array<Endpoint> = []
HttpApi.reflect(TaskwrightApi, {
  onGroup: () => {},
  onEndpoint: ({ group, endpoint }) => {
    endpoints.push({
      name: `${group.identifier}.${endpoint.name}`,
      method: endpoint.method,
      path: endpoint.path,
      pathSchema: Option.match(endpoint.pathSchema, {
        onNone: () => undefined,
        onSome: (schema) => Schema.make<unknown, unknown, never>(schema.ast)
      }),
      query: Option.match(endpoint.urlParamsSchema, { onNone: () => undefined, onSome: jsonSchemaOf }),
      body: Option.match(endpoint.payloadSchema, { onNone: () => undefined, onSome: jsonSchemaOf })
    })
  }
})

/** Well-formed path values, for requests whose query or body is the bad part. */
const WELL_FORMED = [
  "424242",
  "proj_AAAAAAAAAAAAAAAA",
  "run_AAAAAAAAAAAAAAAA",
  "key_AAAAAAAAAAAAAAAA",
  "zz-sweep",
  "github"
]

const pathParams = (path: string) => [...path.matchAll(/:(\w+)/g)].map((m) => m[1] ?? "")

/** The path filled with well-formed values, one chosen per parameter by what its schema accepts. */
const wellFormedPath = (e: Endpoint): string => {
  if (e.pathSchema === undefined) return e.path
  const decode = Schema.decodeUnknownEither(e.pathSchema)
  const values: Record<string, string> = {}
  for (const name of pathParams(e.path)) {
    values[name] = WELL_FORMED.find((v) => Either.isRight(decode({ ...values, [name]: v, ...fill(e, v) }))) ?? "x"
  }
  return e.path.replace(/:(\w+)/g, (_, name: string) => values[name] ?? "x")
}
const fill = (e: Endpoint, v: string) => Object.fromEntries(pathParams(e.path).map((n) => [n, v]))

/** Values no schema of a path, a query or a field should take quietly. */
const badText = fc.oneof(
  fc.constantFrom(
    "",
    "abc",
    "-1",
    "0",
    "1.5",
    "1e3",
    "0x1f",
    "99999999999999999999",
    "proj_short",
    "null",
    "true",
    " "
  ),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "grapheme", maxLength: 20 }),
  fc.integer({ min: 201, max: 5000 }).map((n) => "x".repeat(n))
)

/** A value that breaks what `schema` (a property's JSON Schema) says, or any JSON at all. */
const badValue = (schema: Json): fc.Arbitrary<unknown> => {
  const specific: Array<fc.Arbitrary<unknown>> = [fc.jsonValue({ maxDepth: 2 })]
  if (typeof schema.maxLength === "number") specific.push(fc.constant("y".repeat(schema.maxLength + 1)))
  if (schema.minLength === 1) specific.push(fc.constantFrom("", "   "))
  if (Array.isArray(schema.enum)) specific.push(fc.constantFrom("nope", "BACKLOG", 1))
  if (typeof schema.maxItems === "number") {
    specific.push(fc.constant(Array.from({ length: schema.maxItems + 1 }, (_, i) => `item-${i}`)))
  }
  if (schema.type === "array") specific.push(fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 }))
  if (schema.type === "integer" || schema.type === "number") {
    specific.push(fc.constantFrom(-1, 0, 1.5, 1e20, "12", Number.MAX_SAFE_INTEGER + 2))
  }
  if (schema.type === "object") specific.push(fc.constantFrom("x", [], { "": 1 }, { "1": null }))
  return fc.oneof(...specific)
}

/** Bodies: not objects, objects missing fields, with unknown or read-only fields, or with bad values. */
const badBody = (schema: Json): fc.Arbitrary<unknown> => {
  const properties = (schema.properties ?? {}) as Record<string, Json>
  const names = Object.keys(properties)
  const fields =
    names.length === 0
      ? fc.constant({})
      : fc.record(Object.fromEntries(names.map((n) => [n, badValue(properties[n] ?? {})])), { requiredKeys: [] })
  const unknown = fc.dictionary(
    fc.constantFrom("id", "created_at", "status", "owner", "nope", "extra_field"),
    fc.jsonValue({ maxDepth: 1 }),
    {
      maxKeys: 2
    }
  )
  return fc.oneof(
    fc.constantFrom<unknown>([1], [], "title", 42, null, true, {}),
    fields,
    fc.tuple(fields, unknown).map(([a, b]) => ({ ...b, ...a }))
  )
}

/** Query strings: each parameter given a bad value, sometimes repeated. */
const badQuery = (schema: Json): fc.Arbitrary<string> => {
  const names = Object.keys((schema.properties ?? {}) as Json)
  return fc
    .array(fc.tuple(fc.constantFrom(...names), badText), { minLength: 1, maxLength: 3 })
    .map((pairs) => new URLSearchParams(pairs).toString())
}

describe("every decode failure answers in words", () => {
  let server: TestServer
  let inputs = 0
  const problems: Array<string> = []

  beforeAll(async () => {
    server = await startTestServer({
      store: "sqlite",
      env: {
        TASKWRIGHT_RATE_LIMIT: "10000000",
        TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "10000000",
        TASKWRIGHT_LOGIN_ATTEMPTS: "10000000",
        TASKWRIGHT_SANDBOX: "off"
      }
    })
  })
  afterAll(() => server.close())

  /** Sends one input and records what is wrong with the answer. */
  const check = async (e: Endpoint, url: string, body: unknown, what: string) => {
    inputs++
    const r = await server.request<{ error?: { code?: string; message?: string; details?: Json } }>(e.method, url, {
      key: server.adminKey,
      ...(body === undefined ? {} : { body })
    })
    const where = `${e.name} ${what} ${url} ${body === undefined ? "" : JSON.stringify(body).slice(0, 200)}`
    if (r.status >= 500) problems.push(`${r.status} for ${where}: ${r.text.slice(0, 300)}`)
    if (r.status !== 400) return
    const error = r.body.error
    const message = error?.message ?? ""
    const first = (error?.details?.fields as ReadonlyArray<Json> | undefined)?.[0]?.path
    if (NOTATION.test(typeof first === "string" ? message.replace(first, "") : message)) {
      problems.push(`message "${message}" for ${where}`)
    }
    if (message.length > 1000) problems.push(`message of ${message.length} characters for ${where}`)
    const fields = error?.details?.fields
    if (!Array.isArray(fields) || fields.length === 0 || fields.length > 100) {
      problems.push(`details.fields ${JSON.stringify(fields)?.slice(0, 200)} for ${where}`)
      return
    }
    for (const field of fields as ReadonlyArray<Json>) {
      const text = field.message
      // The field's path is the client's own text (a record's key can be anything): it is not checked.
      const words = typeof text === "string" && typeof field.path === "string" ? text.replace(field.path, "") : text
      if (typeof words !== "string" || words.length < 8 || NOTATION.test(words)) {
        problems.push(`field message ${JSON.stringify(text)} for ${where}`)
      }
      if (typeof field.path !== "string" || field.path.length > 200) problems.push(`field path for ${where}`)
      if (field.bounds !== undefined && !isRecord(field.bounds)) problems.push(`field bounds for ${where}`)
    }
  }

  it("walks the contract's endpoints", () => {
    expect(endpoints.length).toBeGreaterThan(25)
    expect(endpoints.filter((e) => e.body !== undefined).length).toBeGreaterThan(8)
  })

  it.each(endpoints.map((e) => [e.name, e] as const))("%s", async (_, e) => {
    const base = wellFormedPath(e)
    const seed = [...e.name].reduce((h, c) => (h * 31 + c.charCodeAt(0)) | 0, 7)
    if (pathParams(e.path).length > 0) {
      // Every path of the contract has one parameter.
      for (const value of fc.sample(badText, { numRuns: 40, seed })) {
        await check(e, e.path.replace(/:\w+/, encodeURIComponent(value)), undefined, "path")
      }
    }
    if (e.query !== undefined && Object.keys((e.query.properties ?? {}) as Json).length > 0) {
      for (const query of fc.sample(badQuery(e.query), { numRuns: 60, seed })) {
        await check(e, `${base}?${query}`, undefined, "query")
      }
    }
    if (e.body !== undefined) {
      for (const body of fc.sample(badBody(e.body), { numRuns: 120, seed })) await check(e, base, body, "body")
    }
  })

  it.each(endpoints.filter((e) => e.body !== undefined).map((e) => [e.name, e] as const))(
    "%s: a body refused as a whole names the body as its field",
    async (_, e) => {
      const url = wellFormedPath(e)
      const deep = `{"a":${"[".repeat(40)}${"]".repeat(40)}}`
      const bodies: ReadonlyArray<readonly [string | Uint8Array, string]> = [
        ['{"title": "unfinished', "application/json"],
        [Uint8Array.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), "application/json"],
        [deep, "application/json"],
        ['{"title":"plain"}', "text/plain"]
      ]
      for (const [raw, type] of bodies) {
        const r = await server.request<{ error: { message: string; details: Json } }>(e.method, url, {
          key: server.adminKey,
          raw,
          headers: { "content-type": type }
        })
        expect(r.status, `${e.name} ${type} ${String(raw).slice(0, 40)}`).toBe(400)
        const { message, details } = r.body.error
        expect(details.fields).toEqual([{ path: "body", message }])
        expect(details.reason).toMatch(/^(invalid_json|invalid_utf8|too_deep|content_type)$/)
      }
    }
  )

  it("a missing body is refused as the services refuse one in process", async () => {
    // `[1]` reaches the service's own decoder, as an in-process call with a non-object would.
    const decoded = await server.request("POST", "/api/tasks", { key: server.adminKey, body: [1] })
    for (const [method, path] of [
      ["POST", "/api/tasks"],
      ["POST", "/api/projects"],
      ["POST", "/api/labels"]
    ] as const) {
      const missing = await server.request(method, path, { key: server.adminKey })
      expect(missing.status, path).toBe(400)
      expect(missing.body, path).toEqual(decoded.body)
    }
    expect(decoded.body).toEqual({
      error: {
        code: "BAD_REQUEST",
        message: "the body must be a JSON object",
        details: { fields: [{ path: "body", message: "the body must be a JSON object" }] }
      }
    })
  })

  it("found no schema notation, no message without words and no 500", () => {
    console.info(`${inputs} bad inputs sent to ${endpoints.length} endpoints`)
    expect(inputs).toBeGreaterThan(2000)
    expect(problems).toEqual([])
  })

  it("answers the issue's cases as a person would write them", async () => {
    const send = (method: string, path: string, body?: unknown) =>
      server.request<{ error: { message: string; details: { fields: ReadonlyArray<Json> } } }>(method, path, {
        key: server.adminKey,
        ...(body === undefined ? {} : { body })
      })
    const array = await send("POST", "/api/tasks", [1])
    expect(array.status).toBe(400)
    expect(array.body.error.message).toBe("the body must be a JSON object")
    expect(array.body.error.details.fields).toEqual([{ path: "body", message: "the body must be a JSON object" }])

    const missing = await send("POST", "/api/tasks", { description: "no title" })
    expect(missing.body.error.details.fields).toEqual([{ path: "title", message: "title is required" }])

    const long = await send("POST", "/api/tasks", { title: "x".repeat(501) })
    expect(long.body.error.details.fields).toEqual([
      { path: "title", message: "title must be 1 to 500 characters long", bounds: { minLength: 1, maxLength: 500 } }
    ])

    const priority = await send("POST", "/api/tasks", { title: "ok", priority: "asap" })
    expect(priority.body.error.details.fields).toEqual([
      { path: "priority", message: 'priority must be one of "low", "medium", "high", "urgent"' }
    ])

    const project = await send("POST", "/api/tasks", { title: "ok", project_id: "proj_1" })
    expect(project.body.error.details.fields).toEqual([
      {
        path: "project_id",
        message: "project_id must look like proj_ followed by 16 letters or digits",
        bounds: { minLength: 21, maxLength: 21 }
      }
    ])

    const id = await send("GET", "/api/tasks/abc")
    expect(id.status).toBe(400)
    expect(id.body.error.details.fields).toEqual([{ path: "id", message: "id must be a positive integer" }])

    const limit = await send("GET", "/api/tasks?limit=abc")
    expect(limit.body.error.details.fields).toEqual([
      {
        path: "limit",
        message: "limit must be a whole number from 1 to 200",
        bounds: { minimum: 1, maximum: 200, integer: true }
      }
    ])
  })
})
