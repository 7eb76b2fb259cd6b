/**
 * The words of a pull-request review: the last fenced json block of an answer, the review read from
 * it (or the whole answer as the summary), the refusals with their reasons, the lines of a diff a
 * review may comment on, the posted body, and the prompt.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import {
  buildReviewPrompt,
  commentableLines,
  lastJsonBlock,
  MAX_PROMPT_DIFF_CHARS,
  readReviewAnswer,
  reviewBody
} from "../../src/reviews/ReviewAnswer.js"

const reasonOf = (answer: string | null): string => {
  const read = readReviewAnswer(answer)
  if (Either.isRight(read)) throw new Error(`expected a refusal, got ${JSON.stringify(read.right)}`)
  return read.left
}

const reviewOf = (answer: string | null) => {
  const read = readReviewAnswer(answer)
  if (Either.isLeft(read)) throw new Error(`expected a review, got: ${read.left}`)
  return read.right
}

describe("lastJsonBlock", () => {
  it("finds the last json block, whatever comes before it", () => {
    const text = [
      "First thoughts:",
      "```json",
      '{"summary": "draft"}',
      "```",
      "Some code:",
      "```ts",
      "const a = 1",
      "```",
      "Final:",
      "~~~~JSON",
      '{"summary": "final"}',
      "```",
      "~~~~",
      "Thanks."
    ].join("\n")
    assert.deepStrictEqual(lastJsonBlock(text), { kind: "block", content: '{"summary": "final"}\n```' })
  })

  it("says none without a json block, and unclosed for one left open", () => {
    assert.deepStrictEqual(lastJsonBlock("no fences here\n```\nplain\n```"), { kind: "none" })
    assert.deepStrictEqual(lastJsonBlock('done\n```json\n{"summary": "x"}'), { kind: "unclosed" })
    // A closing fence must be at least as long as the opening one.
    assert.deepStrictEqual(lastJsonBlock('````json\n{"a": 1}\n```\n'), { kind: "unclosed" })
  })
})

describe("readReviewAnswer", () => {
  it("reads summary, verdict and comments from the last block, trimmed, ./ dropped", () => {
    const review = reviewOf(
      [
        "I read the change.",
        "```json",
        JSON.stringify({
          summary: "  Looks good, one nit.  ",
          verdict: "approve",
          comments: [{ path: "./src/app.ts", line: 3, body: " Rename this. " }],
          extra: "ignored"
        }),
        "```"
      ].join("\n")
    )
    assert.deepStrictEqual(review, {
      summary: "Looks good, one nit.",
      verdict: "approve",
      comments: [{ path: "src/app.ts", line: 3, body: "Rename this." }],
      notes: []
    })
  })

  it("defaults the verdict to comment and the comments to none", () => {
    const review = reviewOf('```json\n{"summary": "Fine."}\n```')
    assert.strictEqual(review.verdict, "comment")
    assert.deepStrictEqual(review.comments, [])
  })

  it("takes the whole answer as the summary when there is no json block", () => {
    const review = reviewOf("  All good.\nShip it.  ")
    assert.deepStrictEqual(
      { summary: review.summary, verdict: review.verdict, comments: review.comments },
      { summary: "All good.\nShip it.", verdict: "comment", comments: [] }
    )
    assert.match(review.notes[0] ?? "", /no fenced json block/)
  })

  it("refuses an empty answer, a block that is not JSON, not an object, or not a review, saying why", () => {
    assert.match(reasonOf(null), /no answer/)
    assert.match(reasonOf("   "), /no answer/)
    assert.match(reasonOf('```json\n{"summary": "x",}\n```'), /^the agent's json block is not valid JSON \(/)
    assert.match(reasonOf("```json\n[1, 2]\n```"), /is not an object/)
    assert.match(reasonOf("```json\nnull\n```"), /is not an object/)
    assert.match(reasonOf('```json\n{"summary": "x"'), /not closed/)
    const why = reasonOf(
      '```json\n{"summary": "", "verdict": "lgtm", "comments": [{"path": "/etc/passwd", "line": 0, "body": "x"}]}\n```'
    )
    assert.match(why, /^the agent's json block is not a review \{summary, verdict, comments\}: /)
    assert.include(why, "summary is empty")
    assert.include(why, 'verdict must be one of "approve", "request_changes", "comment"')
    assert.include(why, "comments.0.path: path must be relative to the repository's root")
    assert.include(why, "comments.0.line must be")
    assert.match(
      reasonOf('```json\n{"summary": "x", "comments": [{"path": "../x", "line": 1, "body": "b"}]}\n```'),
      /'\.\.'/
    )
    assert.match(reasonOf('```json\n{"summary": "x", "comments": {"path": "a"}}\n```'), /comments/)
  })

  it("keeps the first 100 comments of a longer review, with a note", () => {
    const comments = Array.from({ length: 130 }, (_, i) => ({ path: "a.ts", line: i + 1, body: `c${i}` }))
    const review = reviewOf(`\`\`\`json\n${JSON.stringify({ summary: "many", comments })}\n\`\`\``)
    assert.strictEqual(review.comments.length, 100)
    assert.match(review.notes[0] ?? "", /130 comments; the first 100 are kept/)
  })
})

const DIFF = `diff --git a/src/app.ts b/src/app.ts
index 1111111..2222222 100644
--- a/src/app.ts
+++ b/src/app.ts
@@ -1,3 +1,3 @@
 export const a = 1
-export const b = 2
+export const b = 20
 export const c = 3
@@ -10,2 +10,3 @@ export const j = 10
 export const k = 11
+export const l = 12
 export const m = 13
diff --git a/src/greet.ts b/src/greet.ts
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/src/greet.ts
@@ -0,0 +1,2 @@
+export const greet = (name: string) => name
+++ not a header, an added line
\\ No newline at end of file
diff --git a/old.ts b/old.ts
deleted file mode 100644
--- a/old.ts
+++ /dev/null
@@ -1 +0,0 @@
-gone
`

describe("commentableLines", () => {
  it("lists each file's lines of the new version that the hunks show", () => {
    const lines = commentableLines(DIFF)
    assert.deepStrictEqual(
      [...(lines.get("src/app.ts") ?? [])].sort((a, b) => a - b),
      [1, 2, 3, 10, 11, 12]
    )
    assert.deepStrictEqual([...(lines.get("src/greet.ts") ?? [])], [1, 2])
    assert.strictEqual(lines.has("old.ts"), false)
  })
})

describe("reviewBody", () => {
  it("carries the summary, the verdict in words, the comments outside the diff and the footer", () => {
    const body = reviewBody({
      summary: "Summary here.",
      verdict: "request_changes",
      outside: [{ path: "docs/`x`.md", line: 4, body: "Fix the docs." }],
      footer: "Reviewed by the reader agent in Taskwright run run_x."
    })
    assert.strictEqual(
      body,
      [
        "Summary here.",
        "**Verdict:** request changes",
        "**Comments on lines outside the diff:**\n- `docs/'x'.md` line 4: Fix the docs.",
        "_Reviewed by the reader agent in Taskwright run run_x._"
      ].join("\n\n")
    )
  })

  it("stays within GitHub's limit, keeping the footer", () => {
    const body = reviewBody({ summary: "x".repeat(70_000), verdict: "comment", outside: [], footer: "by us" })
    assert.isAtMost(body.length, 65_000)
    assert.isTrue(body.endsWith("_by us_"))
  })
})

describe("buildReviewPrompt", () => {
  const subject = {
    repo: "octo-org/hello",
    number: 7,
    title: "Greet the user",
    body: "Adds greet.",
    headRef: "feature/greeting",
    headSha: "a".repeat(40),
    baseRef: "main",
    baseSha: "b".repeat(40),
    diff: "+```json\n+not a block\n"
  }

  it("carries the title, the description, the diff in a fence it cannot close, and the answer format", () => {
    const prompt = buildReviewPrompt(subject)
    assert.include(prompt, "Review pull request octo-org/hello#7: Greet the user")
    assert.include(prompt, `Its head commit ${"a".repeat(40)} (branch feature/greeting)`)
    assert.include(prompt, "Adds greet.")
    assert.include(prompt, "````diff\n+```json\n+not a block\n````")
    assert.include(prompt, '"verdict": "approve | request_changes | comment"')
    // What the agent is asked for is the prompt's last fenced json block.
    assert.deepStrictEqual(lastJsonBlock(prompt).kind, "block")
  })

  it("cuts a long diff and says where the rest is; says so when GitHub gave none", () => {
    const long = buildReviewPrompt({ ...subject, diff: "+x\n".repeat(MAX_PROMPT_DIFF_CHARS) })
    assert.include(long, "read the rest in the checkout")
    assert.isBelow(long.length, MAX_PROMPT_DIFF_CHARS + 5_000)
    assert.include(
      buildReviewPrompt({ ...subject, diff: null, body: null }),
      "GitHub did not answer the pull request's diff"
    )
    assert.include(buildReviewPrompt({ ...subject, body: "  " }), "The pull request has no description.")
  })
})
