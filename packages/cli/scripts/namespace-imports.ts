/**
 * An esbuild plugin that lets the CLI's bundle keep only the part of Effect it uses.
 *
 * Effect's packages export their modules through barrels of namespace re-exports
 * (`export * as Stream from "./Stream.js"`), and the idiomatic import goes through one
 * (`import { Effect, Stream } from "effect"`). esbuild does not tree-shake a namespace that a
 * barrel re-exports (evanw/esbuild#1420, open): it builds the whole namespace object, so every
 * export of every module imported that way was bundled, and parsed at each start that has no code
 * cache. A namespace imported from its module (`import * as Stream from ".../Stream.js"`) is used
 * only through property reads, which esbuild does tree-shake: the bundle went from 2.2 to 1.6 MB.
 *
 * So each file that imports names from such a barrel has those imports rewritten to the modules
 * the barrel names, at the paths the barrel's own directory gives: the very modules the barrel
 * would have loaded. Names the barrel exports otherwise (`pipe`) and type-only names keep their
 * import from the barrel. Effect's own modules import each other directly and are left alone.
 *
 * The maintained rewrites of this kind are Babel plugins (babel-plugin-transform-barrels) and lint
 * rules for a project's own sources: none runs inside esbuild, and a lint rule cannot reach the
 * libraries' code, whose barrel imports count as much as ours.
 */
import { readFile } from "node:fs/promises"
import { dirname, join } from "node:path"
import type { Plugin } from "esbuild"

/** The package roots whose barrels are rewritten: `effect` and `@effect/*`. */
const BARREL = "effect|@effect\\/[a-z-]+"
/** `import { A, B as C, type D } from "<barrel>"`, the one shape these imports take in the bundle's inputs. */
const NAMED_IMPORT = new RegExp(`import\\s*\\{([^}]*)\\}\\s*from\\s*["'](${BARREL})["'];?`, "g")
/** Anything else taken from a barrel, which this plugin would have to learn about. */
const OTHER_IMPORT = new RegExp(
  `(?:import\\s*\\*|export\\s*\\*|export\\s*\\{[^{}]*\\})\\s*(?:as\\s+\\w+\\s*)?from\\s*["'](${BARREL})["']`
)
/** `export * as Name from "./Name.js"` in a barrel. */
const NAMESPACE_EXPORT = /export\s*\*\s*as\s+(\w+)\s+from\s*["'](\.[^"']+)["']/g

/** The files this plugin reads: the bundle's own sources and its dependencies' ES modules. */
const SOURCE = /\.(?:ts|js|mjs)$/

export const namespaceImports = (): Plugin => ({
  name: "namespace-imports",
  setup: (build) => {
    // A barrel's file, read once per build: exported name -> the module's absolute path.
    const barrels = new Map<string, Promise<ReadonlyMap<string, string>>>()
    const namespacesOf = (file: string) => {
      let namespaces = barrels.get(file)
      if (namespaces === undefined) {
        namespaces = readFile(file, "utf8").then(
          (text) =>
            new Map(
              Array.from(text.matchAll(NAMESPACE_EXPORT), ([, name = "", module = ""]) => [
                name,
                join(dirname(file), module)
              ])
            )
        )
        barrels.set(file, namespaces)
      }
      return namespaces
    }

    build.onLoad({ filter: SOURCE }, async (args) => {
      if (args.path.includes("/node_modules/effect/")) return undefined
      const text = await readFile(args.path, "utf8")
      const other = OTHER_IMPORT.exec(text)
      // Left as it is (the bundle is larger, not wrong); the warning says what to teach this plugin.
      const warnings = other === null ? [] : [{ text: `not rewritten, the whole namespace is bundled: ${other[0]}` }]
      const matches = Array.from(text.matchAll(NAMED_IMPORT))
      if (matches.length === 0)
        return warnings.length === 0 ? undefined : { contents: text, loader: loaderOf(args.path), warnings }

      const resolveDir = dirname(args.path)
      const rewrite = async (statement: string, names: string, barrel: string): Promise<string> => {
        const resolved = await build.resolve(barrel, { kind: "import-statement", resolveDir })
        if (resolved.errors.length > 0) throw new Error(`${args.path}: ${barrel} did not resolve`)
        const namespaces = await namespacesOf(resolved.path)
        const imports: Array<string> = []
        const kept: Array<string> = []
        for (const specifier of names.split(",").map((s) => s.trim())) {
          if (specifier === "") continue
          const [name = specifier, local = name] = specifier.split(/\s+as\s+/)
          const module = specifier.startsWith("type ") ? undefined : namespaces.get(name)
          if (module === undefined) kept.push(specifier)
          else imports.push(`import * as ${local} from ${JSON.stringify(module)};`)
        }
        if (kept.length > 0) imports.push(`import { ${kept.join(", ")} } from "${barrel}";`)
        // As many lines as the statement had, so that stack traces keep their line numbers.
        return imports.join(" ") + "\n".repeat(statement.split("\n").length - 1)
      }
      const statements = await Promise.all(matches.map((m) => rewrite(m[0], m[1] ?? "", m[2] ?? "")))
      // Each statement put where its match was: the text is scanned once.
      let contents = ""
      let from = 0
      matches.forEach((match, i) => {
        contents += text.slice(from, match.index) + (statements[i] ?? "")
        from = match.index + match[0].length
      })
      contents += text.slice(from)
      return { contents, loader: loaderOf(args.path), resolveDir, warnings }
    })
  }
})

const loaderOf = (path: string): "ts" | "js" => (path.endsWith(".ts") ? "ts" : "js")
