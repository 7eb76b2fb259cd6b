import { assert, describe, it } from "@effect/vitest"
import {
  claudeParser,
  codexParser,
  geminiParser,
  type LogDraft,
  MAX_MESSAGE_CHARS,
  parserFor,
  plainParser,
  type StreamParser
} from "../../src/agents/AgentStreams.js"

/** Feeds every line, then flushes, like the run supervisor does. */
const feed = (parser: StreamParser, lines: ReadonlyArray<string>): Array<LogDraft> => [
  ...lines.flatMap((line) => parser.parseLine(line)),
  ...parser.flush()
]

const json = (value: unknown): string => JSON.stringify(value)

// Shapes follow each CLI's documented output (see spec/agent-clis.md).
const claudeFixture = [
  json({ type: "system", subtype: "init", session_id: "s-1", cwd: "/w", model: "claude-sonnet", tools: ["Bash"] }),
  json({
    type: "assistant",
    message: { role: "assistant", content: [{ type: "thinking", thinking: "Let me look." }] }
  }),
  json({ type: "assistant", message: { role: "assistant", content: [{ type: "text", text: "Reading the file." }] } }),
  json({
    type: "assistant",
    message: {
      role: "assistant",
      content: [
        { type: "tool_use", id: "t1", name: "Read", input: { file_path: "x" } },
        {
          type: "tool_use",
          id: "t2",
          name: "Edit",
          input: { file_path: "src/a.ts", old_string: "a", new_string: "b" }
        },
        { type: "tool_use", id: "t3", name: "Bash", input: { command: "npm test" } }
      ]
    }
  }),
  json({
    type: "user",
    message: {
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: "t1", content: [{ type: "text", text: "contents" }] },
        { type: "tool_result", tool_use_id: "t3", content: "1 failing", is_error: true }
      ]
    }
  }),
  json({ type: "stream_event", event: { type: "content_block_delta" } }),
  json({
    type: "assistant",
    message: { role: "assistant", content: [{ type: "text", text: "Done.\n```json\n{}\n```" }] }
  }),
  json({
    type: "result",
    subtype: "success",
    is_error: false,
    duration_ms: 12_345,
    num_turns: 4,
    result: "Final answer",
    session_id: "s-1",
    usage: { input_tokens: 100, cache_creation_input_tokens: 20, cache_read_input_tokens: 30, output_tokens: 40 },
    total_cost_usd: 0.0123
  })
]

