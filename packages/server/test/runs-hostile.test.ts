/**
 * Hostile agents, on every store, against real server processes, real bubblewrap, real git and
 * real processes. An ordinary (non-admin) user's `command` agent tries everything an agent that
 * wants out would try:
 *
 * - walk up from its worktree and read `admin-key.txt`, `agents.json` and `taskwright.db`, read
 *   another user's worktree and project, and the service's environment;
 * - write in the data directory, in `/tmp`, in `/`, in another user's project, in the service's HOME;
 * - leave processes behind: `setsid`, `nohup`, double forks, a cleared environment, SIGTERM ignored
 *   (the agent itself ignores SIGTERM too);
 * - `git config core.hooksPath` in its worktree, and write the project's own `.git/config` and hooks;
 * - a global git filter in `$HOME/.gitconfig` (and XDG attributes) for the service's own git to run;
 * - a hard link to `/etc/passwd` in its worktree;
 * - what root could do (the tests run as root, so the service and its agents do): `umount` what
 *   hides the data directory, remount `/` read-write, bind-mount `/` to get under the hiding
 *   mounts, `unshare` a mount namespace to unmount in, go through `/proc/1/root`.
 *
 * Asserted after `POST /api/runs/:id/stop`, after a timeout, and after a SIGKILL of the server and
 * the recovery of the next start: none of it got anywhere. Besides: `TASKWRIGHT_SANDBOX=off` runs
 * agents unsandboxed (and the service's git still ignores what they wrote), a host without a
 * usable sandbox answers 503, the built-in CLIs get their credentials directories, and the whole
 * works for a service running as an ordinary user.
 */
import { execFileSync } from "node:child_process"
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { randomBase62 } from "@taskwright/core"
import { git, makeRepo, scriptedAgentPath, testStores } from "@taskwright/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type LogView, pidsTagged, type RunView, scriptedAgentPaths, waitFor } from "./runs-helpers.js"
import {
  checkoutReachableBy,
  client,
  ensureBuilt,
  killServer,
  MAIN,
  makeStore,
  type ServerProcess,
  startServer
} from "./runs-server.js"

const NOBODY = { uid: 65534, gid: 65534 }
const runsAsRoot = process.getuid?.() === 0

/** Creates a user and a key with every non-admin scope, with the CLI, on the server's store. */
const createUser = (dataDir: string, databaseUrl: string | undefined, email: string): string => {
  const env = { PATH: process.env.PATH ?? "", ...(databaseUrl === undefined ? {} : { DATABASE_URL: databaseUrl }) }
  const cli = (...args: Array<string>) =>
    execFileSync(process.execPath, [MAIN, ...args, "--data-dir", dataDir, "--json"], { env, encoding: "utf8" })
  cli("users", "create", "--email", email, "--name", email)
  const key = JSON.parse(
    cli(
      "keys",
      "create",
      "--user",
      email,
      "--name",
      "key",
      "--scopes",
      "tasks:read,tasks:write,projects:read,projects:write,agents:run"
    )
  ) as { secret: string }
  return key.secret
}

/** A listing of `dir` (names, sorted) to compare before and after. */
const listing = (dir: string): ReadonlyArray<string> => (existsSync(dir) ? readdirSync(dir).sort() : [])

