/**
 * Parsers that turn one stdout line of a coding-agent CLI into readable log entries.
 *
 * Each built-in agent prints a JSON event stream (Claude `stream-json`, Codex `--json`, Gemini
 * `stream-json`); `command` agents print plain text. A parser is fed one line at a time, never
 * throws, and keeps the token usage and the agent's final answer for the run's output.
 */

/** Level of a log entry, as stored and served by the API. */
export type LogLevel = "debug" | "info" | "warn" | "error"

/** A log entry before it gets an id, a run and a timestamp. */
export interface LogDraft {
  readonly level: LogLevel
  readonly message: string
}

/** Token usage and cost reported by an agent for a whole run. */
export interface Usage {
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cost_usd: number | null
}

/** Agents that have a parser. */
import type { AgentKind } from "@taskwright/domain"

export type { AgentKind }

/** A stateful line parser for one run's stdout. */
export interface StreamParser {
  /** Entries for one stdout line (without its newline). Never throws. */
  parseLine(line: string): ReadonlyArray<LogDraft>
  /** Entries still buffered (Gemini's streamed text); call once when the process has exited. */
  flush(): ReadonlyArray<LogDraft>
  /** Usage reported so far, or null when the agent reported none. */
  usage(): Usage | null
  /** The agent's final answer (used to find a review JSON block), or null. */
  finalText(): string | null
}

/** Longest message an entry carries; longer text is cut with a note of how much was left out. */
export const MAX_MESSAGE_CHARS = 2000

/** How much plain output `plainParser().finalText()` keeps (its tail). */
export const PLAIN_FINAL_TEXT_CHARS = 64 * 1024

// ---------------------------------------------------------------------------------------------
// Small helpers over untyped JSON

type JsonObject = { readonly [key: string]: unknown }

const isObject = (value: unknown): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const str = (obj: JsonObject, key: string): string | undefined => {
  const value = obj[key]
  return typeof value === "string" ? value : undefined
}

const num = (obj: JsonObject, key: string): number | undefined => {
  const value = obj[key]
  return typeof value === "number" && Number.isFinite(value) ? value : undefined
}

const obj = (o: JsonObject, key: string): JsonObject | undefined => {
  const value = o[key]
  return isObject(value) ? value : undefined
}

const arr = (o: JsonObject, key: string): ReadonlyArray<unknown> => {
  const value = o[key]
  return Array.isArray(value) ? value : []
}

