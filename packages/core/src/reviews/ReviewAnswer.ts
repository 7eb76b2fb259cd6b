/**
 * The words of a pull-request review: the prompt that asks an agent for one, the agent's answer
 * read back into a review (the last fenced `json` block), and the body posted to GitHub. Pure
 * functions, no I/O.
 */
import {
  fieldProblems,
  MAX_REVIEW_COMMENT,
  MAX_REVIEW_COMMENTS,
  MAX_REVIEW_PATH,
  MAX_REVIEW_SUMMARY,
  type ReviewComment,
  type ReviewVerdict
} from "@taskwright/domain"
import { Either, Schema } from "effect"

/** The most of a diff a prompt carries; the agent reads the rest in the checkout. */
export const MAX_PROMPT_DIFF_CHARS = 200_000
/** The most of a pull request's description a prompt carries. */
const MAX_PROMPT_BODY_CHARS = 20_000

/** What the prompt says about the pull request. */
export interface ReviewSubject {
  readonly repo: string
  readonly number: number
  readonly title: string
  readonly body: string | null
  readonly headRef: string
  readonly headSha: string
  readonly baseRef: string
  readonly baseSha: string
  /** The diff GitHub answered; null when it gave none (too large). */
  readonly diff: string | null
}

const cut = (text: string, max: number): { readonly text: string; readonly cut: boolean } =>
  text.length <= max ? { text, cut: false } : { text: text.slice(0, max), cut: true }