describe("claudeParser", () => {
  it("turns a stream-json session into readable entries", () => {
    const entries = feed(claudeParser(), claudeFixture)
    assert.deepStrictEqual(entries, [
      { level: "info", message: "Claude session s-1 started (model claude-sonnet, cwd /w)" },
      { level: "debug", message: "Thinking: Let me look." },
      { level: "info", message: "Reading the file." },
      { level: "info", message: 'Tool Read {"file_path":"x"}' },
      { level: "info", message: "Edit src/a.ts" },
      { level: "info", message: "$ npm test" },
      { level: "info", message: 'Tool Read {"file_path":"x"}: contents' },
      { level: "error", message: "$ npm test failed: 1 failing" },
      { level: "info", message: "Done.\n```json\n{}\n```" },
      { level: "info", message: "Finished: success (4 turns, 12.3 s, $0.0123)" }
    ])
  })

  it("reports usage with cached input counted as input, and the result text", () => {
    const parser = claudeParser()
    assert.isNull(parser.usage())
    assert.isNull(parser.finalText())
    feed(parser, claudeFixture)
    assert.deepStrictEqual(parser.usage(), { input_tokens: 150, output_tokens: 40, cost_usd: 0.0123 })
    assert.strictEqual(parser.finalText(), "Final answer")
  })

  it("falls back to the last assistant text when the stream has no result", () => {
    const parser = claudeParser()
    feed(parser, claudeFixture.slice(0, -1))
    assert.strictEqual(parser.finalText(), "Done.\n```json\n{}\n```")
    assert.isNull(parser.usage())
  })

  it("marks failed results as errors", () => {
    const [entry] = claudeParser().parseLine(
      json({
        type: "result",
        subtype: "error_max_turns",
        is_error: true,
        num_turns: 10,
        usage: { input_tokens: 1, output_tokens: 2 }
      })
    )
    assert.strictEqual(entry?.level, "error")
    assert.match(entry?.message ?? "", /^Failed: error_max_turns \(10 turns\)/)
  })

  it("keeps a result whose usage has no cost", () => {
    const parser = claudeParser()
    parser.parseLine(json({ type: "result", subtype: "success", usage: { input_tokens: 5, output_tokens: 6 } }))
    assert.deepStrictEqual(parser.usage(), { input_tokens: 5, output_tokens: 6, cost_usd: null })
  })

  it("turns unknown events into debug entries and bad lines into info entries", () => {
    const parser = claudeParser()
    const [unknown] = parser.parseLine(json({ type: "hook_event", name: "x" }))
    assert.strictEqual(unknown?.level, "debug")
    assert.deepStrictEqual(parser.parseLine("Loading config…"), [{ level: "info", message: "Loading config…" }])
    const truncatedLine = claudeFixture[3]?.slice(0, 60) ?? ""
    assert.deepStrictEqual(parser.parseLine(truncatedLine), [{ level: "info", message: truncatedLine }])
    assert.deepStrictEqual(parser.parseLine("[1,2]"), [{ level: "info", message: "[1,2]" }])
    assert.deepStrictEqual(parser.parseLine("null"), [{ level: "info", message: "null" }])
    assert.deepStrictEqual(parser.parseLine('{"no_type":1}'), [{ level: "info", message: '{"no_type":1}' }])
    assert.deepStrictEqual(parser.parseLine(""), [])
    assert.deepStrictEqual(parser.parseLine("   "), [])
  })

  it("survives events whose fields have unexpected types", () => {
    const parser = claudeParser()
    const odd = [
      json({ type: "assistant", message: "not an object" }),
      json({ type: "assistant", message: { content: [null, 3, { type: "tool_use" }, { type: "image" }] } }),
      json({ type: "user", message: { content: [{ type: "tool_result", content: { weird: true } }] } }),
      json({ type: "result", usage: "none", total_cost_usd: "free", result: 42 }),
      json({ type: "system" })
    ]
    for (const line of odd) {
      for (const entry of parser.parseLine(line)) assert.isString(entry.message)
    }
  })

  it("truncates huge messages", () => {
    const big = "x".repeat(10_000)
    const [entry] = claudeParser().parseLine(
      json({
        type: "assistant",
        message: { content: [{ type: "tool_use", id: "t", name: "Write", input: { content: big } }] }
      })
    )
    assert.isAtMost(entry?.message.length ?? 0, MAX_MESSAGE_CHARS + 40)
    assert.match(entry?.message ?? "", /more chars\)$/)
  })
})