/** Cuts text to `max` characters, saying how many were dropped. */
export const truncate = (text: string, max: number = MAX_MESSAGE_CHARS): string =>
  text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more chars)`

const compactJson = (value: unknown): string => {
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

const entry = (level: LogLevel, message: string): LogDraft => ({ level, message: truncate(message) })

const none: ReadonlyArray<LogDraft> = []

type Parsed = { readonly kind: "event"; readonly type: string; readonly event: JsonObject } | { readonly kind: "raw" }

/** A line is an event only when it is a JSON object with a string `type`. */
const parseEvent = (line: string): Parsed => {
  const trimmed = line.trim()
  if (!trimmed.startsWith("{")) return { kind: "raw" }
  let value: unknown
  try {
    value = JSON.parse(trimmed)
  } catch {
    return { kind: "raw" }
  }
  if (!isObject(value)) return { kind: "raw" }
  const type = str(value, "type")
  return type === undefined ? { kind: "raw" } : { kind: "event", type, event: value }
}

/** Non-JSON output of a JSON-streaming CLI (a banner, a truncated line) is kept verbatim. */
const rawLine = (line: string): ReadonlyArray<LogDraft> => (line.trim() === "" ? none : [entry("info", line)])

const unknownEvent = (agent: string, type: string, event: JsonObject): LogDraft =>
  entry("debug", `${agent} event ${type}: ${compactJson(event)}`)

const seconds = (ms: number | undefined): string | null => (ms === undefined ? null : `${(ms / 1000).toFixed(1)} s`)

const joinParts = (parts: ReadonlyArray<string | null>): string => parts.filter((p) => p !== null).join(", ")

interface JsonStreamHandlers extends Pick<StreamParser, "usage" | "finalText" | "flush"> {
  readonly onEvent: (type: string, event: JsonObject) => ReadonlyArray<LogDraft>
  /** Entries to emit before a non-event line (Gemini ends its buffered text there). */
  readonly beforeRaw?: () => ReadonlyArray<LogDraft>
}

/** A JSON-stream parser shares the line-level error handling; only the event mapping differs. */
const jsonStreamParser = ({ onEvent, beforeRaw, ...state }: JsonStreamHandlers): StreamParser => ({
  parseLine: (line) => {
    const parsed = parseEvent(line)
    if (parsed.kind === "raw") {
      const drafts = rawLine(line)
      return drafts.length === 0 || beforeRaw === undefined ? drafts : [...beforeRaw(), ...drafts]
    }
    try {
      return onEvent(parsed.type, parsed.event)
    } catch (error) {
      // A shape we did not anticipate must never stop the run's logging.
      return [entry("debug", `unparsed event (${String(error)}): ${line}`)]
    }
  },
  ...state
})

// ---------------------------------------------------------------------------------------------
// Claude Code: `claude -p --output-format stream-json --verbose`

const claudeToolSummary = (name: string, input: unknown): string => {
  const fields = isObject(input) ? input : {}
  const file = str(fields, "file_path") ?? str(fields, "notebook_path")
  const command = str(fields, "command")
  if (name === "Bash" && command !== undefined) return `$ ${command}`
  if ((name === "Edit" || name === "MultiEdit" || name === "Write" || name === "NotebookEdit") && file !== undefined) {
    return `${name} ${file}`
  }
  return `Tool ${name} ${compactJson(input)}`
}

/** Tool results carry a string or a list of content blocks (text, images). */
const toolResultText = (content: unknown): string => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return content === undefined ? "" : compactJson(content)
  return content
    .map((block) => {
      if (!isObject(block)) return compactJson(block)
      const text = str(block, "text")
      return text ?? `[${str(block, "type") ?? "content"}]`
    })
    .join("\n")
}

/** Parser for Claude Code's `stream-json` output. */
export const claudeParser = (): StreamParser => {
  const tools = new Map<string, string>()
  let usage: Usage | null = null
  let result: string | null = null
  let lastText: string | null = null

  const contentItem = (role: "assistant" | "user", item: unknown): LogDraft | null => {
    if (!isObject(item)) return null
    switch (str(item, "type")) {
      case "text": {
        const text = str(item, "text") ?? ""
        if (text.trim() === "") return null
        if (role === "assistant") lastText = text
        return entry("info", role === "user" ? `User: ${text}` : text)
      }
      case "thinking": {
        const text = str(item, "thinking") ?? ""
        return text.trim() === "" ? null : entry("debug", `Thinking: ${text}`)
      }
      case "tool_use": {
        const name = str(item, "name") ?? "unknown"
        const summary = claudeToolSummary(name, item.input)
        const id = str(item, "id")
        if (id !== undefined) tools.set(id, summary)
        return entry("info", summary)
      }
      case "tool_result": {
        const id = str(item, "tool_use_id")
        const summary = (id === undefined ? undefined : tools.get(id)) ?? "Tool"
        if (id !== undefined) tools.delete(id)
        const text = toolResultText(item.content).trim()
        if (item.is_error === true) return entry("error", `${summary} failed: ${text}`)
        return entry("info", text === "" ? `${summary}: done` : `${summary}: ${text}`)
      }
      default:
        return entry("debug", `${role} content ${compactJson(item)}`)
    }
  }

  const message = (role: "assistant" | "user", event: JsonObject): ReadonlyArray<LogDraft> => {
    const msg = obj(event, "message")
    if (msg === undefined) return none
    const content = msg.content
    if (typeof content === "string") {
      const drafted = contentItem(role, { type: "text", text: content })
      return drafted === null ? none : [drafted]
    }
    const out: Array<LogDraft> = []
    for (const item of arr(msg, "content")) {
      const drafted = contentItem(role, item)
      if (drafted !== null) out.push(drafted)
    }
    return out
  }

  const onResult = (event: JsonObject): ReadonlyArray<LogDraft> => {
    const text = str(event, "result")
    if (text !== undefined) result = text
    const u = obj(event, "usage")
    const cost = num(event, "total_cost_usd") ?? null
    if (u !== undefined || cost !== null) {
      // Claude reports cached input apart from `input_tokens`; all of it was input the model read.
      const input =
        (u === undefined ? 0 : (num(u, "input_tokens") ?? 0)) +
        (u === undefined ? 0 : (num(u, "cache_creation_input_tokens") ?? 0)) +
        (u === undefined ? 0 : (num(u, "cache_read_input_tokens") ?? 0))
      usage = {
        input_tokens: input,
        output_tokens: u === undefined ? 0 : (num(u, "output_tokens") ?? 0),
        cost_usd: cost
      }
    }
    const subtype = str(event, "subtype") ?? "unknown"
    const turns = num(event, "num_turns")
    const details = joinParts([
      turns === undefined ? null : `${turns} turns`,
      seconds(num(event, "duration_ms")),
      cost === null ? null : `$${cost.toFixed(4)}`
    ])
    const failed = event.is_error === true || subtype !== "success"
    if (!failed) return [entry("info", `Finished: ${subtype}${details === "" ? "" : ` (${details})`}`)]
    const reason = text !== undefined && text.trim() !== "" ? `: ${text}` : ""
    return [entry("error", `Failed: ${subtype}${details === "" ? "" : ` (${details})`}${reason}`)]
  }

  const onEvent = (type: string, event: JsonObject): ReadonlyArray<LogDraft> => {
    switch (type) {
      case "system": {
        const subtype = str(event, "subtype") ?? "event"
        if (subtype !== "init") return [entry("debug", `System ${subtype}`)]
        const details = joinParts([
          str(event, "model") === undefined ? null : `model ${str(event, "model")}`,
          str(event, "cwd") === undefined ? null : `cwd ${str(event, "cwd")}`
        ])
        return [
          entry(
            "info",
            `Claude session ${str(event, "session_id") ?? ""} started${details === "" ? "" : ` (${details})`}`
          )
        ]
      }
      case "assistant":
        return message("assistant", event)
      case "user":
        return message("user", event)
      case "stream_event":
        return none // partial deltas; the complete message follows as an `assistant` event
      case "result":
        return onResult(event)
      default:
        return [unknownEvent("Claude", type, event)]
    }
  }

  return jsonStreamParser({
    onEvent,
    flush: () => none,
    usage: () => usage,
    finalText: () => result ?? lastText
  })
}

// ---------------------------------------------------------------------------------------------
// Codex CLI: `codex exec --json`

const codexChangeVerb: Record<string, string> = { add: "Add", delete: "Delete", update: "Edit" }

const tail = (text: string, max: number): string => (text.length <= max ? text : `…${text.slice(text.length - max)}`)

/** Parser for Codex's `exec --json` output. */
export const codexParser = (): StreamParser => {
  // Items are re-sent as they progress; an unchanged rendering is not logged twice.
  const lastRendered = new Map<string, string>()
  let input = 0
  let output = 0
  let sawUsage = false
  let lastMessage: string | null = null

  const commandItem = (phase: string, item: JsonObject): ReadonlyArray<LogDraft> => {
    const command = `$ ${str(item, "command") ?? ""}`
    if (phase === "started") return [entry("debug", `${command} (running)`)]
    if (phase !== "completed") return none
    const status = str(item, "status")
    const exitCode = num(item, "exit_code")
    if (status === "declined") return [entry("warn", `${command} (declined)`)]
    const failed = status === "failed" || (exitCode !== undefined && exitCode !== 0)
    const label = `${command} (${exitCode === undefined ? (status ?? "done") : `exit ${exitCode}`})`
    if (!failed) return [entry("info", label)]
    const out = (str(item, "aggregated_output") ?? "").trimEnd()
    return [entry("error", out === "" ? label : `${label}\n${tail(out, 500)}`)]
  }

  const fileChangeItem = (phase: string, item: JsonObject): ReadonlyArray<LogDraft> => {
    if (phase !== "completed") return none
    const changes = arr(item, "changes")
      .filter(isObject)
      .map((change) => `${codexChangeVerb[str(change, "kind") ?? ""] ?? "Change"} ${str(change, "path") ?? "?"}`)
    if (str(item, "status") === "failed") return [entry("error", `Patch failed: ${changes.join(", ")}`)]
    return changes.map((change) => entry("info", change))
  }

  const mcpItem = (phase: string, item: JsonObject): ReadonlyArray<LogDraft> => {
    const name = `MCP ${str(item, "server") ?? "?"}.${str(item, "tool") ?? "?"}`
    if (phase === "started") return [entry("info", `${name} ${compactJson(item.arguments ?? {})}`)]
    if (phase !== "completed") return none
    const error = obj(item, "error")
    if (str(item, "status") === "failed" || error !== undefined) {
      return [entry("error", `${name} failed: ${error === undefined ? "" : (str(error, "message") ?? "")}`)]
    }
    return [entry("debug", `${name} completed`)]
  }

  const todoItem = (item: JsonObject): ReadonlyArray<LogDraft> => {
    const items = arr(item, "items")
      .filter(isObject)
      .map((todo) => `[${todo.completed === true ? "x" : " "}] ${str(todo, "text") ?? ""}`)
    return [entry("info", `Todo: ${items.join(" · ")}`)]
  }

  const renderItem = (phase: string, item: JsonObject): ReadonlyArray<LogDraft> => {
    const type = str(item, "type") ?? "unknown"
    switch (type) {
      case "agent_message": {
        if (phase !== "completed") return none
        const text = str(item, "text") ?? ""
        lastMessage = text
        return text.trim() === "" ? none : [entry("info", text)]
      }
      case "reasoning": {
        const text = str(item, "text") ?? ""
        return phase === "completed" && text.trim() !== "" ? [entry("debug", `Thinking: ${text}`)] : none
      }
      case "plan": {
        const text = str(item, "text") ?? ""
        return phase === "completed" && text.trim() !== "" ? [entry("info", `Plan: ${text}`)] : none
      }
      case "command_execution":
        return commandItem(phase, item)
      case "file_change":
        return fileChangeItem(phase, item)
      case "mcp_tool_call":
        return mcpItem(phase, item)
      case "web_search":
        return [entry("info", `Web search: ${str(item, "query") ?? ""}`)]
      case "todo_list":
        return todoItem(item)
      case "error":
        // Codex documents error items as non-fatal; fatal ones arrive as `error` / `turn.failed`.
        return [entry("warn", str(item, "message") ?? compactJson(item))]
      default:
        return phase === "completed" ? [entry("debug", `Codex item ${type}: ${compactJson(item)}`)] : none
    }
  }

  const onItem = (phase: string, event: JsonObject): ReadonlyArray<LogDraft> => {
    const item = obj(event, "item")
    if (item === undefined) return [unknownEvent("Codex", `item.${phase}`, event)]
    const drafts = renderItem(phase, item)
    const id = str(item, "id")
    if (id === undefined) return drafts
    const rendered = drafts.map((d) => `${d.level}:${d.message}`).join("\n")
    const previous = lastRendered.get(id)
    if (phase === "completed") lastRendered.delete(id)
    else lastRendered.set(id, rendered)
    return previous === rendered ? none : drafts
  }

  const onTurnCompleted = (event: JsonObject): ReadonlyArray<LogDraft> => {
    const u = obj(event, "usage")
    if (u === undefined) return [entry("info", "Turn completed")]
    // `input_tokens` already includes `cached_input_tokens` in OpenAI's accounting.
    const turnInput = num(u, "input_tokens") ?? 0
    const turnOutput = num(u, "output_tokens") ?? 0
    input += turnInput
    output += turnOutput
    sawUsage = true
    return [entry("info", `Turn completed (${turnInput} input tokens, ${turnOutput} output tokens)`)]
  }

  const errorMessage = (event: JsonObject): string => {
    const error = obj(event, "error")
    return str(event, "message") ?? (error === undefined ? undefined : str(error, "message")) ?? compactJson(event)
  }

  const onEvent = (type: string, event: JsonObject): ReadonlyArray<LogDraft> => {
    switch (type) {
      case "thread.started":
        return [entry("info", `Codex thread ${str(event, "thread_id") ?? ""} started`)]
      case "turn.started":
        return [entry("debug", "Turn started")]
      case "turn.completed":
        return onTurnCompleted(event)
      case "turn.failed":
        return [entry("error", `Turn failed: ${errorMessage(event)}`)]
      case "error":
        return [entry("error", errorMessage(event))]
      case "item.started":
        return onItem("started", event)
      case "item.updated":
        return onItem("updated", event)
      case "item.completed":
        return onItem("completed", event)
      case "item.plan.delta":
        return none // the completed plan item carries the whole text
      default:
        return [unknownEvent("Codex", type, event)]
    }
  }

  return jsonStreamParser({
    onEvent,
    flush: () => none,
    usage: () => (sawUsage ? { input_tokens: input, output_tokens: output, cost_usd: null } : null),
    finalText: () => lastMessage
  })
}

// ---------------------------------------------------------------------------------------------
// Gemini CLI: `gemini -p ... --output-format stream-json`

const geminiToolSummary = (name: string, params: unknown): string => {
  const fields = isObject(params) ? params : {}
  const file = str(fields, "file_path") ?? str(fields, "absolute_path") ?? str(fields, "path")
  const command = str(fields, "command")
  if (name === "run_shell_command" && command !== undefined) return `$ ${command}`
  if (name === "write_file" && file !== undefined) return `Write ${file}`
  if (name === "replace" && file !== undefined) return `Edit ${file}`
  return `Tool ${name} ${compactJson(params ?? {})}`
}

/** Parser for Gemini CLI's `stream-json` output. */
export const geminiParser = (): StreamParser => {
  const tools = new Map<string, string>()
  // Assistant text arrives in deltas: buffered into one entry, and kept per turn for finalText.
  let pending = ""
  const segments: Array<string> = []
  let segmentOpen = false
  let usage: Usage | null = null

  const flushPending = (): ReadonlyArray<LogDraft> => {
    const text = pending
    pending = ""
    return text.trim() === "" ? none : [entry("info", text)]
  }

  const closeSegment = (): void => {
    segmentOpen = false
  }

  const appendAssistant = (content: string): void => {
    if (segmentOpen && segments.length > 0) segments[segments.length - 1] += content
    else segments.push(content)
    segmentOpen = true
  }

  const onMessage = (event: JsonObject): ReadonlyArray<LogDraft> => {
    const content = str(event, "content") ?? ""
    if (str(event, "role") !== "assistant") {
      closeSegment()
      return [...flushPending(), ...(content.trim() === "" ? none : [entry("debug", `User: ${content}`)])]
    }
    appendAssistant(content)
    if (event.delta === true) {
      pending += content
      return pending.length >= MAX_MESSAGE_CHARS ? flushPending() : none
    }
    return [...flushPending(), ...(content.trim() === "" ? none : [entry("info", content)])]
  }

  const onToolResult = (event: JsonObject): ReadonlyArray<LogDraft> => {
    const id = str(event, "tool_id")
    const summary = (id === undefined ? undefined : tools.get(id)) ?? "Tool"
    if (id !== undefined) tools.delete(id)
    if (str(event, "status") === "error") {
      const error = obj(event, "error")
      const message = (error === undefined ? undefined : str(error, "message")) ?? str(event, "error") ?? ""
      return [entry("error", `${summary} failed: ${message}`)]
    }
    const output = (str(event, "output") ?? "").trim()
    return [entry("info", output === "" ? `${summary}: done` : `${summary}: ${output}`)]
  }

  const onResult = (event: JsonObject): ReadonlyArray<LogDraft> => {
    const stats = obj(event, "stats")
    if (stats !== undefined) {
      usage = {
        input_tokens: num(stats, "input_tokens") ?? num(stats, "input") ?? 0,
        output_tokens: num(stats, "output_tokens") ?? 0,
        cost_usd: null
      }
    }
    const details =
      stats === undefined
        ? ""
        : joinParts([
            num(stats, "total_tokens") === undefined ? null : `${num(stats, "total_tokens")} tokens`,
            num(stats, "tool_calls") === undefined ? null : `${num(stats, "tool_calls")} tool calls`,
            seconds(num(stats, "duration_ms"))
          ])
    const status = str(event, "status") ?? "unknown"
    const suffix = details === "" ? "" : ` (${details})`
    if (status === "success") return [entry("info", `Finished: success${suffix}`)]
    const error = obj(event, "error")
    const message = (error === undefined ? undefined : str(error, "message")) ?? str(event, "error") ?? ""
    return [entry("error", `Failed: ${status}${suffix}${message === "" ? "" : `: ${message}`}`)]
  }

  const onOther = (type: string, event: JsonObject): ReadonlyArray<LogDraft> => {
    switch (type) {
      case "init": {
        const model = str(event, "model")
        return [
          entry(
            "info",
            `Gemini session ${str(event, "session_id") ?? ""} started${model === undefined ? "" : ` (model ${model})`}`
          )
        ]
      }
      case "tool_use": {
        const summary = geminiToolSummary(str(event, "tool_name") ?? "unknown", event.parameters)
        const id = str(event, "tool_id")
        if (id !== undefined) tools.set(id, summary)
        return [entry("info", summary)]
      }
      case "tool_result":
        return onToolResult(event)
      case "error": {
        const level: LogLevel = str(event, "severity") === "warning" ? "warn" : "error"
        return [entry(level, str(event, "message") ?? compactJson(event))]
      }
      case "result":
        return onResult(event)
      default:
        return [unknownEvent("Gemini", type, event)]
    }
  }

  const onEvent = (type: string, event: JsonObject): ReadonlyArray<LogDraft> => {
    if (type === "message") return onMessage(event)
    closeSegment()
    return [...flushPending(), ...onOther(type, event)]
  }

  return jsonStreamParser({
    onEvent,
    // A stray non-JSON line ends the current block of streamed text, like any other event.
    beforeRaw: flushPending,
    flush: flushPending,
    usage: () => usage,
    finalText: () => (segments.length === 0 ? null : segments.join("\n"))
  })
}

// ---------------------------------------------------------------------------------------------
// Plain text (`command` agents)

/**
 * Parser for agents without an event stream: every stdout line is one `info` entry (stderr is
 * the caller's business). `finalText()` is the tail of stdout, where a review block would be.
 */
export const plainParser = (): StreamParser => {
  // Appending and trimming a string now and then keeps this O(1) per line on long outputs.
  let kept = ""
  let seen = false
  return {
    parseLine: (line) => {
      seen = true
      kept += `${line}\n`
      if (kept.length > 2 * PLAIN_FINAL_TEXT_CHARS) kept = kept.slice(kept.length - PLAIN_FINAL_TEXT_CHARS)
      return [entry("info", line)]
    },
    flush: () => none,
    usage: () => null,
    finalText: () => (seen ? tail(kept.slice(0, -1), PLAIN_FINAL_TEXT_CHARS) : null)
  }
}

/** The parser for an agent's stdout. */
export const parserFor = (agent: AgentKind): StreamParser => {
  switch (agent) {
    case "claude-code":
      return claudeParser()
    case "codex":
      return codexParser()
    case "gemini":
      return geminiParser()
    case "command":
      return plainParser()
  }
}