/** A fence longer than any run of backticks in `text`, so the text cannot close it. */
const fenceFor = (text: string): string => {
  let longest = 0
  for (const run of text.match(/`+/g) ?? []) longest = Math.max(longest, run.length)
  return "`".repeat(Math.max(3, longest + 1))
}

/** The answer format the prompt asks for, as the prompt shows it. */
export const ANSWER_FORMAT = `\`\`\`json
{
  "summary": "What the change does and what you think of it, in Markdown.",
  "verdict": "approve | request_changes | comment",
  "comments": [
    { "path": "src/app.ts", "line": 12, "body": "What is wrong on this line and how to fix it." }
  ]
}
\`\`\``

/** The prompt of a review run: the pull request's title, description and diff, and the answer format. */
export const buildReviewPrompt = (subject: ReviewSubject): string => {
  const description = (subject.body ?? "").trim()
  const body = cut(description, MAX_PROMPT_BODY_CHARS)
  const parts = [
    `Review pull request ${subject.repo}#${subject.number}: ${subject.title.trim()}`,
    `Its head commit ${subject.headSha} (branch ${subject.headRef}) is checked out in the current directory, ` +
      `read-only: read any file you need, and run git (log, show, diff) to look around, but change nothing. ` +
      `It is to be merged into ${subject.baseRef}, at ${subject.baseSha}` +
      " (in the repository's history when the pull request's branch contains it).",
    description === ""
      ? "The pull request has no description."
      : `The pull request's description:\n\n${body.text}${body.cut ? "\n\n(description cut here)" : ""}`
  ]
  if (subject.diff === null) {
    parts.push("GitHub did not answer the pull request's diff (it is too large): compare the commits yourself.")
  } else {
    const diff = cut(subject.diff, MAX_PROMPT_DIFF_CHARS)
    const fence = fenceFor(diff.text)
    parts.push(
      `The pull request's diff${diff.cut ? ` (its first ${MAX_PROMPT_DIFF_CHARS} characters; read the rest in the checkout)` : ""}:\n\n` +
        `${fence}diff\n${diff.text}${diff.text.endsWith("\n") ? "" : "\n"}${fence}`
    )
  }
  parts.push(
    "Review the change: correctness, security, tests, and clarity. Comment only on lines the diff adds or keeps " +
      "(`line` is the line's number in the pull request's version of the file, `path` relative to the repository's root). " +
      "End your answer with one fenced json block, and nothing after it, of this form:\n\n" +
      ANSWER_FORMAT +
      "\n\n`verdict` is approve, request_changes or comment; `comments` may be empty."
  )
  return parts.join("\n\n")
}

// ---------------------------------------------------------------------------------------------
// The answer

/** The last fenced `json` block of a text: none, one (its content), or one left open. */
export type JsonBlock =
  | { readonly kind: "none" }
  | { readonly kind: "block"; readonly content: string }
  | { readonly kind: "unclosed" }

const OPENING = /^ {0,3}(`{3,}|~{3,})[ \t]*json[ \t]*$/i

/**
 * Finds the last fenced block whose info string is `json` (```` ```json ````, or `~~~json`), closed
 * by a fence of the same character at least as long, as Markdown reads fences.
 */
export const lastJsonBlock = (text: string): JsonBlock => {
  const lines = text.split(/\r?\n/)
  let last: JsonBlock = { kind: "none" }
  for (let i = 0; i < lines.length; i++) {
    const opening = OPENING.exec(lines[i] ?? "")?.[1]
    if (opening === undefined) continue
    const char = opening.charAt(0)
    const closing = new RegExp(`^ {0,3}\\${char}{${opening.length},}[ \\t]*$`)
    let end = -1
    for (let j = i + 1; j < lines.length; j++) {
      if (closing.test(lines[j] ?? "")) {
        end = j
        break
      }
    }
    if (end === -1) return { kind: "unclosed" }
    last = { kind: "block", content: lines.slice(i + 1, end).join("\n") }
    i = end
  }
  return last
}

const nonEmpty = (what: string, max: number) =>
  Schema.String.pipe(
    Schema.filter((s) => s.trim() !== "" || `${what} is empty`),
    Schema.filter((s) => s.length <= max || `${what} is longer than ${max} characters`)
  )

/** A file path as a review names it: relative, inside the repository. */
const ReviewPath = nonEmpty("path", MAX_REVIEW_PATH).pipe(
  Schema.filter(
    (path) =>
      (!path.startsWith("/") && !path.split("/").includes("..") && !path.includes("\\")) ||
      "path must be relative to the repository's root, without '..'"
  )
)

/** The block the prompt asks for. `verdict` defaults to comment; `comments` to none. */
const AnswerBlock = Schema.Struct({
  summary: nonEmpty("summary", MAX_REVIEW_SUMMARY),
  verdict: Schema.optionalWith(Schema.Literal("approve", "request_changes", "comment"), {
    default: () => "comment" as const
  }),
  comments: Schema.optionalWith(
    Schema.Array(
      Schema.Struct({
        path: ReviewPath,
        line: Schema.Number.pipe(Schema.int(), Schema.positive()),
        body: nonEmpty("body", MAX_REVIEW_COMMENT)
      })
    ),
    { default: () => [] }
  )
})

/** The review an answer holds, and remarks for the run's log. */
export interface ReviewAnswer {
  readonly summary: string
  readonly verdict: ReviewVerdict
  readonly comments: ReadonlyArray<ReviewComment>
  readonly notes: ReadonlyArray<string>
}

const decodeBlock = Schema.decodeUnknownEither(AnswerBlock, { errors: "all" })

/**
 * Reads an agent's final answer. The last fenced `json` block is the review; it must be a JSON
 * object with a `summary` and, when present, a `verdict` of approve, request_changes or comment
 * and `comments` of `{path, line, body}`: otherwise the answer is refused with the reason. Without
 * any json block the whole answer is the summary (verdict comment, no comments). No answer at all
 * is refused.
 */
export const readReviewAnswer = (answer: string | null): Either.Either<ReviewAnswer, string> => {
  const text = (answer ?? "").trim()
  if (text === "") return Either.left("the agent gave no answer to read a review from")
  const block = lastJsonBlock(text)
  if (block.kind === "unclosed") return Either.left("the agent's last json block is not closed")
  if (block.kind === "none") {
    const summary = cut(text, MAX_REVIEW_SUMMARY)
    return Either.right({
      summary: summary.text,
      verdict: "comment",
      comments: [],
      notes: [
        `The answer has no fenced json block: its final message is the review's summary${summary.cut ? " (cut)" : ""}`
      ]
    })
  }
  let value: unknown
  try {
    value = JSON.parse(block.content)
  } catch (error) {
    return Either.left(
      `the agent's json block is not valid JSON (${error instanceof Error ? error.message : String(error)})`
    )
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return Either.left("the agent's json block is not an object {summary, verdict, comments}")
  }
  const decoded = decodeBlock(value)
  if (Either.isLeft(decoded)) {
    const why = fieldProblems(decoded.left, "input")
      .slice(0, 5)
      .map((problem) =>
        problem.message.startsWith(problem.path) ? problem.message : `${problem.path}: ${problem.message}`
      )
      .join("; ")
    return Either.left(`the agent's json block is not a review {summary, verdict, comments}: ${why}`)
  }
  const { summary, verdict, comments } = decoded.right
  const notes: Array<string> = []
  if (comments.length > MAX_REVIEW_COMMENTS) {
    notes.push(`The review has ${comments.length} comments; the first ${MAX_REVIEW_COMMENTS} are kept`)
  }
  return Either.right({
    summary: summary.trim(),
    verdict,
    comments: comments.slice(0, MAX_REVIEW_COMMENTS).map((c) => ({
      path: c.path.replace(/^\.\//, ""),
      line: c.line,
      body: c.body.trim()
    })),
    notes
  })
}

// ---------------------------------------------------------------------------------------------
// Posting

/**
 * The lines of each file a review may comment on in GitHub's diff: the lines of the new version
 * that the hunks show (added or kept as context). GitHub refuses a review whose comment points
 * anywhere else.
 */
export const commentableLines = (diff: string): ReadonlyMap<string, ReadonlySet<number>> => {
  const files = new Map<string, Set<number>>()
  let current: Set<number> | null = null
  let line = 0
  let inHunk = false
  for (const text of diff.split("\n")) {
    if (text.startsWith("diff --git ")) {
      current = null
      inHunk = false
      continue
    }
    if (!inHunk && text.startsWith("+++ ")) {
      const path = text.slice(4).replace(/\t.*$/, "")
      if (path === "/dev/null") current = null
      else {
        const name = path.startsWith("b/") ? path.slice(2) : path
        current = files.get(name) ?? new Set<number>()
        files.set(name, current)
      }
      continue
    }
    const hunk = /^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(text)
    if (hunk !== null) {
      line = Number(hunk[1])
      inHunk = true
      continue
    }
    if (!inHunk || current === null) continue
    if (text.startsWith("+") || text.startsWith(" ")) {
      current.add(line)
      line++
    } else if (text.startsWith("-") || text.startsWith("\\")) {
      // a removed line, or "\ No newline at end of file": no line of the new version
    } else {
      inHunk = false
    }
  }
  return files
}

const verdictWords: Record<ReviewVerdict, string> = {
  approve: "approve",
  request_changes: "request changes",
  comment: "comment"
}

/** The most characters of a review body GitHub takes (65,536), less a margin. */
const MAX_BODY = 65_000

/**
 * The body of the posted review: the summary, the agent's verdict (a `COMMENT` review carries no
 * verdict of its own), the comments that cannot be placed on their lines, and who wrote it.
 */
export const reviewBody = (options: {
  readonly summary: string
  readonly verdict: ReviewVerdict
  readonly outside: ReadonlyArray<ReviewComment>
  readonly footer: string
}): string => {
  const parts = [options.summary.trim(), `**Verdict:** ${verdictWords[options.verdict]}`]
  if (options.outside.length > 0) {
    parts.push(
      [
        "**Comments on lines outside the diff:**",
        ...options.outside.map((c) => `- \`${c.path.replace(/`/g, "'")}\` line ${c.line}: ${c.body.trim()}`)
      ].join("\n")
    )
  }
  const footer = `_${options.footer}_`
  const text = parts.join("\n\n")
  const room = MAX_BODY - footer.length - 4
  return `${text.length <= room ? text : `${text.slice(0, room - 1)}…`}\n\n${footer}`
}
