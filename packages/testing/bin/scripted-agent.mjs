#!/usr/bin/env node
// Taskwright's scripted agent: a deterministic stand-in for a coding-agent CLI in tests.
//
// Script: a JSON array of steps (or an object `{ "steps": [...] }`), read from the file named by
// the first argument when that is an existing file (standing in for a CLI, the agent is also
// given that CLI's own arguments: `exec`, `-p`, ...), or else from the environment variable
// TASKWRIGHT_SCRIPT. Steps run in order:
//
//   { "write": "path", "content": "..." }        create/overwrite a file (parent dirs created)
//   { "append": "path", "content": "..." }       append to a file
//   { "delete": "path" }                          remove a file or directory (no error if missing)
//   { "stdout": "line" } / { "stderr": "line" }   print one line
//   { "raw": "text", "stream"?: "stdout"|"stderr", "encoding"?: "utf8"|"base64" }
//                                                 write bytes exactly, no newline added
//   { "lines": 100000, "stream"?: "stdout", "prefix"?: "line" }
//                                                 print "<prefix> 1" ... "<prefix> N", fast
//   { "claude_stream": true, "result"?: "..." }   a short Claude `stream-json` session with usage
//   { "codex_stream": true, "result"?: "..." }    a short Codex `exec --json` session with usage
//   { "gemini_stream": true, "result"?: "..." }   a short Gemini `stream-json` session with stats
//   { "sleep_ms": 100 }                           wait
//   { "spawn_child_sleep_ms": 60000, "ignore_sigterm"?: true, "tag"?: "x" }
//                                                 start a grandchild in the same process group that
//                                                 sleeps (sharing stdout/stderr); prints "child-pid <n>"
//                                                 (the pid in its PID namespace); `tag` is put on its
//                                                 command line for the host to find it by
//   { "trap_sigterm": true }                      ignore SIGTERM from now on (prints "sigterm ignored")
//   { "print_env": true }                         print "env KEY=value" for every variable, sorted
//   { "echo_prompt": true }                       print `stdin <json>` and `TASKWRIGHT_PROMPT <json>`
//   { "print_argv": true }                        print `argv <json>`: the arguments after the script
//   { "exit": 3 }                                 stop here and exit with that code
//
// Paths are relative to the working directory and may not leave it. Without an `exit` step the
// agent exits 0. A bad script prints "scripted-agent: <reason>" on stderr and exits 2.
import { spawn } from "node:child_process"
import { appendFileSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { dirname, isAbsolute, relative, resolve } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"

class ScriptError extends Error {}

/** The first argument, when it names a script file rather than being a stood-in CLI's own argument. */
const scriptFile = () => {
  const first = process.argv[2]
  if (first === undefined || first.startsWith("-")) return undefined
  try {
    return statSync(first).isFile() ? first : undefined
  } catch {
    return undefined
  }
}

const loadScript = () => {
  const file = scriptFile()
  const text = file !== undefined ? readFileSync(file, "utf8") : process.env.TASKWRIGHT_SCRIPT
  if (text === undefined) throw new ScriptError("no script: pass a file as the first argument or set TASKWRIGHT_SCRIPT")
  const parsed = JSON.parse(text)
  const steps = Array.isArray(parsed) ? parsed : parsed?.steps
  if (!Array.isArray(steps)) throw new ScriptError('the script must be an array of steps or { "steps": [...] }')
  return steps
}

const insideCwd = (path) => {
  if (typeof path !== "string" || path === "") throw new ScriptError(`bad path ${JSON.stringify(path)}`)
  const full = resolve(process.cwd(), path)
  const rel = relative(process.cwd(), full)
  if (rel.startsWith("..") || isAbsolute(rel)) throw new ScriptError(`path leaves the working directory: ${path}`)
  return full
}

// A reader that went away (EPIPE) ends the agent the way SIGPIPE ends a shell tool.
for (const stream of [process.stdout, process.stderr]) stream.on("error", () => process.exit(141))

const out = (stream) => (stream === "stderr" ? process.stderr : process.stdout)

/** Writes and waits for the pipe to drain, so large outputs keep their order and memory stays flat. */
const write = (stream, data) =>
  new Promise((done) => {
    if (out(stream).write(data)) done()
    else out(stream).once("drain", done)
  })

const printLines = async (count, stream, prefix) => {
  const batch = 2000
  for (let first = 1; first <= count; first += batch) {
    let chunk = ""
    const last = Math.min(count, first + batch - 1)
    for (let i = first; i <= last; i++) chunk += `${prefix} ${i}\n`
    await write(stream, chunk)
  }
}

const emitJson = async (events) => {
  for (const event of events) await write("stdout", `${JSON.stringify(event)}\n`)
}

const claudeStream = (result) => [
  {
    type: "system",
    subtype: "init",
    session_id: "sess-scripted",
    cwd: process.cwd(),
    model: "claude-scripted",
    tools: ["Edit", "Bash"]
  },
  {
    type: "assistant",
    message: { role: "assistant", content: [{ type: "thinking", thinking: "Planning the change." }] }
  },
  { type: "assistant", message: { role: "assistant", content: [{ type: "text", text: "I will edit the file." }] } },
  {
    type: "assistant",
    message: {
      role: "assistant",
      content: [
        {
          type: "tool_use",
          id: "toolu_1",
          name: "Edit",
          input: { file_path: "src/app.ts", old_string: "a", new_string: "b" }
        }
      ]
    }
  },
  {
    type: "user",
    message: {
      role: "user",
      content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "File updated", is_error: false }]
    }
  },
  {
    type: "assistant",
    message: {
      role: "assistant",
      content: [{ type: "tool_use", id: "toolu_2", name: "Bash", input: { command: "npm test" } }]
    }
  },
  {
    type: "user",
    message: {
      role: "user",
      content: [{ type: "tool_result", tool_use_id: "toolu_2", content: "1 failing", is_error: true }]
    }
  },
  { type: "assistant", message: { role: "assistant", content: [{ type: "text", text: result }] } },
  {
    type: "result",
    subtype: "success",
    is_error: false,
    duration_ms: 4200,
    num_turns: 3,
    result,
    session_id: "sess-scripted",
    usage: { input_tokens: 1000, cache_creation_input_tokens: 200, cache_read_input_tokens: 300, output_tokens: 150 },
    total_cost_usd: 0.0125
  }
]