const codexFixture = [
  json({ type: "thread.started", thread_id: "th-1" }),
  json({ type: "turn.started" }),
  json({ type: "item.completed", item: { id: "i0", type: "reasoning", text: "**Inspecting**" } }),
  json({
    type: "item.started",
    item: {
      id: "i1",
      type: "command_execution",
      command: "npm test",
      aggregated_output: "",
      exit_code: null,
      status: "in_progress"
    }
  }),
  json({
    type: "item.updated",
    item: {
      id: "i1",
      type: "command_execution",
      command: "npm test",
      aggregated_output: "run",
      exit_code: null,
      status: "in_progress"
    }
  }),
  json({
    type: "item.completed",
    item: {
      id: "i1",
      type: "command_execution",
      command: "npm test",
      aggregated_output: "ok",
      exit_code: 0,
      status: "completed"
    }
  }),
  json({
    type: "item.completed",
    item: {
      id: "i2",
      type: "command_execution",
      command: "false",
      aggregated_output: "boom\n",
      exit_code: 1,
      status: "failed"
    }
  }),
  json({
    type: "item.completed",
    item: {
      id: "i3",
      type: "file_change",
      changes: [
        { path: "src/a.ts", kind: "update" },
        { path: "src/b.ts", kind: "add" },
        { path: "old.ts", kind: "delete" }
      ],
      status: "completed"
    }
  }),
  json({ type: "item.started", item: { id: "i4", type: "todo_list", items: [{ text: "fix", completed: false }] } }),
  json({ type: "item.updated", item: { id: "i4", type: "todo_list", items: [{ text: "fix", completed: false }] } }),
  json({ type: "item.updated", item: { id: "i4", type: "todo_list", items: [{ text: "fix", completed: true }] } }),
  json({
    type: "item.started",
    item: {
      id: "i5",
      type: "mcp_tool_call",
      server: "docs",
      tool: "search",
      arguments: { q: "x" },
      status: "in_progress"
    }
  }),
  json({
    type: "item.completed",
    item: {
      id: "i5",
      type: "mcp_tool_call",
      server: "docs",
      tool: "search",
      error: { message: "offline" },
      status: "failed"
    }
  }),
  json({ type: "item.started", item: { id: "i6", type: "web_search", query: "effect docs" } }),
  json({ type: "item.completed", item: { id: "i6", type: "web_search", query: "effect docs" } }),
  json({ type: "item.completed", item: { id: "i7", type: "error", message: "model fell back" } }),
  json({ type: "item.completed", item: { id: "i8", type: "agent_message", text: "First answer" } }),
  json({ type: "turn.completed", usage: { input_tokens: 1000, cached_input_tokens: 400, output_tokens: 100 } }),
  json({ type: "turn.started" }),
  json({ type: "item.completed", item: { id: "i9", type: "agent_message", text: "Final answer" } }),
  json({ type: "turn.completed", usage: { input_tokens: 500, cached_input_tokens: 0, output_tokens: 50 } })
]

describe("codexParser", () => {
  it("turns an exec --json session into readable entries", () => {
    const entries = feed(codexParser(), codexFixture)
    assert.deepStrictEqual(entries, [
      { level: "info", message: "Codex thread th-1 started" },
      { level: "debug", message: "Turn started" },
      { level: "debug", message: "Thinking: **Inspecting**" },
      { level: "debug", message: "$ npm test (running)" },
      { level: "info", message: "$ npm test (exit 0)" },
      { level: "error", message: "$ false (exit 1)\nboom" },
      { level: "info", message: "Edit src/a.ts" },
      { level: "info", message: "Add src/b.ts" },
      { level: "info", message: "Delete old.ts" },
      { level: "info", message: "Todo: [ ] fix" },
      { level: "info", message: "Todo: [x] fix" },
      { level: "info", message: 'MCP docs.search {"q":"x"}' },
      { level: "error", message: "MCP docs.search failed: offline" },
      { level: "info", message: "Web search: effect docs" },
      { level: "warn", message: "model fell back" },
      { level: "info", message: "First answer" },
      { level: "info", message: "Turn completed (1000 input tokens, 100 output tokens)" },
      { level: "debug", message: "Turn started" },
      { level: "info", message: "Final answer" },
      { level: "info", message: "Turn completed (500 input tokens, 50 output tokens)" }
    ])
  })

  it("accumulates usage over turns and keeps the last agent message", () => {
    const parser = codexParser()
    assert.isNull(parser.usage())
    feed(parser, codexFixture)
    assert.deepStrictEqual(parser.usage(), { input_tokens: 1500, output_tokens: 150, cost_usd: null })
    assert.strictEqual(parser.finalText(), "Final answer")
  })

  it("reports failures and fatal errors at error level", () => {
    const parser = codexParser()
    assert.deepStrictEqual(parser.parseLine(json({ type: "turn.failed", error: { message: "rate limited" } })), [
      { level: "error", message: "Turn failed: rate limited" }
    ])
    assert.deepStrictEqual(parser.parseLine(json({ type: "error", message: "stream disconnected" })), [
      { level: "error", message: "stream disconnected" }
    ])
    const [patch] = parser.parseLine(
      json({
        type: "item.completed",
        item: { id: "p", type: "file_change", changes: [{ path: "a", kind: "add" }], status: "failed" }
      })
    )
    assert.deepStrictEqual(patch, { level: "error", message: "Patch failed: Add a" })
    const [declined] = parser.parseLine(
      json({
        type: "item.completed",
        item: { id: "d", type: "command_execution", command: "rm -rf /", status: "declined" }
      })
    )
    assert.deepStrictEqual(declined, { level: "warn", message: "$ rm -rf / (declined)" })
  })

  it("keeps going past malformed, truncated and unknown lines", () => {
    const parser = codexParser()
    const truncatedLine = codexFixture[5]?.slice(0, 50) ?? ""
    assert.deepStrictEqual(parser.parseLine(truncatedLine), [{ level: "info", message: truncatedLine }])
    assert.strictEqual(parser.parseLine(json({ type: "session.configured", x: 1 }))[0]?.level, "debug")
    assert.strictEqual(parser.parseLine(json({ type: "item.completed" }))[0]?.level, "debug")
    assert.strictEqual(
      parser.parseLine(json({ type: "item.completed", item: { id: "c", type: "collab_tool_call" } }))[0]?.level,
      "debug"
    )
    assert.deepStrictEqual(parser.parseLine(json({ type: "turn.completed", usage: { input_tokens: "many" } })), [
      { level: "info", message: "Turn completed (0 input tokens, 0 output tokens)" }
    ])
    assert.deepStrictEqual(parser.parseLine(json({ type: "item.plan.delta", item_id: "x", delta: "..." })), [])
  })
})

