/**
 * The scripted agent: a deterministic stand-in for a coding-agent CLI, for tests of runs.
 *
 * The runnable program is `bin/scripted-agent.mjs` (plain JavaScript, no build). It reads a JSON
 * script (an array of steps, or `{ "steps": [...] }`) from the file named by its first argument,
 * or else from `TASKWRIGHT_SCRIPT`, and runs the steps in order. See README-scripted-agent.md.
 */
import { writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

/** Output pipe a step writes to (stdout when omitted). */
export type ScriptStream = "stdout" | "stderr"

/** One step of a script; see the README for what each does. */
export type ScriptStep =
  | { readonly write: string; readonly content: string }
  | { readonly append: string; readonly content: string }
  | { readonly delete: string }
  | { readonly stdout: string }
  | { readonly stderr: string }
  | { readonly raw: string; readonly stream?: ScriptStream; readonly encoding?: "utf8" | "base64" }
  | { readonly lines: number; readonly stream?: ScriptStream; readonly prefix?: string }
  | { readonly claude_stream: true; readonly result?: string }
  | { readonly codex_stream: true; readonly result?: string }
  | { readonly gemini_stream: true; readonly result?: string }
  | { readonly sleep_ms: number }
  | { readonly spawn_child_sleep_ms: number; readonly ignore_sigterm?: boolean; readonly tag?: string }
  | { readonly trap_sigterm: true }
  | { readonly print_env: true }
  | { readonly echo_prompt: true }
  | { readonly print_argv: true }
  | { readonly exit: number }

/** A whole script. */
export type Script = ReadonlyArray<ScriptStep>

/** Absolute path of the runnable scripted agent (resolves from `src/` and from `dist/`). */
export const scriptedAgentPath: string = fileURLToPath(new URL("../bin/scripted-agent.mjs", import.meta.url))

/** The variable the agent reads its script from when it gets no file argument. */
export const SCRIPT_ENV = "TASKWRIGHT_SCRIPT"

/** Argument vector running the agent with the current Node binary (script from the environment). */
export const scriptedAgentArgv = (): ReadonlyArray<string> => [process.execPath, scriptedAgentPath]

/** Environment entry carrying `script`, to merge into the agent's configured `env`. */
export const scriptEnv = (script: Script): Record<string, string> => ({ [SCRIPT_ENV]: JSON.stringify(script) })

/**
 * Writes `script` to `file` and returns the argument vector that runs it from there: the form to
 * put in an agent's configured `command` when its environment is not under the test's control.
 */
export const writeScript = (file: string, script: Script): ReadonlyArray<string> => {
  writeFileSync(file, JSON.stringify(script))
  return [process.execPath, scriptedAgentPath, file]
}
