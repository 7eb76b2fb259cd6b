/** Real git repositories for tests of projects and agent runs. */
import { execFileSync } from "node:child_process"
import { mkdirSync, writeFileSync } from "node:fs"
import { mkdtemp } from "node:fs/promises"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"

/** Runs `git` in `cwd` with a fixed identity and locale, and answers its output. */
export const git = (cwd: string, ...args: ReadonlyArray<string>): string =>
  execFileSync("git", ["-c", "user.name=Test", "-c", "user.email=test@example.test", ...args], {
    cwd,
    encoding: "utf8",
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", LC_ALL: "C" }
  })

/** The files a repository starts with when a test names none. */
export const defaultRepoFiles: Readonly<Record<string, string>> = {
  "README.md": "# Project\n\nline a\nline b\nline c\n",
  "src/app.ts": "export const a = 1\n"
}

/** A git repository on `main` with one commit holding `files`, in a new directory inside `parent`. */
export const makeRepo = async (
  files: Readonly<Record<string, string>> = defaultRepoFiles,
  parent: string = tmpdir()
): Promise<string> => {
  const dir = await mkdtemp(join(parent, "tw-repo-"))
  git(dir, "init", "-q", "-b", "main")
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true })
    writeFileSync(join(dir, path), content)
  }
  git(dir, "add", "-A")
  git(dir, "commit", "-q", "-m", "initial")
  return dir
}