const ts = "2025-11-21T23:43:04.123Z"
const geminiFixture = [
  json({ type: "init", timestamp: ts, session_id: "g-1", model: "gemini-2.5-pro" }),
  json({ type: "message", timestamp: ts, role: "user", content: "Fix the bug" }),
  json({ type: "message", timestamp: ts, role: "assistant", content: "I'll look ", delta: true }),
  json({ type: "message", timestamp: ts, role: "assistant", content: "at the code.", delta: true }),
  json({
    type: "tool_use",
    timestamp: ts,
    tool_name: "run_shell_command",
    tool_id: "t1",
    parameters: { command: "ls" }
  }),
  json({ type: "tool_result", timestamp: ts, tool_id: "t1", status: "success", output: "a.ts" }),
  json({ type: "tool_use", timestamp: ts, tool_name: "replace", tool_id: "t2", parameters: { file_path: "a.ts" } }),
  json({
    type: "tool_result",
    timestamp: ts,
    tool_id: "t2",
    status: "error",
    error: { type: "edit", message: "no match" }
  }),
  json({
    type: "tool_use",
    timestamp: ts,
    tool_name: "read_file",
    tool_id: "t3",
    parameters: { absolute_path: "/w/a.ts" }
  }),
  json({ type: "error", timestamp: ts, severity: "warning", message: "Loop detected" }),
  json({ type: "message", timestamp: ts, role: "assistant", content: "Fixed ", delta: true }),
  json({ type: "message", timestamp: ts, role: "assistant", content: "it.", delta: true }),
  json({
    type: "result",
    timestamp: ts,
    status: "success",
    stats: { total_tokens: 300, input_tokens: 200, output_tokens: 100, duration_ms: 2500, tool_calls: 3 }
  })
]