describe.each(testStores())("hostile agents on %s", (store) => {
  const id = `${Date.now()}${Math.floor(Math.random() * 1e6)}`
  const tag = `tw-hostile-${id}`
  const victimTag = `tw-victim-${id}`
  const JWT_SECRET = `hostile-jwt-secret-${randomBase62(24)}`
  const CANARY = `agents-json-canary-${randomBase62(16)}`
  const VICTIM_SECRET = `victim-worktree-secret-${randomBase62(16)}`
  const DB_CANARY = `database-file-canary-${randomBase62(16)}`

  let root = ""
  let dataDir = ""
  let projectsRoot = ""
  let serviceHome = ""
  let markers = ""
  let repo = ""
  let victimRepo = ""
  let databaseUrl: string | undefined
  let dropStore: () => Promise<void> = async () => {}
  let server: ServerProcess | undefined
  let adminKey = ""
  let malloryKey = ""
  let victimKey = ""
  let victimRunId = ""
  let projectGit: { config: string; hooks: ReadonlyArray<string>; info: ReadonlyArray<string> }

  const admin = client(
    () => server,
    () => adminKey
  )
  const mallory = client(
    () => server,
    () => malloryKey
  )
  const victim = client(
    () => server,
    () => victimKey
  )
  const start = () =>
    startServer({
      dataDir,
      databaseUrl,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: serviceHome,
        TASKWRIGHT_JWT_SECRET: JWT_SECRET,
        TASKWRIGHT_PROJECTS_ROOT: projectsRoot,
        TASKWRIGHT_RATE_LIMIT: "1000000"
      }
    })

  const leak = () => join(markers, "filter-ran")
  const hookMarker = () => join(markers, "hook-ran")
  const outside = () => [
    join(dataDir, `pwned-${id}`),
    `/tmp/pwned-${id}`,
    `/pwned-${id}`,
    `/var/tmp/pwned-${id}`,
    join(victimRepo, `pwned-${id}`),
    join(serviceHome, `pwned-${id}`)
  ]

  /** The hostile agent: a shell script, so it can do whatever a shell can. */
  const hostileScript = () =>
    [
      "set +e",
      'say() { echo "hostile: $*"; }',
      // The tag is put together at run time: the script's own command line must not match it.
      `T=tw-hos; T="\${T}tile-${id}"`,
      'say "start pid $$"',
      "# What root could do (the service, and so its agents, run as root here): unmount or get under",
      "# what hides the data directory, remount the host read-write; everything below then tries again.",
      'say "caps $(grep CapEff /proc/self/status | cut -f2)"',
      `for d in '${dataDir}' '${projectsRoot}'; do umount -l "$d" 2>/dev/null && say "ESCAPED: unmounted $d"; done`,
      'mount -o remount,bind,rw / 2>/dev/null && say "ESCAPED: remounted / read-write"',
      'mount -o remount,rw / 2>/dev/null && say "ESCAPED: remounted the host root read-write"',
      "mkdir -p /tmp/under && mount --bind / /tmp/under 2>/dev/null &&",
      `  { say "ESCAPED: bound /"; cat '/tmp/under${dataDir}/admin-key.txt'; echo pwned > '/tmp/under/pwned-${id}'; }`,
      `unshare -m sh -c 'umount -l "$0" && cat "$0/admin-key.txt"' '${dataDir}' 2>/dev/null && say "ESCAPED: unshare -m"`,
      `unshare -Urm sh -c 'umount -l "$0" && cat "$0/admin-key.txt"' '${dataDir}' 2>/dev/null && say "ESCAPED: unshare -Urm"`,
      `cat '/proc/1/root${dataDir}/admin-key.txt' 2>/dev/null && say "ESCAPED: read through /proc/1/root"`,
      `(echo pwned > '/proc/1/root/pwned-${id}') 2>/dev/null && say "ESCAPED: wrote through /proc/1/root"`,
      "# Walk up from the worktree.",
      'd=$(pwd); while [ "$d" != / ]; do',
      "  for f in admin-key.txt agents.json taskwright.db; do",
      '    if [ -e "$d/$f" ]; then say "FOUND $d/$f"; cat "$d/$f"; cp "$d/$f" "./stolen-$f"; fi',
      "  done",
      '  d=$(dirname "$d")',
      "done",
      "# Straight at what it knows is there.",
      `for f in '${dataDir}/admin-key.txt' '${dataDir}/agents.json' '${dataDir}/taskwright.db' '${victimRepo}/README.md' '${dataDir}'/worktrees/*/victim-secret.txt; do`,
      '  if [ -r "$f" ]; then say "FOUND $f"; cat "$f"; cp "$f" "./stolen-$(basename "$f")"; else say "cannot read $f"; fi',
      "done",
      `for w in '${dataDir}'/worktrees/*; do say "sees worktree $(basename "$w")"; done`,
      "for e in /proc/[0-9]*/environ; do tr '\\0' '\\n' < \"$e\" 2>/dev/null; done | grep -a TASKWRIGHT_JWT | sed 's/^/hostile: FOUND /'",
      "# Write outside.",
      `for p in ${outside()
        .map((p) => `'${p}'`)
        .join(" ")}; do`,
      '  if (echo pwned > "$p") 2>/dev/null; then say "wrote $p"; else say "refused $p"; fi',
      "done",
      "# Processes that outlive their agent: new sessions, no environment, SIGTERM ignored.",
      `setsid env -i sh -c 'trap "" TERM HUP INT; sleep 1000' "$T" </dev/null >/dev/null 2>&1 &`,
      `setsid sh -c 'setsid env -i sh -c "trap \\"\\" TERM HUP; while :; do sleep 1; done" "$0" &' "$T" </dev/null >/dev/null 2>&1 &`,
      `nohup env -i sh -c 'trap "" TERM; sleep 1000' "$T" </dev/null >/dev/null 2>&1 &`,
      "# The project's git configuration and hooks.",
      "mkdir -p .hooks",
      `printf '#!/bin/sh\\ntouch ${hookMarker()}\\n' > .hooks/pre-commit; chmod +x .hooks/pre-commit`,
      'git config core.hooksPath "$PWD/.hooks" && say "set core.hooksPath in $(git rev-parse --git-dir)"',
      'objects=$(head -n 1 "$(git rev-parse --git-dir)/objects/info/alternates" 2>/dev/null)',
      `for gd in "$(dirname "$objects")" '${repo}/.git'; do`,
      '  if git --git-dir="$gd" config core.hooksPath "$PWD/.hooks" 2>/dev/null; then say "WROTE config of $gd"; else say "refused config of $gd"; fi',
      '  if cp .hooks/pre-commit "$gd/hooks/pre-commit" 2>/dev/null; then say "WROTE hook in $gd"; else say "refused hook in $gd"; fi',
      "done",
      "# A global filter for the service's git, with the service's environment.",
      `git config --global filter.evil.clean "sh -c 'env > ${leak()}; cat'"`,
      "git config --global filter.evil.required true",
      'mkdir -p "$HOME/.config/git" && echo "* filter=evil" > "$HOME/.config/git/attributes"',
      "echo '* filter=evil' > .gitattributes",
      'say "global filter written in $HOME"',
      "# A hard link to a system file, and a symlink (fine: committed as a link).",
      'if ln /etc/passwd passwd-hardlink 2>/dev/null; then say "LINKED /etc/passwd"; else say "link refused"; fi',
      `if ln '${dataDir}/admin-key.txt' key-hardlink 2>/dev/null; then say "LINKED the admin key"; else say "key link refused"; fi`,
      "ln -s /etc/passwd passwd-symlink",
      "echo 'ordinary work' > work.txt",
      "trap 'say \"ignoring TERM\"' TERM",
      "say ready",
      "while :; do sleep 0.2; done"
    ].join("\n")

  const configureHostile = (settings: Record<string, unknown>) =>
    admin.ok("PUT", "/api/agents/hostile", {
      enabled: true,
      command: ["/bin/sh", "-c", hostileScript()],
      ...settings
    })

  const projects = new Map<string, string>()
  const newTask = async (key: typeof mallory, path: string, title: string) => {
    let projectId = projects.get(path)
    if (projectId === undefined) {
      projectId = (await key.ok<{ id: string }>("POST", "/api/projects", { name: title, path })).id
      projects.set(path, projectId)
    }
    return (await key.ok<{ id: number }>("POST", "/api/tasks", { title, project_id: projectId })).id
  }

  const startHostile = async (branch: string) => {
    const taskId = await newTask(mallory, repo, `Hostile ${branch}`)
    const run = await mallory.ok<{ run_id: string }>("POST", `/api/tasks/${taskId}/run`, { agent: "hostile", branch })
    await waitFor(
      () => mallory.allLogs(run.run_id),
      (logs) => logs.some((l) => l.message === "hostile: ready"),
      20_000,
      "the hostile agent to be ready"
    )
    // The attack is live: its detached processes run on the host.
    await waitFor(
      async () => pidsTagged(tag),
      (pids) => pids.length >= 3,
      5_000,
      "the detached processes"
    )
    return run.run_id
  }

  /** Everything the agent tried came to nothing. */
  const assertContained = async (runId: string, branch: string) => {
    expect(pidsTagged(tag)).toEqual([])
    const logs = await mallory.allLogs(runId)
    const text = logs.map((l) => l.message).join("\n")
    for (const secret of [
      adminKey,
      malloryKey,
      victimKey,
      CANARY,
      JWT_SECRET,
      VICTIM_SECRET,
      DB_CANARY,
      "root:x:0:0"
    ]) {
      expect(text).not.toContain(secret)
    }
    expect(text).not.toContain("SQLite format")
    for (const escaped of ["hostile: FOUND", "hostile: WROTE", "hostile: LINKED", "hostile: ESCAPED"]) {
      expect(
        logs.filter((l) => l.message.startsWith(escaped)).map((l) => l.message),
        escaped
      ).toEqual([])
    }
    // Its /tmp and HOME are its own, and writable; nowhere else is.
    expect(logs.filter((l) => l.message.startsWith("hostile: wrote")).map((l) => l.message)).toEqual([
      `hostile: wrote /tmp/pwned-${id}`,
      `hostile: wrote ${join(serviceHome, `pwned-${id}`)}`
    ])
    // It saw its own worktree only.
    expect(logs.filter((l) => l.message.startsWith("hostile: sees worktree")).map((l) => l.message)).toEqual([
      `hostile: sees worktree ${runId}`
    ])
    // The script did run all the way through.
    for (const line of [
      "hostile: caps 0000000000000000",
      `hostile: refused /pwned-${id}`,
      "hostile: link refused",
      "hostile: ready"
    ]) {
      expect(text).toContain(line)
    }
    expect(text).toMatch(/hostile: set core.hooksPath in .*\/sandboxes\/run_[^/]+\/git/)
    expect(text).toContain(`The repository borrows objects from ${dataDir} (objects/info/alternates): not shown`)

    // The branch has the ordinary work and the symlink, nothing stolen, no hard link.
    const files = git(repo, "ls-tree", "-r", "--name-only", branch).split("\n")
    expect(files).toContain("work.txt")
    expect(files).toContain("passwd-symlink")
    expect(files.filter((f) => f.startsWith("stolen-") || f.endsWith("-hardlink"))).toEqual([])
    expect(git(repo, "show", `${branch}:work.txt`)).toBe("ordinary work\n")
    const history = git(repo, "log", "-p", "--format=%B", branch)
    for (const secret of [adminKey, CANARY, JWT_SECRET, VICTIM_SECRET, DB_CANARY, "root:x:0:0"]) {
      expect(history).not.toContain(secret)
    }

    // Nothing appeared outside; the project's git is as it was, and runs no hook of the agent's.
    for (const path of outside()) expect(existsSync(path), path).toBe(false)
    expect(readFileSync(join(repo, ".git", "config"), "utf8")).toBe(projectGit.config)
    expect(listing(join(repo, ".git", "hooks"))).toEqual(projectGit.hooks)
    expect(listing(join(repo, ".git", "info"))).toEqual(projectGit.info)
    expect(existsSync(join(serviceHome, ".gitconfig"))).toBe(false)
    expect(existsSync(join(serviceHome, ".config"))).toBe(false)
    execFileSync(
      "git",
      ["-c", "user.name=U", "-c", "user.email=u@example.test", "commit", "-q", "--allow-empty", "-m", "u"],
      {
        cwd: repo,
        env: { PATH: process.env.PATH ?? "", HOME: serviceHome }
      }
    )
    expect(existsSync(hookMarker())).toBe(false)
    expect(existsSync(leak())).toBe(false)
    expect(existsSync(join(dataDir, "sandboxes", runId))).toBe(false)
  }

  beforeAll(async () => {
    await ensureBuilt()
    root = await mkdtemp(join(tmpdir(), "tw-hostile-"))
    dataDir = join(root, "data")
    projectsRoot = join(root, "projects")
    serviceHome = join(root, "home")
    markers = join(root, "markers")
    for (const dir of [dataDir, projectsRoot, serviceHome, markers]) mkdirSync(dir)
    repo = await makeRepo(undefined, projectsRoot)
    // A hostile repository too: it borrows objects from the data directory, which would show it to the agent.
    writeFileSync(join(repo, ".git", "objects", "info", "alternates"), `${dataDir}\n`)
    victimRepo = await makeRepo({ "README.md": `victim's project ${VICTIM_SECRET}\n` }, projectsRoot)
    projectGit = {
      config: readFileSync(join(repo, ".git", "config"), "utf8"),
      hooks: listing(join(repo, ".git", "hooks")),
      info: listing(join(repo, ".git", "info"))
    }
    ;({ databaseUrl, drop: dropStore } = await makeStore(store))
    // On PostgreSQL there is no database file: a decoy stands in for it.
    if (store === "postgres") writeFileSync(join(dataDir, "taskwright.db"), `SQLite format 3\u0000${DB_CANARY}\n`)
    server = await start()
    adminKey = readFileSync(join(dataDir, "admin-key.txt"), "utf8").trim()
    malloryKey = createUser(dataDir, databaseUrl, `mallory-${id}@example.test`)
    victimKey = createUser(dataDir, databaseUrl, `victim-${id}@example.test`)
    // agents.json holds another agent's secret.
    await admin.ok("PUT", "/api/agents/victim-agent", {
      enabled: true,
      command: [process.execPath, scriptedAgentPath],
      read_only_paths: scriptedAgentPaths,
      env: {
        CANARY_TOKEN: CANARY,
        TASKWRIGHT_SCRIPT: JSON.stringify([
          { write: "victim-secret.txt", content: `${VICTIM_SECRET}\n` },
          { spawn_child_sleep_ms: 600_000, tag: victimTag },
          { stdout: "ready" },
          { sleep_ms: 600_000 }
        ])
      }
    })
    expect(readFileSync(join(dataDir, "agents.json"), "utf8")).toContain(CANARY)
    // Another user's run is going on meanwhile, with a secret in its worktree.
    const victimTask = await newTask(victim, victimRepo, "Victim's task")
    victimRunId = (
      await victim.ok<{ run_id: string }>("POST", `/api/tasks/${victimTask}/run`, { agent: "victim-agent" })
    ).run_id
    await waitFor(
      () => victim.allLogs(victimRunId),
      (logs) => logs.some((l) => l.message === "ready"),
      20_000,
      "the victim's agent"
    )
  }, 300_000)

  afterAll(async () => {
    await killServer(server)
    // Should a sandbox ever fail, what got out is cleaned up all the same.
    for (const pid of [...pidsTagged(tag), ...pidsTagged(victimTag)]) process.kill(pid, "SIGKILL")
    for (const path of outside()) rmSync(path, { force: true })
    await dropStore()
    await rm(root, { recursive: true, force: true })
  })

  it("after a stop: nothing got out, and nothing is left", async () => {
    await configureHostile({ timeout_s: 600 })
    const runId = await startHostile("hostile/stop")
    const stopped = await mallory.call<RunView>("POST", `/api/runs/${runId}/stop`)
    expect(stopped.status, stopped.text).toBe(200)
    expect(stopped.body.status).toBe("stopped")
    // The agent ignored SIGTERM: it was killed, and the answer came only once all was gone.
    expect(pidsTagged(tag)).toEqual([])
    const logs = await mallory.allLogs(runId)
    expect(logs.some((l) => l.message === "hostile: ignoring TERM")).toBe(true)
    expect(logs.some((l) => l.message.startsWith("Not committed: passwd-hardlink"))).toBe(false)
    await assertContained(runId, "hostile/stop")
    // The other user's run goes on, untouched.
    expect((await victim.ok<RunView>("GET", `/api/runs/${victimRunId}`)).status).toBe("running")
  })

  it("after a timeout: nothing got out, and nothing is left", async () => {
    await configureHostile({ timeout_s: 2 })
    const taskId = await newTask(mallory, repo, "Hostile timeout")
    const run = await mallory.ok<{ run_id: string }>("POST", `/api/tasks/${taskId}/run`, {
      agent: "hostile",
      branch: "hostile/timeout"
    })
    const ended = await waitFor(
      () => mallory.ok<RunView>("GET", `/api/runs/${run.run_id}`),
      (r) => r.status !== "running",
      20_000,
      "the timeout"
    )
    expect(ended).toMatchObject({ status: "failed", error: "timed out after 2 s" })
    await assertContained(run.run_id, "hostile/timeout")
  })

  it("after a SIGKILL of the server and the next start's recovery: nothing got out, and nothing is left", async () => {
    await configureHostile({ timeout_s: 600 })
    const runId = await startHostile("hostile/kill")
    expect(pidsTagged(victimTag)).toHaveLength(1)
    await killServer(server)
    // The sandboxes die with their server: nothing waits for the next start to be ended.
    await waitFor(
      async () => [...pidsTagged(tag), ...pidsTagged(victimTag)],
      (pids) => pids.length === 0,
      3_000,
      "the sandboxed processes to die with the server"
    )
    server = await start()
    expect(server.output()).toContain("marked 2 run(s) failed")
    const run = await mallory.ok<RunView>("GET", `/api/runs/${runId}`)
    expect(run).toMatchObject({ status: "failed", error: "the service stopped while the run was in progress" })
    await assertContained(runId, "hostile/kill")
    const victimRun = await victim.ok<RunView>("GET", `/api/runs/${victimRunId}`)
    expect(victimRun.status).toBe("failed")
    expect(victimRun.output.files_modified).toEqual(["victim-secret.txt"])
  })
})

