/** Clones a project's `git_url` with git hardened: no hooks, no fsmonitor, `--end-of-options`, no prompts. */
import { execFile } from "node:child_process"
import { Data, Effect } from "effect"

export class CloneError extends Data.TaggedError("CloneError")<{ readonly message: string }> {}

export const cloneRepository = (url: string, path: string): Effect.Effect<void, CloneError> =>
  Effect.async<void, CloneError>((resume) => {
    const child = execFile(
      "git",
      [
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.fsmonitor=false",
        "clone",
        "--quiet",
        "--end-of-options",
        url,
        path
      ],
      {
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", GIT_TERMINAL_PROMPT: "0", HOME: process.env.HOME ?? "/" },
        timeout: 300_000
      },
      (error, _stdout, stderr) => {
        if (error)
          resume(Effect.fail(new CloneError({ message: stderr.trim().split("\n").pop() ?? "git clone failed" })))
        else resume(Effect.void)
      }
    )
    return Effect.sync(() => child.kill("SIGKILL"))
  })