describe("geminiParser", () => {
  it("turns a stream-json session into readable entries, joining deltas", () => {
    const entries = feed(geminiParser(), geminiFixture)
    assert.deepStrictEqual(entries, [
      { level: "info", message: "Gemini session g-1 started (model gemini-2.5-pro)" },
      { level: "debug", message: "User: Fix the bug" },
      { level: "info", message: "I'll look at the code." },
      { level: "info", message: "$ ls" },
      { level: "info", message: "$ ls: a.ts" },
      { level: "info", message: "Edit a.ts" },
      { level: "error", message: "Edit a.ts failed: no match" },
      { level: "info", message: 'Tool read_file {"absolute_path":"/w/a.ts"}' },
      { level: "warn", message: "Loop detected" },
      { level: "info", message: "Fixed it." },
      { level: "info", message: "Finished: success (300 tokens, 3 tool calls, 2.5 s)" }
    ])
  })

  it("reports stats as usage and the assistant text as final text", () => {
    const parser = geminiParser()
    feed(parser, geminiFixture)
    assert.deepStrictEqual(parser.usage(), { input_tokens: 200, output_tokens: 100, cost_usd: null })
    assert.strictEqual(parser.finalText(), "I'll look at the code.\nFixed it.")
  })

  it("flushes streamed text left over when the stream stops early", () => {
    const parser = geminiParser()
    assert.deepStrictEqual(parser.parseLine(geminiFixture[2] ?? ""), [])
    assert.deepStrictEqual(parser.flush(), [{ level: "info", message: "I'll look " }])
    assert.deepStrictEqual(parser.flush(), [])
    assert.strictEqual(parser.finalText(), "I'll look ")
  })

  it("ends streamed text at a non-JSON line and keeps the line", () => {
    const parser = geminiParser()
    parser.parseLine(geminiFixture[2] ?? "")
    assert.deepStrictEqual(parser.parseLine("Warning: something"), [
      { level: "info", message: "I'll look " },
      { level: "info", message: "Warning: something" }
    ])
  })

  it("reports failed results and fatal errors at error level", () => {
    const parser = geminiParser()
    assert.deepStrictEqual(parser.parseLine(json({ type: "error", severity: "error", message: "quota" })), [
      { level: "error", message: "quota" }
    ])
    const [failed] = parser.parseLine(
      json({
        type: "result",
        status: "error",
        error: { type: "FatalTurnLimitedError", message: "turn limit" },
        stats: { input: 7 }
      })
    )
    assert.deepStrictEqual(failed, { level: "error", message: "Failed: error: turn limit" })
    assert.deepStrictEqual(parser.usage(), { input_tokens: 7, output_tokens: 0, cost_usd: null })
    assert.isNull(parser.finalText())
  })

  it("keeps going past malformed and unknown lines", () => {
    const parser = geminiParser()
    assert.deepStrictEqual(parser.parseLine('{"type":"message","role":"assis'), [
      { level: "info", message: '{"type":"message","role":"assis' }
    ])
    assert.strictEqual(parser.parseLine(json({ type: "thought", timestamp: ts }))[0]?.level, "debug")
  })
})

describe("plainParser", () => {
  it("makes every line an info entry, blank ones included", () => {
    assert.deepStrictEqual(feed(plainParser(), ["hello", "", "ERROR: not inferred", '{"type":"result"}']), [
      { level: "info", message: "hello" },
      { level: "info", message: "" },
      { level: "info", message: "ERROR: not inferred" },
      { level: "info", message: '{"type":"result"}' }
    ])
  })

  it("keeps the tail of the output as final text", () => {
    const parser = plainParser()
    assert.isNull(parser.finalText())
    assert.isNull(parser.usage())
    for (let i = 0; i < 20_000; i++) parser.parseLine(`line ${i} ${"x".repeat(20)}`)
    parser.parseLine('```json\n{"action":"approve"}\n```')
    const text = parser.finalText() ?? ""
    assert.isAtMost(text.length, 64 * 1024 + 1)
    assert.isTrue(text.endsWith('```json\n{"action":"approve"}\n```'))
  })
})

describe("parserFor", () => {
  it("picks the parser by agent", () => {
    const resultLine = json({
      type: "result",
      subtype: "success",
      result: "R",
      usage: { input_tokens: 1, output_tokens: 1 }
    })
    const claude = parserFor("claude-code")
    claude.parseLine(resultLine)
    assert.strictEqual(claude.finalText(), "R")
    const codex = parserFor("codex")
    codex.parseLine(json({ type: "item.completed", item: { id: "x", type: "agent_message", text: "C" } }))
    assert.strictEqual(codex.finalText(), "C")
    const gemini = parserFor("gemini")
    gemini.parseLine(json({ type: "message", role: "assistant", content: "G" }))
    assert.strictEqual(gemini.finalText(), "G")
    assert.deepStrictEqual(parserFor("command").parseLine(resultLine), [{ level: "info", message: resultLine }])
  })

  it("never throws on arbitrary input", () => {
    const samples = [
      "{",
      "}",
      '{"type":',
      '{"type":null}',
      '{"type":"assistant","message":{"content":"text"}}',
      "\u0000\u0001",
      "💥".repeat(3)
    ]
    for (const agent of ["claude-code", "codex", "gemini", "command"] as const) {
      const parser = parserFor(agent)
      for (const line of samples) parser.parseLine(line)
      parser.flush()
    }
  })
})