describe.each(testStores())("sandbox settings on %s", (store) => {
  let root = ""
  const drops: Array<() => Promise<void>> = []
  let server: ServerProcess | undefined
  let key = ""
  const admin = client(
    () => server,
    () => key
  )

  beforeAll(async () => {
    await ensureBuilt()
    root = await mkdtemp(join(tmpdir(), "tw-sandbox-settings-"))
  }, 300_000)
  afterAll(async () => {
    await killServer(server)
    for (const drop of drops) await drop()
    await rm(root, { recursive: true, force: true })
  })

  /** A new store and a server on it (as `user`), with `env` on top of the usual. */
  const startOn = async (
    dataDir: string,
    home: string,
    env: Record<string, string>,
    user?: { readonly uid: number; readonly gid: number }
  ) => {
    await killServer(server)
    const { databaseUrl, drop } = await makeStore(store)
    drops.push(drop)
    server = await startServer({
      dataDir,
      databaseUrl,
      env: { PATH: process.env.PATH ?? "", HOME: home, TASKWRIGHT_RATE_LIMIT: "1000000", ...env },
      ...(user === undefined ? {} : { user })
    })
    key = readFileSync(join(dataDir, "admin-key.txt"), "utf8").trim()
  }

  /** A new data directory and a server on it, and a task in a new repository. */
  const serve = async (name: string, env: Record<string, string>) => {
    const dataDir = join(root, name, "data")
    const home = join(root, name, "home")
    mkdirSync(dataDir, { recursive: true })
    mkdirSync(home, { recursive: true })
    await startOn(dataDir, home, env)
    const repo = await makeRepo(undefined, root)
    const project = await admin.ok<{ id: string }>("POST", "/api/projects", { name, path: repo })
    const task = await admin.ok<{ id: number }>("POST", "/api/tasks", { title: name, project_id: project.id })
    return { dataDir, home, repo, taskId: task.id }
  }

  const waitEnd = (runId: string) =>
    waitFor(
      () => admin.ok<RunView>("GET", `/api/runs/${runId}`),
      (r) => r.status !== "running",
      20_000,
      `run ${runId} to end`
    )

  it("TASKWRIGHT_SANDBOX=off runs agents unsandboxed, and the service's git still ignores what they wrote", async () => {
    const markers = join(root, "off-markers")
    mkdirSync(markers)
    const leak = join(markers, "filter-ran")
    const { dataDir, home, repo, taskId } = await serve("off", {
      TASKWRIGHT_SANDBOX: "off",
      TASKWRIGHT_JWT_SECRET: "off-jwt-secret-that-must-not-leak"
    })
    const script = [
      'echo "pid $$"',
      `test -r '${dataDir}/admin-key.txt' && echo "sees the data directory"`,
      // The service's own HOME this time: no private one.
      `git config --global filter.evil.clean "sh -c 'env > ${leak}; cat'"`,
      "git config --global filter.evil.required true",
      'mkdir -p "$HOME/.config/git" && echo "* filter=evil" > "$HOME/.config/git/attributes"',
      "echo '* filter=evil' > .gitattributes",
      `ln '${dataDir}/admin-key.txt' key-hardlink && echo "linked the admin key"`,
      "echo 'ordinary work' > work.txt"
    ].join("\n")
    await admin.ok("PUT", "/api/agents/bare", { enabled: true, command: ["/bin/sh", "-c", script] })
    const run = await admin.ok<{ run_id: string }>("POST", `/api/tasks/${taskId}/run`, { agent: "bare", branch: "off" })
    expect((await waitEnd(run.run_id)).status).toBe("completed")
    const messages = (await admin.allLogs(run.run_id)).map((l) => l.message)
    // Unsandboxed: not pid 2 of a namespace of its own, and the data directory in plain sight.
    expect(messages.find((m) => m.startsWith("pid "))).not.toBe("pid 2")
    expect(messages).toContain("sees the data directory")
    expect(messages.some((m) => m.startsWith("Started sh (process group"))).toBe(true)
    // The attack landed in the service's HOME ...
    expect(readFileSync(join(home, ".gitconfig"), "utf8")).toContain("filter")
    expect(messages).toContain("linked the admin key")
    // ... and the service's git paid no attention: no filter ran, the hard link was refused.
    expect(existsSync(leak)).toBe(false)
    expect(git(repo, "show", "off:work.txt")).toBe("ordinary work\n")
    expect(git(repo, "ls-tree", "-r", "--name-only", "off").split("\n")).not.toContain("key-hardlink")
    expect(messages.some((m) => m.startsWith("Not committed: key-hardlink, a hard link"))).toBe(true)
    expect(git(repo, "log", "-p", "off")).not.toContain(key)
  })

  it("a host where no sandbox can be made refuses runs with 503, saying how to fix it", async () => {
    const bin = join(root, "bin-without-bwrap")
    mkdirSync(bin)
    symlinkSync(execFileSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).trim(), join(bin, "git"))
    const missing = await serve("no-bwrap", { PATH: bin })
    const refused = await admin.call<{ error: { code: string; message: string; details: Record<string, unknown> } }>(
      "POST",
      `/api/tasks/${missing.taskId}/run`,
      { agent: "claude-code" }
    )
    expect(refused.status, refused.text).toBe(503)
    expect(refused.body.error.code).toBe("SERVICE_UNAVAILABLE")
    expect(refused.body.error.details).toMatchObject({ reason: "sandbox_unavailable" })
    expect(refused.body.error.message).toMatch(/bubblewrap \(bwrap\) is not installed/)
    expect(refused.body.error.message).toMatch(/apt-get install bubblewrap/)
    expect(refused.body.error.message).toMatch(/TASKWRIGHT_SANDBOX=off/)
    // Refused before anything was made: no worktree, the task untouched.
    expect(listing(join(missing.dataDir, "worktrees"))).toEqual([])
    expect((await admin.ok<{ status: string }>("GET", `/api/tasks/${missing.taskId}`)).status).not.toBe("in_progress")

    // A bwrap that cannot make namespaces (a kernel that forbids unprivileged user namespaces).
    writeFileSync(
      join(bin, "bwrap"),
      "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'bubblewrap 0.0'; exit 0; }\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
    )
    chmodSync(join(bin, "bwrap"), 0o755)
    const broken = await serve("broken-bwrap", { PATH: bin })
    const again = await admin.call<{ error: { code: string; message: string } }>(
      "POST",
      `/api/tasks/${broken.taskId}/run`,
      { agent: "claude-code" }
    )
    expect(again.status, again.text).toBe(503)
    expect(again.body.error.message).toContain("setting up uid map: Permission denied")
    expect(again.body.error.message).toMatch(/TASKWRIGHT_SANDBOX=off/)
  })

  it("the Claude, Codex and Gemini executors get their credentials directories, read-write, in their private home", async () => {
    const { home, taskId } = await serve("credentials", {})
    const creds = {
      "claude-code": [join(home, ".claude"), join(home, ".claude.json")],
      codex: [join(home, ".codex")],
      gemini: [join(home, ".gemini")]
    }
    mkdirSync(join(home, ".claude"))
    writeFileSync(join(home, ".claude", ".credentials.json"), "claude-login\n")
    writeFileSync(join(home, ".claude.json"), "claude-settings\n")
    mkdirSync(join(home, ".codex"))
    writeFileSync(join(home, ".codex", "auth.json"), "codex-login\n")
    mkdirSync(join(home, ".gemini"))
    writeFileSync(join(home, ".gemini", "oauth_creds.json"), "gemini-login\n")
    mkdirSync(join(home, ".ssh"))
    writeFileSync(join(home, ".ssh", "id_ed25519"), "the service's ssh key\n")
    for (const [agent, paths] of Object.entries(creds)) {
      // The CLI's stand-in: reads every file of its home, refreshes its login (the executor appends the CLI's flags).
      const dir = paths[0] ?? ""
      const script = [
        'echo "home $HOME"',
        'find "$HOME" -type f | sort | while read -r f; do echo "file $f: $(cat "$f")"; done',
        `echo refreshed > '${dir}/refreshed-by-${agent}'`
      ].join("\n")
      await admin.ok("PUT", `/api/agents/${agent}`, { command: ["/bin/sh", "-c", script], credentials: paths })
      const run = await admin.ok<{ run_id: string }>("POST", `/api/tasks/${taskId}/run`, {
        agent,
        branch: `creds/${agent}`
      })
      expect((await waitEnd(run.run_id)).status).toBe("completed")
      const messages = (await admin.allLogs(run.run_id)).map((l: LogView) => l.message)
      expect(messages).toContain(`home ${home}`)
      const seen = messages.filter((m) => m.startsWith("file ") && !m.includes("refreshed-by-")).sort()
      const files = paths.flatMap((p) => (statSync(p).isFile() ? [p] : readdirSync(p).map((name) => join(p, name))))
      const expected = files
        .filter((f) => !f.includes("refreshed-by-"))
        .map((f) => `file ${f}: ${readFileSync(f, "utf8").trim()}`)
      // Its own login and settings, nothing of the other CLIs' and not the service's ssh key.
      expect(seen).toEqual(expected.sort())
      // The refreshed login is on the host, where the next run finds it.
      expect(readFileSync(join(dir, `refreshed-by-${agent}`), "utf8")).toBe("refreshed\n")
    }
  })

  // Skipped, not failed, when the checkout itself is closed to other users: the service could not
  // be installed there for one either.
  it.skipIf(!runsAsRoot || !checkoutReachableBy(NOBODY))(
    "works for a service that runs as an ordinary user",
    async () => {
      // Everything the service owns belongs to that user, as it would on a real host.
      const userRoot = join(root, "as-user")
      mkdirSync(userRoot)
      const dataDir = join(userRoot, "data")
      const home = join(userRoot, "home")
      mkdirSync(dataDir)
      mkdirSync(home)
      const repo = await makeRepo(undefined, userRoot)
      execFileSync("chown", ["-R", `${NOBODY.uid}:${NOBODY.gid}`, userRoot])
      chmodSync(root, 0o755)
      await startOn(dataDir, home, {}, NOBODY)
      const project = await admin.ok<{ id: string }>("POST", "/api/projects", { name: "as-user", path: repo })
      const task = await admin.ok<{ id: number }>("POST", "/api/tasks", { title: "as user", project_id: project.id })
      const userTag = `tw-as-user-${Date.now()}`
      const script = [
        'echo "pid $$ uid $(id -u)"',
        `cat '${dataDir}/admin-key.txt' 2>/dev/null || echo "no data directory"`,
        "echo 'work as a user' > work.txt",
        `T=${userTag.slice(0, 6)}; T="\${T}${userTag.slice(6)}"`,
        `setsid env -i sh -c 'trap "" TERM; while :; do sleep 1; done' "$T" </dev/null >/dev/null 2>&1 &`,
        "trap '' TERM",
        "echo ready",
        "while :; do sleep 0.2; done"
      ].join("\n")
      await admin.ok("PUT", "/api/agents/plain", { enabled: true, command: ["/bin/sh", "-c", script] })
      const run = await admin.ok<{ run_id: string }>("POST", `/api/tasks/${task.id}/run`, {
        agent: "plain",
        branch: "user"
      })
      const logs = await waitFor(
        () => admin.allLogs(run.run_id),
        (ls) => ls.some((l) => l.message === "ready"),
        20_000,
        "the agent"
      )
      const messages = logs.map((l) => l.message)
      expect(messages).toContain(`pid 2 uid ${NOBODY.uid}`)
      expect(messages).toContain("no data directory")
      expect(messages.join("\n")).not.toContain(key)
      expect(pidsTagged(userTag)).toHaveLength(1)
      const stopped = await admin.call<RunView>("POST", `/api/runs/${run.run_id}/stop`)
      expect(stopped.status, stopped.text).toBe(200)
      expect(pidsTagged(userTag)).toEqual([])
      const committed = execFileSync("git", ["-c", `safe.directory=${repo}`, "show", "user:work.txt"], {
        cwd: repo,
        encoding: "utf8"
      })
      expect(committed).toBe("work as a user\n")
    }
  )
})
