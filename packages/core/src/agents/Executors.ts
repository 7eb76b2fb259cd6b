/**
 * How each kind of agent is launched headless: one {@link AgentExecutor} per kind, turning the
 * agent's settings, the run's autonomy and the prompt into an argument vector, the prompt's way
 * in (stdin, an argument) and the parser of its output. The facts behind each command line are
 * in `agent-clis.md`; the supervisor (`runs/Runs.ts`) does the rest the same way for all.
 */
import { type AgentKind, type AgentSettings, type Autonomy, DEFAULT_MODEL } from "@taskwright/domain"
import { parserFor, type StreamParser } from "./AgentStreams.js"

/** What the executor is asked to launch. */
export interface LaunchInput {
  readonly settings: AgentSettings
  readonly autonomy: Autonomy
  readonly prompt: string
}

/** A process to start: `argv[0]` is the program. */
export interface Launch {
  readonly argv: ReadonlyArray<string>
  /** Written to stdin (then closed); null leaves stdin empty. */
  readonly stdin: string | null
  /** Variables this kind of agent adds to the run's environment. */
  readonly env: Readonly<Record<string, string>>
}

/** One kind of coding agent. */
export interface AgentExecutor {
  readonly kind: AgentKind
  /** The program run when the agent's settings name no `command`. */
  readonly program: string | null
  readonly launch: (input: LaunchInput) => Launch
  /** A fresh parser for one run's stdout. */
  readonly parser: () => StreamParser
}

/** Prompts up to this many UTF-8 bytes may travel as an argument (Linux caps one at 128 KiB). */
export const MAX_PROMPT_ARG_BYTES = 96 * 1024

const base = (settings: AgentSettings, program: string): ReadonlyArray<string> => settings.command ?? [program]

const modelArgs = (flag: string, model: string): ReadonlyArray<string> => (model === DEFAULT_MODEL ? [] : [flag, model])

const claudePermissionMode: Record<Autonomy, string> = {
  "read-only": "plan",
  "workspace-write": "acceptEdits",
  "danger-full-access": "bypassPermissions"
}

const geminiApprovalMode: Record<Autonomy, string> = {
  "read-only": "plan",
  "workspace-write": "auto_edit",
  "danger-full-access": "yolo"
}

/** Claude Code: `claude -p --output-format stream-json --verbose`, the prompt on stdin. */
export const claudeCodeExecutor: AgentExecutor = {
  kind: "claude-code",
  program: "claude",
  launch: ({ settings, autonomy, prompt }) => ({
    argv: [
      ...base(settings, "claude"),
      "-p",
      "--output-format",
      "stream-json",
      "--verbose",
      ...modelArgs("--model", settings.model),
      "--permission-mode",
      claudePermissionMode[autonomy]
    ],
    stdin: prompt,
    env: {}
  }),
  parser: () => parserFor("claude-code")
}

/** Codex: `codex exec --json --sandbox <autonomy> -`, the prompt on stdin. */
export const codexExecutor: AgentExecutor = {
  kind: "codex",
  program: "codex",
  launch: ({ settings, autonomy, prompt }) => ({
    argv: [
      ...base(settings, "codex"),
      "exec",
      "--json",
      "--sandbox",
      autonomy,
      ...modelArgs("--model", settings.model),
      "-"
    ],
    stdin: prompt,
    env: {}
  }),
  parser: () => parserFor("codex")
}

/**
 * Gemini: `gemini -p <prompt> --output-format stream-json --approval-mode <mode>`. Gemini appends
 * `-p` to whatever arrives on stdin, so stdin stays empty; a prompt too long for an argument
 * goes on stdin instead, with a short `-p` pointing at it.
 */
export const geminiExecutor: AgentExecutor = {
  kind: "gemini",
  program: "gemini",
  launch: ({ settings, autonomy, prompt }) => {
    const fits = Buffer.byteLength(prompt, "utf8") <= MAX_PROMPT_ARG_BYTES
    return {
      argv: [
        ...base(settings, "gemini"),
        "-p",
        fits ? prompt : "Carry out the task described above.",
        "--output-format",
        "stream-json",
        "--approval-mode",
        geminiApprovalMode[autonomy],
        ...modelArgs("--model", settings.model)
      ],
      stdin: fits ? null : prompt,
      env: {}
    }
  },
  parser: () => parserFor("gemini")
}

/**
 * Any configured command line, run as given: the prompt on stdin (and in `TASKWRIGHT_PROMPT`,
 * set for every agent), the model and autonomy in `TASKWRIGHT_MODEL` / `TASKWRIGHT_AUTONOMY`.
 */
export const commandExecutor: AgentExecutor = {
  kind: "command",
  program: null,
  launch: ({ settings, autonomy, prompt }) => ({
    argv: settings.command ?? [],
    stdin: prompt,
    env: { TASKWRIGHT_MODEL: settings.model, TASKWRIGHT_AUTONOMY: autonomy }
  }),
  parser: () => parserFor("command")
}

/** The executor of each kind. */
export const executorFor = (kind: AgentKind): AgentExecutor => {
  switch (kind) {
    case "claude-code":
      return claudeCodeExecutor
    case "codex":
      return codexExecutor
    case "gemini":
      return geminiExecutor
    case "command":
      return commandExecutor
  }
}