const codexStream = (result) => [
  { type: "thread.started", thread_id: "thread-scripted" },
  { type: "turn.started" },
  { type: "item.completed", item: { id: "item_0", type: "reasoning", text: "Looking at the tests." } },
  {
    type: "item.started",
    item: {
      id: "item_1",
      type: "command_execution",
      command: "bash -lc 'npm test'",
      aggregated_output: "",
      exit_code: null,
      status: "in_progress"
    }
  },
  {
    type: "item.completed",
    item: {
      id: "item_1",
      type: "command_execution",
      command: "bash -lc 'npm test'",
      aggregated_output: "ok\n",
      exit_code: 0,
      status: "completed"
    }
  },
  {
    type: "item.completed",
    item: {
      id: "item_2",
      type: "file_change",
      changes: [
        { path: "src/app.ts", kind: "update" },
        { path: "src/new.ts", kind: "add" }
      ],
      status: "completed"
    }
  },
  { type: "item.completed", item: { id: "item_3", type: "agent_message", text: result } },
  { type: "turn.completed", usage: { input_tokens: 2400, cached_input_tokens: 1200, output_tokens: 320 } }
]

const geminiStream = (result) => {
  const timestamp = new Date(0).toISOString()
  const half = Math.ceil(result.length / 2)
  return [
    { type: "init", timestamp, session_id: "gem-scripted", model: "gemini-scripted" },
    { type: "message", timestamp, role: "user", content: "the prompt" },
    {
      type: "tool_use",
      timestamp,
      tool_name: "write_file",
      tool_id: "t1",
      parameters: { file_path: "src/app.ts", content: "x" }
    },
    { type: "tool_result", timestamp, tool_id: "t1", status: "success", output: "" },
    { type: "message", timestamp, role: "assistant", content: result.slice(0, half), delta: true },
    { type: "message", timestamp, role: "assistant", content: result.slice(half), delta: true },
    {
      type: "result",
      timestamp,
      status: "success",
      stats: { total_tokens: 900, input_tokens: 700, output_tokens: 200, duration_ms: 1500, tool_calls: 1 }
    }
  ]
}

