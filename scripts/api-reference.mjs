#!/usr/bin/env node
// @ts-check
// The API reference as Markdown (docs/api.md), generated from the OpenAPI document the server
// serves, so the API can be read where the repository is hosted. `node scripts/api-reference.mjs`
// rewrites docs/api.md from the built server (run `npm run build` first); the server's test
// (packages/server/test/api-reference.test.ts) fails when the committed page is out of date.
import { writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

/** @typedef {Record<string, any>} Json */

const METHODS = ["get", "post", "put", "patch", "delete"]

/** Text for a Markdown table cell: one line, pipes escaped. */
const cell = (/** @type {unknown} */ text) =>
  String(text ?? "")
    .replaceAll("|", "\\|")
    .replaceAll("\n", " ")

/** An anchor GitHub makes for a heading. */
const anchor = (/** @type {string} */ heading) =>
  heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replaceAll(" ", "-")

/**
 * Renders the OpenAPI document `doc` as Markdown.
 * @param {Json} doc
 * @returns {string}
 */
export const renderReference = (doc) => {
  const schemas = /** @type {Json} */ (doc.components?.schemas ?? {})
  /** @param {Json | undefined} schema */
  const deref = (schema) => {
    if (schema === undefined) return {}
    if (typeof schema.$ref === "string") return deref(schemas[schema.$ref.split("/").pop()])
    if (Array.isArray(schema.allOf) && schema.allOf.length === 1 && schema.type === undefined) {
      const { allOf, ...rest } = schema
      return { ...deref(allOf[0]), ...rest }
    }
    return schema
  }
  /** The name of a referenced model, if the schema is one. */
  const refName = (/** @type {Json} */ schema) =>
    typeof schema?.$ref === "string"
      ? schema.$ref.split("/").pop()
      : Array.isArray(schema?.allOf) && schema.allOf.length === 1
        ? refName(schema.allOf[0])
        : undefined

  /**
   * A schema's type in a few words: `string (1-500)`, `"low" \| "high"`, `array of Task`.
   * @param {Json} schema
   * @returns {string}
   */
  const typeOf = (schema) => {
    const name = refName(schema)
    if (name !== undefined && !name.endsWith("Error")) return `[${name}](#${anchor(name)})`
    const s = deref(schema)
    if (Array.isArray(s.enum)) return s.enum.map((v) => JSON.stringify(v)).join(" | ")
    if (s.const !== undefined) return JSON.stringify(s.const)
    if (Array.isArray(s.anyOf)) return s.anyOf.map(typeOf).join(" or ")
    if (s.type === "array") {
      const count = range(s.minItems, s.maxItems)
      return `array of ${typeOf(s.items ?? {})}${count === "" ? "" : `, ${count} items`}`
    }
    if (s.type === "null") return "null"
    if (s.type === "object" && s.properties === undefined && typeof s.additionalProperties === "object") {
      return `object of ${typeOf(s.additionalProperties)}`
    }
    const parts = [s.format === undefined ? s.type : `${s.type} (${s.format})`]
    const length = range(s.minLength, s.maxLength)
    if (length !== "") parts.push(`${length} chars`)
    const value = range(s.minimum ?? s.exclusiveMinimum, s.maximum ?? s.exclusiveMaximum)
    if (value !== "") parts.push(value)
    if (typeof s.pattern === "string") parts.push(`\`${s.pattern}\``)
    return parts.filter(Boolean).join(", ")
  }
  /** `1-500`, `at most 50`, or nothing. */
  const range = (/** @type {number | undefined} */ min, /** @type {number | undefined} */ max) =>
    min !== undefined && max !== undefined
      ? min === max
        ? `${min}`
        : `${min}-${max}`
      : max !== undefined
        ? `at most ${max}`
        : min !== undefined
          ? `at least ${min}`
          : ""

  /** The fields of an object schema as a table. */
  const fields = (/** @type {Json} */ schema) => {
    const s = deref(schema)
    const properties = /** @type {Json} */ (s.properties ?? {})
    if (Object.keys(properties).length === 0) return []
    const required = new Set(s.required ?? [])
    const out = ["| Field | Type | Required | Description |", "| --- | --- | --- | --- |"]
    for (const [name, property] of Object.entries(properties)) {
      out.push(
        `| \`${name}\` | ${cell(typeOf(property))} | ${required.has(name) ? "yes" : "no"} | ${cell(describe(property))} |`
      )
    }
    return out
  }
  /** A field's description: its own, its items', or its non-null member's. */
  const describe = (/** @type {Json} */ schema) => {
    const s = deref(schema)
    if (typeof s.description === "string") return s.description
    if (s.items !== undefined) return deref(s.items).description ?? ""
    if (Array.isArray(s.anyOf)) return s.anyOf.map((/** @type {Json} */ m) => deref(m).description).find(Boolean) ?? ""
    return ""
  }
  /** Response headers, the three rate-limit ones said once. */
  const headerList = (/** @type {Json} */ headers) => {
    const names = Object.keys(headers ?? {})
    const limits = names.filter((n) => n.startsWith("X-RateLimit-"))
    const others = names.filter((n) => !n.startsWith("X-RateLimit-"))
    return [...(limits.length === 3 ? ["X-RateLimit-*"] : limits), ...others].join(", ")
  }
  /** An answer as a table cell: an error's code first, a model's name after. */
  const answer = (/** @type {Json} */ response) => {
    const schema = response.content?.["application/json"]?.schema
    const name = schema === undefined ? undefined : refName(schema)
    if (name?.endsWith("Error")) {
      const code = deref(deref(deref(schemas[name]).properties?.error).properties?.code).enum?.[0]
      return `\`${code}\`: ${response.description}`
    }
    return name === undefined ? response.description : `${response.description} ([${name}](#${anchor(name)}))`
  }
  const example = (/** @type {Json} */ schema) => {
    const s = deref(schema)
    const value = Array.isArray(s.examples) ? s.examples[0] : undefined
    return value === undefined ? [] : ["```json", JSON.stringify(value, null, 2), "```"]
  }

  const out = [
    `# ${doc.info.title} API reference`,
    "",
    `<!-- Generated by scripts/api-reference.mjs from the OpenAPI document the server serves at /api/openapi.json. Do not edit: run \`npm run build && node scripts/api-reference.mjs\`. -->`,
    "",
    `Version ${doc.info.version} · OpenAPI ${doc.openapi} · ${doc.info.license?.name ?? ""} licence. A running server serves this reference at \`/api/docs\` and the document at \`/api/openapi.json\`.`,
    "",
    doc.info.description ?? "",
    "",
    "## Servers",
    "",
    ...(doc.servers ?? []).map((/** @type {Json} */ s) => `- \`${s.url}\`: ${s.description ?? ""}`),
    "",
    "## Authentication",
    "",
    "| Scheme | How it is sent | Description |",
    "| --- | --- | --- |",
    ...Object.entries(doc.components?.securitySchemes ?? {}).map(
      ([name, /** @type {Json} */ s]) =>
        `| \`${name}\` | ${s.type === "http" ? `\`Authorization: Bearer\`${s.bearerFormat ? ` (${s.bearerFormat})` : ""}` : `${s.in} \`${s.name}\``} | ${cell(s.description)} |`
    ),
    "",
    "## Operations",
    ""
  ]
  const tags = /** @type {Array<Json>} */ (doc.tags ?? [])
  for (const tag of tags) {
    out.push(`- [${tag.name}](#${anchor(tag.name)}): ${tag.description ?? ""}`)
  }
  out.push("")

  for (const tag of tags) {
    out.push(`## ${tag.name}`, "", tag.description ?? "", "")
    for (const [path, item] of Object.entries(doc.paths ?? {})) {
      for (const method of METHODS) {
        const op = /** @type {Json | undefined} */ (item[method])
        if (op === undefined || !(op.tags ?? []).includes(tag.name)) continue
        out.push(
          `### ${op.summary ?? op.operationId}`,
          "",
          `\`${method.toUpperCase()} ${path}\``,
          "",
          op.description ?? "",
          ""
        )
        const security = (op.security ?? []).map((/** @type {Json} */ s) => Object.keys(s)[0])
        out.push(`Authentication: ${security.length === 0 ? "none" : security.map((s) => `\`${s}\``).join(", ")}.`, "")
        const parameters = /** @type {Array<Json>} */ (op.parameters ?? [])
        if (parameters.length > 0) {
          out.push("| Parameter | In | Type | Required | Description |", "| --- | --- | --- | --- | --- |")
          for (const p of parameters) {
            const s = deref(p.schema)
            const fallback = s.default === undefined ? "" : ` Default ${JSON.stringify(s.default)}.`
            out.push(
              `| \`${p.name}\` | ${p.in} | ${cell(typeOf(p.schema))} | ${p.required ? "yes" : "no"} | ${cell((p.description ?? s.description ?? "") + fallback)} |`
            )
          }
          out.push("")
        }
        const body = op.requestBody?.content?.["application/json"]?.schema
        if (body !== undefined) {
          const s = deref(body)
          out.push("Request body (JSON):", "", ...(s.description ? [s.description, ""] : []), ...fields(body), "")
          const e = example(body)
          if (e.length > 0) out.push("Example:", "", ...e, "")
        }
        out.push("| Status | Answer | Headers |", "| --- | --- | --- |")
        for (const [status, response] of Object.entries(op.responses ?? {})) {
          out.push(`| ${status} | ${cell(answer(response))} | ${headerList(response.headers)} |`)
        }
        out.push("")
        const success = Object.entries(op.responses ?? {}).find(([status]) => status.startsWith("2"))
        const schema = success?.[1].content?.["application/json"]?.schema
        if (schema !== undefined) {
          const e = example(schema)
          if (e.length > 0) out.push(`Example answer (${success?.[0]}):`, "", ...e, "")
        }
      }
    }
  }

  out.push("## Models", "", "The shapes named above. Every error answers the same envelope:", "")
  out.push(...fields(schemas.BadRequestError), "")
  for (const name of Object.keys(schemas).sort()) {
    if (name.endsWith("Error")) continue
    const s = deref(schemas[name])
    out.push(`### ${name}`, "", s.description ?? "", "")
    const table = fields(s)
    out.push(...(table.length > 0 ? table : [`Type: ${typeOf(s)}`]), "")
  }
  out.push("## Errors", "", "| Status | Code | Meaning |", "| --- | --- | --- |")
  for (const name of Object.keys(schemas).sort()) {
    if (!name.endsWith("Error")) continue
    const error = deref(deref(schemas[name]).properties?.error)
    const code = deref(error.properties?.code).enum?.[0]
    const status = Object.values(doc.paths ?? {})
      .flatMap((item) => METHODS.map((m) => item[m]).filter(Boolean))
      .flatMap((op) => Object.entries(op.responses ?? {}))
      .find(([, r]) => r.content?.["application/json"]?.schema?.$ref?.endsWith(`/${name}`))?.[0]
    out.push(`| ${status ?? ""} | \`${code}\` | ${cell(deref(schemas[name]).description)} |`)
  }
  out.push("")
  return `${out
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim()}\n`
}

/** Where the page is kept. */
export const REFERENCE_FILE = join(dirname(fileURLToPath(import.meta.url)), "..", "docs", "api.md")

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const server = join(dirname(fileURLToPath(import.meta.url)), "..", "packages", "server", "dist", "index.js")
  const { openApiDocument } = await import(pathToFileURL(server).href)
  writeFileSync(REFERENCE_FILE, renderReference(JSON.parse(JSON.stringify(openApiDocument()))))
  console.log(`wrote ${REFERENCE_FILE}`)
}