let stdinText = null
const readStdin = async () => {
  if (stdinText !== null) return stdinText
  const chunks = []
  // A terminal is not a prompt: don't wait for someone to type.
  if (!process.stdin.isTTY) for await (const chunk of process.stdin) chunks.push(chunk)
  stdinText = Buffer.concat(chunks).toString("utf8")
  return stdinText
}

const spawnSleeper = (ms, ignoreSigterm, tag) => {
  const code = `${ignoreSigterm ? "process.on('SIGTERM', () => {});" : ""}setTimeout(() => {}, ${Number(ms)})`
  // Same process group and same pipes as the agent, like a dev server an agent leaves running.
  // The tag is an argument the host can find in /proc/<pid>/cmdline: in a sandbox's PID
  // namespace the pid the agent sees is not the host's.
  const args = ["-e", code, ...(typeof tag === "string" ? [tag] : [])]
  const child = spawn(process.execPath, args, { stdio: ["ignore", "inherit", "inherit"] })
  child.unref()
  return child.pid
}

const printEnv = async () => {
  const lines = Object.keys(process.env)
    .sort()
    .map((key) => `env ${key}=${String(process.env[key]).replace(/\n/g, "\\n")}\n`)
  await write("stdout", lines.join(""))
}

/** Runs one step; returns an exit code to stop the script, or undefined to go on. */
const runStep = async (step) => {
  if (typeof step !== "object" || step === null) throw new ScriptError(`bad step ${JSON.stringify(step)}`)
  if ("write" in step) {
    const path = insideCwd(step.write)
    mkdirSync(dirname(path), { recursive: true })
    writeFileSync(path, String(step.content ?? ""))
  } else if ("append" in step) {
    const path = insideCwd(step.append)
    mkdirSync(dirname(path), { recursive: true })
    appendFileSync(path, String(step.content ?? ""))
  } else if ("delete" in step) rmSync(insideCwd(step.delete), { recursive: true, force: true })
  else if ("stdout" in step) await write("stdout", `${step.stdout}\n`)
  else if ("stderr" in step) await write("stderr", `${step.stderr}\n`)
  else if ("raw" in step) await write(step.stream ?? "stdout", Buffer.from(String(step.raw), step.encoding ?? "utf8"))
  else if ("lines" in step) await printLines(Number(step.lines), step.stream ?? "stdout", step.prefix ?? "line")
  else if ("claude_stream" in step) await emitJson(claudeStream(step.result ?? "All done."))
  else if ("codex_stream" in step) await emitJson(codexStream(step.result ?? "All done."))
  else if ("gemini_stream" in step) await emitJson(geminiStream(step.result ?? "All done."))
  else if ("sleep_ms" in step) await sleep(Number(step.sleep_ms))
  else if ("spawn_child_sleep_ms" in step) {
    const pid = spawnSleeper(step.spawn_child_sleep_ms, step.ignore_sigterm === true, step.tag)
    await write("stdout", `child-pid ${pid}\n`)
  } else if ("trap_sigterm" in step) {
    process.on("SIGTERM", () => process.stdout.write("sigterm ignored\n"))
  } else if ("print_env" in step) await printEnv()
  else if ("echo_prompt" in step) {
    await write("stdout", `stdin ${JSON.stringify(await readStdin())}\n`)
    await write("stdout", `TASKWRIGHT_PROMPT ${JSON.stringify(process.env.TASKWRIGHT_PROMPT ?? null)}\n`)
  } else if ("print_argv" in step) {
    const args = process.argv.slice(scriptFile() === undefined ? 2 : 3)
    await write("stdout", `argv ${JSON.stringify(args)}\n`)
  } else if ("exit" in step) return Number(step.exit)
  else throw new ScriptError(`unknown step ${JSON.stringify(step)}`)
  return undefined
}

const main = async () => {
  try {
    for (const step of loadScript()) {
      const code = await runStep(step)
      if (code !== undefined) {
        process.exitCode = code
        break
      }
    }
  } catch (error) {
    process.stderr.write(`scripted-agent: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exitCode = 2
  }
  // Stop waiting on a stdin nobody asked for, so the process ends once its output is flushed.
  process.stdin.destroy()
}

await main()
