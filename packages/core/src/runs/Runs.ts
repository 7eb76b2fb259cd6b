/**
 * Agent runs: start an agent on a task in a git worktree of the task's project, supervise its
 * process, store its output as log entries, commit its work on the run's branch, and record how
 * it ended. Also the reads (a run with its figures so far, pages of its log), stop, recovery of
 * runs a dead service left `running`, and a clean stop of every run when the service shuts down.
 *
 * A run is `running`, then `completed` (exit 0: the task moves to `in_review`), `failed`
 * (non-zero exit, timeout, crash, or the service going away) or `stopped` (`POST .../stop`).
 * Starting one moves the task to `in_progress`; `failed` and `stopped` leave it there.
 *
 * At most `maxRuns` runs at once in this service process; at most one running run per task (the
 * store enforces that too, across processes).
 */
import { existsSync } from "node:fs"
import { mkdir } from "node:fs/promises"
import { basename, join } from "node:path"
import { Deferred, Effect, Either, Exit, FiberSet, Schedule } from "effect"
import { type LogDraft, type StreamParser, truncate } from "../agents/AgentStreams.js"
import { Agents, type ResolvedAgent } from "../agents/Agents.js"
import { type AgentExecutor, executorFor } from "../agents/Executors.js"
import type { Actor } from "../auth/Actor.js"
import { authorizeOwned } from "../auth/Policy.js"
import { TaskwrightConfig } from "../Config.js"
import { BadRequest, Conflict, NotFound } from "../domain/Errors.js"
import { newRunId, type RunId, type TaskId } from "../domain/Ids.js"
import { now } from "../domain/Timestamp.js"
import { fn } from "../domain/Traced.js"
import { ProjectsRepo } from "../projects/ProjectsRepo.js"
import type { StoreError } from "../store/Store.js"
import { Tasks } from "../tasks/Tasks.js"
import { type TaskRow, TasksRepo } from "../tasks/TasksRepo.js"
import { type AgentExit, type AgentHandle, buildAgentEnv, DEFAULT_GRACE_MS, spawnAgent } from "./AgentProcess.js"
import {
  commitAll,
  createWorktree,
  type DiffStats,
  diffStats,
  type GitError,
  isGitRepository,
  removeWorktree
} from "./GitWorkspace.js"
import { killLeftoverGroup, waitGroupGone } from "./ProcessGroups.js"
import type { Autonomy, Run, RunLogs, RunLogsParams, RunOutput, RunStart, RunStarted, RunStatus } from "./Run.js"
import { makeRunLog, type RunLog } from "./RunLog.js"
import { type RunRow, RunsRepo } from "./RunsRepo.js"

/** Who the service commits a run's work as. */
export const COMMIT_AUTHOR = { name: "Taskwright", email: "taskwright@localhost" } as const

/** The branch of a task's runs when the request names none. */
export const defaultBranch = (taskId: TaskId): string => `taskwright/task-${taskId}`

/** The prompt of a run: the task's title and description, and the review comment of a follow-up. */
export const buildPrompt = (
  task: { readonly title: string; readonly description: string },
  feedback: string | null
) => {
  const parts = [task.title.trim()]
  if (task.description.trim() !== "") parts.push(task.description.trim())
  if (feedback !== null && feedback.trim() !== "") {
    parts.push(`A reviewer asked for changes to the work done so far on this branch:\n${feedback.trim()}`)
  }
  return parts.join("\n\n")
}

/** `TASKWRIGHT_PROMPT` is cut to this many bytes: Linux refuses a single variable over 128 KiB. */
const MAX_PROMPT_ENV_BYTES = 96 * 1024
/** How long the figures of a running run are reused before git is asked again. */
const LIVE_OUTPUT_TTL_MS = 1_000

const promptForEnv = (prompt: string): string => {
  const bytes = Buffer.from(prompt, "utf8")
  return bytes.length <= MAX_PROMPT_ENV_BYTES ? prompt : bytes.subarray(0, MAX_PROMPT_ENV_BYTES).toString("utf8")
}

const emptyDiff: DiffStats = { files_modified: [], lines_added: 0, lines_removed: 0 }

/** The stored `output` JSON, whatever an older row holds. */
export const parseOutput = (text: string): RunOutput => {
  try {
    const o = JSON.parse(text) as Record<string, unknown>
    const usage = o.usage as RunOutput["usage"] | undefined
    return {
      files_modified: Array.isArray(o.files_modified) ? (o.files_modified as Array<string>) : [],
      lines_added: Number(o.lines_added) || 0,
      lines_removed: Number(o.lines_removed) || 0,
      ...(typeof usage === "object" && usage !== null ? { usage } : {}),
      ...(typeof o.commit === "string" ? { commit: o.commit } : {})
    }
  } catch {
    return emptyDiff
  }
}

const toRun = (row: RunRow, output: RunOutput): Run => ({
  id: row.id,
  task_id: row.task_id,
  agent: row.agent,
  status: row.status,
  started_at: row.started_at,
  completed_at: row.completed_at,
  output,
  branch: row.branch,
  autonomy: row.autonomy,
  error: row.error
})

interface StopRequest {
  readonly kind: "user" | "shutdown"
  readonly by: string | null
}

/** A run this service process supervises. */
interface ActiveRun {
  readonly id: RunId
  readonly taskId: TaskId
  readonly worktreePath: string
  baseSha: string | null
  phase: "starting" | "running" | "finishing"
  handle: AgentHandle | null
  parser: StreamParser | null
  stop: StopRequest | null
  live: { readonly at: number; readonly output: RunOutput } | null
  readonly done: Deferred.Deferred<void>
}

/** Everything the supervisor needs about a run it starts. */
interface Plan {
  readonly agent: ResolvedAgent
  readonly executor: AgentExecutor
  readonly autonomy: Autonomy
  readonly branch: string
  readonly prompt: string
  readonly task: { readonly id: TaskId; readonly title: string }
  readonly repoPath: string
  readonly newBranch: boolean
}

interface Outcome {
  readonly status: RunStatus
  readonly level: LogDraft["level"]
  readonly message: string
  readonly error: string | null
}

/** A failed outcome: `error` as the run records it, and as a sentence (plus `detail`) in its log. */
const failed = (error: string, detail = ""): Outcome => ({
  status: "failed",
  level: "error",
  message: `${error.charAt(0).toUpperCase()}${error.slice(1)}${detail}`,
  error
})

/** How the process's end maps to the run's status. */
const decide = (exit: AgentExit, stop: StopRequest | null, timeoutS: number): Outcome => {
  switch (exit.reason) {
    case "stopped":
      if (stop?.kind === "shutdown") return failed("the service shut down during the run", "; the agent was stopped")
      return { status: "stopped", level: "warn", message: `Stopped${stop?.by ? ` by ${stop.by}` : ""}`, error: null }
    case "timeout":
      return failed(`timed out after ${timeoutS} s`, "; the agent's processes were ended")
    case "spawn_error":
      return failed(`could not start the agent: ${exit.error ?? "unknown error"}`)
    case "exit":
      if (exit.code === 0)
        return { status: "completed", level: "info", message: "The agent exited with code 0", error: null }
      return exit.code !== null
        ? failed(`the agent exited with code ${exit.code}`)
        : failed(`the agent was killed by ${exit.signal ?? "a signal"}`)
  }
}

const notStarted: AgentExit = { code: null, signal: null, reason: "stopped", truncated: false, error: null }

const firstLine = (text: string, max: number): string => {
  const line = text.split("\n")[0]?.trim() ?? ""
  return line.length <= max ? line : `${line.slice(0, max - 1)}…`
}

const commitMessage = (
  runId: RunId,
  agent: string,
  task: { readonly id: TaskId; readonly title: string },
  note: string,
  summary: string | null
): string =>
  [
    firstLine(task.title, 72) || `Task #${task.id}`,
    `Taskwright run ${runId} of task #${task.id} by ${agent}${note}.`,
    ...(summary !== null && summary.trim() !== "" ? [truncate(summary.trim(), 4000)] : [])
  ].join("\n\n")

const appendAll = (log: RunLog, drafts: ReadonlyArray<LogDraft>): void => {
  for (const d of drafts) log.append(d.level, d.message)
}

const taskBusy = (taskId: TaskId) =>
  new Conflict({ message: `task ${taskId} already has a running agent run`, details: { reason: "task_busy" } })

const runEnded = (row: RunRow) =>
  new Conflict({
    message: `run ${row.id} has already ended (${row.status})`,
    details: { reason: "run_ended", status: row.status }
  })

/** A failed `createWorktree` as the client sees it. */
const worktreeError = (branch: string) => (error: GitError) => {
  const why = `${error.message}\n${error.stderr}`
  if (/already checked out|already used by worktree|is already locked/.test(why)) {
    return new Conflict({
      message: `branch ${branch} is checked out in another worktree (the project's own checkout or a running run)`,
      details: { reason: "branch_in_use", branch }
    })
  }
  if (/no commit at HEAD/.test(why)) {
    return new BadRequest({
      message: "the project's repository has no commit yet; commit something first",
      details: { reason: "empty_repository" }
    })
  }
  return new BadRequest({
    message: `cannot create a worktree for the run: ${error.message}`,
    details: { reason: "git_failed" }
  })
}

export class Runs extends Effect.Service<Runs>()("@taskwright/core/Runs", {
  scoped: Effect.gen(function* () {
    const repo = yield* RunsRepo
    const tasks = yield* Tasks
    const tasksRepo = yield* TasksRepo
    const projects = yield* ProjectsRepo
    const agents = yield* Agents
    const config = yield* TaskwrightConfig
    const graceMs = DEFAULT_GRACE_MS
    const worktreesDir = join(config.dataDir, "worktrees")
    // Supervisors run on the service's own runtime, not the request's: they outlive it.
    const fork = yield* FiberSet.makeRuntime<never>()
    const active = new Map<RunId, ActiveRun>()
    const busyTasks = new Set<TaskId>()

    const release = (entry: ActiveRun) =>
      Effect.sync(() => {
        active.delete(entry.id)
        busyTasks.delete(entry.taskId)
      }).pipe(Effect.zipRight(Deferred.succeed(entry.done, undefined)))

    const loadRun = (actor: Actor, id: RunId) =>
      Effect.flatMap(repo.get(id), (row) => authorizeOwned(actor, "run", id, row))

    const openLog = (runId: RunId, firstSeq: number, notBefore: number, onPressure?: (high: boolean) => void) =>
      makeRunLog({
        firstSeq,
        notBefore,
        write: (entries) => repo.insertLogs(runId, entries),
        transaction: repo.transaction,
        ...(onPressure === undefined ? {} : { onPressure })
      })

    /** Records how a run ended (and moves a completed run's task to review); retried, the store may blink. */
    const finishRow = (runId: RunId, taskId: TaskId, status: RunStatus, output: RunOutput, error: string | null) =>
      repo
        .transaction(
          Effect.gen(function* () {
            const at = now()
            const changed = yield* repo.finish(runId, {
              status,
              completedAt: at,
              output: JSON.stringify(output),
              error
            })
            if (changed && status === "completed") yield* repo.setTaskStatus(taskId, "in_review", at)
          })
        )
        .pipe(Effect.retry({ times: 5, schedule: Schedule.exponential("200 millis") }))

    /**
     * Commits what is in the worktree on its branch, measures the work against the base, and
     * removes the worktree (the branch keeps the commit). A worktree whose work could not be
     * committed is kept, so nothing is lost.
     */
    const collect = (options: {
      readonly log: RunLog
      readonly worktreePath: string
      readonly repoPath: string
      readonly baseSha: string
      readonly branch: string
      readonly message: string
    }) =>
      Effect.gen(function* () {
        const { log } = options
        const committed = yield* Effect.either(
          commitAll({
            worktreePath: options.worktreePath,
            message: options.message,
            authorName: COMMIT_AUTHOR.name,
            authorEmail: COMMIT_AUTHOR.email
          })
        )
        const commit = Either.getOrNull(committed)
        if (Either.isLeft(committed)) {
          log.append("error", `Could not commit the run's changes: ${committed.left.message}`)
        } else if (commit === null) {
          log.append("info", "No changes to commit")
        } else {
          log.append("info", `Committed ${commit.slice(0, 12)} on branch ${options.branch}`)
        }
        const diff = yield* diffStats({ worktreePath: options.worktreePath, baseSha: options.baseSha }).pipe(
          Effect.catchAll((error) =>
            Effect.sync(() => {
              log.append("warn", `Could not measure the run's changes: ${error.message}`)
              return emptyDiff
            })
          )
        )
        if (Either.isLeft(committed)) {
          log.append("warn", `The worktree is kept at ${options.worktreePath} with the uncommitted work`)
        } else {
          const removed = yield* Effect.either(
            removeWorktree({ repoPath: options.repoPath, worktreePath: options.worktreePath })
          )
          if (Either.isLeft(removed)) log.append("warn", `Could not remove the worktree: ${removed.left.message}`)
          else if (removed.right === "dirty")
            log.append("warn", `The worktree still has changes; kept at ${options.worktreePath}`)
        }
        return { commitFailed: Either.isLeft(committed), commit, diff }
      })

    /** Starts the agent's process and waits until it and its whole process group are gone. */
    const runProcess = (entry: ActiveRun, plan: Plan, log: RunLog, parser: StreamParser) =>
      Effect.gen(function* () {
        if (entry.stop !== null) return notStarted
        const { settings } = plan.agent
        const launch = plan.executor.launch({ settings, autonomy: plan.autonomy, prompt: plan.prompt })
        const [program, ...args] = launch.argv
        if (program === undefined)
          return { ...notStarted, reason: "spawn_error", error: "no command is configured" } as const
        const env = buildAgentEnv(process.env, {
          ...settings.env,
          ...launch.env,
          TASKWRIGHT_PROMPT: promptForEnv(plan.prompt),
          TASKWRIGHT_TASK_ID: String(plan.task.id),
          TASKWRIGHT_RUN_ID: entry.id,
          TASKWRIGHT_BRANCH: plan.branch
        })
        const handle = spawnAgent({
          command: program,
          args,
          cwd: entry.worktreePath,
          env,
          stdin: launch.stdin,
          timeoutMs: settings.timeout_s * 1000,
          maxLogBytes: settings.max_log_bytes,
          graceMs,
          onLine: (stream, line) => {
            if (stream === "stdout") appendAll(log, parser.parseLine(line))
            else if (line.trim() !== "") log.append("warn", truncate(line))
          },
          // Past the cap nothing is stored, but the stream's last events still carry the usage.
          onOverflowLine: (stream, line) => {
            if (stream === "stdout") parser.parseLine(line)
          }
        })
        entry.handle = handle
        entry.phase = "running"
        const pid = handle.pid
        if (pid !== null) {
          log.append("info", `Started ${basename(program)} (process group ${pid})`)
          // A stop that arrived while the process was being started.
          if (entry.stop !== null) handle.stop(graceMs)
          yield* Effect.ignore(repo.setPid(entry.id, pid))
        }
        const exit = yield* Effect.promise(() => handle.exit)
        if (pid !== null) {
          const gone = yield* Effect.promise(() => waitGroupGone(pid, graceMs + 2_000))
          if (!gone) log.append("warn", `Processes of group ${pid} are still alive after SIGKILL`)
        }
        return exit
      })

    /** The whole life of a started run, on its own fiber; never fails. */
    const supervise = (entry: ActiveRun, plan: Plan) =>
      Effect.scoped(
        Effect.gen(function* () {
          // A store slower than the agent's output pauses reading its pipes (the agent then blocks on
          // write) instead of buffering without bound.
          const log = yield* openLog(entry.id, 1, 0, (high) => (high ? entry.handle?.pause() : entry.handle?.resume()))
          log.append(
            "info",
            `Run ${entry.id}: agent ${plan.agent.name}, autonomy ${plan.autonomy}, branch ${plan.branch} ` +
              `(${plan.newBranch ? "new, from" : "existing, work measured from"} ${entry.baseSha?.slice(0, 12) ?? "?"})`
          )
          log.append("debug", `Prompt: ${truncate(plan.prompt)}`)
          const parser = plan.executor.parser()
          entry.parser = parser
          const exit = yield* runProcess(entry, plan, log, parser)
          entry.phase = "finishing"
          appendAll(log, parser.flush())
          const outcome = decide(exit, entry.stop, plan.agent.settings.timeout_s)
          log.append(outcome.level, outcome.message)
          const results = yield* collect({
            log,
            worktreePath: entry.worktreePath,
            repoPath: plan.repoPath,
            baseSha: entry.baseSha ?? "",
            branch: plan.branch,
            message: commitMessage(
              entry.id,
              plan.agent.name,
              plan.task,
              outcome.status === "completed" ? "" : ` (${outcome.status}, unfinished)`,
              parser.finalText()
            )
          })
          const commitFailed = results.commitFailed && outcome.status === "completed"
          const status: RunStatus = commitFailed ? "failed" : outcome.status
          const error = commitFailed ? "the run's changes could not be committed" : outcome.error
          const usage = parser.usage()
          const output: RunOutput = {
            ...results.diff,
            ...(usage === null ? {} : { usage }),
            ...(results.commit === null ? {} : { commit: results.commit })
          }
          log.append(status === "completed" ? "info" : status === "stopped" ? "warn" : "error", `Run ${status}`)
          yield* log.close
          yield* finishRow(entry.id, plan.task.id, status, output, error)
        })
      ).pipe(
        // A bug or a store that stayed away: end the agent and record the run failed if we still can
        // (otherwise the next start-up's recovery does).
        Effect.catchAllCause((cause) =>
          Effect.sync(() => {
            process.stderr.write(`[taskwright] supervising run ${entry.id} failed: ${cause}\n`)
            entry.handle?.stop(graceMs)
          }).pipe(
            Effect.zipRight(
              finishRow(entry.id, plan.task.id, "failed", emptyDiff, "the service failed to supervise the run")
            ),
            Effect.ignore
          )
        ),
        Effect.ensuring(release(entry)),
        Effect.uninterruptible
      )

    /** Checks, reserves a slot, creates the worktree, records the run and hands it to a supervisor. */
    const launch = fn("Runs.launch")(function* (
      task: TaskRow,
      agent: ResolvedAgent,
      autonomy: Autonomy,
      branch: string,
      feedback: string | null
    ) {
      const project = task.project_id === null ? undefined : yield* projects.get(task.project_id)
      if (project === undefined) {
        return yield* new BadRequest({
          message: `task ${task.id} has no project: give it a project whose path is a git repository`,
          details: { reason: "no_project" }
        })
      }
      if (!(yield* isGitRepository(project.path))) {
        return yield* new BadRequest({
          message: `the path of project ${project.id} is not the top of a git repository`,
          details: { reason: "not_a_git_repository", path: project.path }
        })
      }
      if (busyTasks.has(task.id) || (yield* tasksRepo.hasRunningRun(task.id))) return yield* taskBusy(task.id)

      const id = newRunId()
      const entry: ActiveRun = {
        id,
        taskId: task.id,
        worktreePath: join(worktreesDir, id),
        baseSha: null,
        phase: "starting",
        handle: null,
        parser: null,
        stop: null,
        live: null,
        done: yield* Deferred.make<void>()
      }
      // Check and reserve with no yield in between: two requests cannot both take the last slot.
      const refused = yield* Effect.sync(() => {
        if (busyTasks.has(task.id)) return "task_busy" as const
        if (active.size >= config.maxRuns) return "capacity" as const
        active.set(entry.id, entry)
        busyTasks.add(task.id)
        return null
      })
      if (refused === "task_busy") return yield* taskBusy(task.id)
      if (refused === "capacity") {
        return yield* new Conflict({
          message: `${config.maxRuns} agent runs are already running, the most this service runs at once; try again when one ends`,
          details: { reason: "capacity", max_runs: config.maxRuns }
        })
      }

      return yield* Effect.gen(function* () {
        yield* Effect.promise(() => mkdir(worktreesDir, { recursive: true }))
        const created = yield* createWorktree({
          repoPath: project.path,
          worktreePath: entry.worktreePath,
          branch
        }).pipe(Effect.mapError(worktreeError(branch)))
        entry.baseSha = created.baseSha
        const startedAt = now()
        const row: RunRow = {
          id: entry.id,
          task_id: task.id,
          owner_id: task.owner_id,
          agent: agent.name,
          autonomy,
          branch,
          status: "running",
          started_at: startedAt,
          completed_at: null,
          output: "{}",
          repo_path: project.path,
          worktree_path: entry.worktreePath,
          base_sha: created.baseSha,
          pid: null,
          error: null
        }
        yield* repo
          .transaction(Effect.zipRight(repo.insert(row), repo.setTaskStatus(task.id, "in_progress", startedAt)))
          .pipe(
            Effect.catchTag(
              "StoreError",
              (e): Effect.Effect<never, Conflict | StoreError> =>
                Effect.fail(e.kind === "unique" ? taskBusy(task.id) : e)
            ),
            Effect.tapError(() =>
              Effect.ignore(removeWorktree({ repoPath: project.path, worktreePath: entry.worktreePath }))
            )
          )
        fork(
          supervise(entry, {
            agent,
            executor: executorFor(agent.kind),
            autonomy,
            branch,
            prompt: buildPrompt(task, feedback),
            task: { id: task.id, title: task.title },
            repoPath: project.path,
            newBranch: created.created
          })
        )
        return {
          run_id: entry.id,
          task_id: task.id,
          agent: agent.name,
          status: "running",
          started_at: startedAt,
          branch,
          autonomy
        } satisfies RunStarted
      }).pipe(
        Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : release(entry))),
        // A client that goes away must not leave a run recorded `running` with no supervisor.
        Effect.uninterruptible
      )
    })

    /** The figures of a running run so far, from git (reused for a second). */
    const liveOutput = (id: RunId) =>
      Effect.gen(function* () {
        const entry = active.get(id)
        if (entry === undefined || entry.baseSha === null || entry.phase === "starting") return emptyDiff
        const cached = entry.live
        if (cached !== null && Date.now() - cached.at < LIVE_OUTPUT_TTL_MS) return cached.output
        const diff = yield* diffStats({ worktreePath: entry.worktreePath, baseSha: entry.baseSha }).pipe(
          Effect.orElseSucceed(() => cached?.output ?? emptyDiff)
        )
        const usage = entry.parser?.usage() ?? null
        const output: RunOutput = { ...diff, ...(usage === null ? {} : { usage }) }
        entry.live = { at: Date.now(), output }
        return output
      })

    /** Marks a run a dead service left `running` as failed, after ending its leftovers and saving its work. */
    const recoverOne = (row: RunRow) =>
      Effect.scoped(
        Effect.gen(function* () {
          const last = yield* repo.lastLog(row.id)
          const log = yield* openLog(row.id, (last?.seq ?? 0) + 1, last === undefined ? 0 : Date.parse(last.timestamp))
          log.append(
            "error",
            "The service stopped without finishing this run (it was killed or crashed); the run is marked failed"
          )
          if (row.pid !== null) {
            const pid = row.pid
            if (yield* Effect.promise(() => killLeftoverGroup(pid, row.id, graceMs))) {
              log.append("warn", `Ended the agent's leftover processes (process group ${pid})`)
            }
          }
          let output = parseOutput(row.output)
          if (
            row.worktree_path !== null &&
            row.repo_path !== null &&
            row.base_sha !== null &&
            existsSync(row.worktree_path)
          ) {
            const results = yield* collect({
              log,
              worktreePath: row.worktree_path,
              repoPath: row.repo_path,
              baseSha: row.base_sha,
              branch: row.branch,
              message: commitMessage(
                row.id,
                row.agent,
                { id: row.task_id, title: `Task #${row.task_id}` },
                " (interrupted, unfinished)",
                null
              )
            })
            output = { ...output, ...results.diff, ...(results.commit === null ? {} : { commit: results.commit }) }
          }
          log.append("error", "Run failed")
          yield* log.close
          yield* finishRow(row.id, row.task_id, "failed", output, "the service stopped while the run was in progress")
        })
      )

    // On shutdown every run is stopped and its work committed before the store closes
    // (this finalizer runs before the fiber set's, and the store's layer outlives this one).
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        const entries = [...active.values()]
        for (const entry of entries) {
          if (entry.phase === "finishing") continue
          entry.stop ??= { kind: "shutdown", by: null }
          entry.handle?.stop(graceMs)
        }
        yield* Effect.forEach(entries, (entry) => Deferred.await(entry.done), {
          concurrency: "unbounded",
          discard: true
        }).pipe(Effect.timeout(graceMs + 120_000), Effect.ignore)
      })
    )

    return {
      /** `POST /api/tasks/:id/run`. */
      start: fn("Runs.start")(function* (actor: Actor, taskId: TaskId, input: RunStart) {
        const agent = yield* agents.resolve(input.agent)
        const task = yield* tasks.load(actor, taskId)
        return yield* launch(
          task,
          agent,
          input.autonomy ?? agent.settings.autonomy,
          input.branch ?? defaultBranch(task.id),
          null
        )
      }),

      /**
       * A follow-up of the task's latest run (same agent, branch and autonomy) whose prompt
       * carries a reviewer's comment; null when the task never ran.
       */
      followUp: fn("Runs.followUp")(function* (task: TaskRow, comment: string) {
        const previous = yield* repo.latestForTask(task.id)
        if (previous === undefined) return null
        const agent = yield* agents.resolve(previous.agent)
        return yield* launch(task, agent, previous.autonomy, previous.branch, comment)
      }),

      /** `GET /api/runs/:run_id`: figures so far while it runs, final once it ended. */
      get: fn("Runs.get")(function* (actor: Actor, id: RunId) {
        const row = yield* loadRun(actor, id)
        return toRun(row, row.status === "running" ? yield* liveOutput(id) : parseOutput(row.output))
      }),

      /** `GET /api/runs/:run_id/logs`. */
      logs: fn("Runs.logs")(function* (actor: Actor, id: RunId, params: RunLogsParams) {
        yield* loadRun(actor, id)
        const logs = yield* repo.logs(id, { after: params.after ?? 0, since: params.since, limit: params.limit })
        return { logs } satisfies RunLogs
      }),

      /** `POST /api/runs/:run_id/stop`: ends the agent's process group and answers once the run is recorded stopped. */
      stop: fn("Runs.stop")(function* (actor: Actor, id: RunId) {
        const row = yield* loadRun(actor, id)
        if (row.status !== "running") return yield* runEnded(row)
        const entry = active.get(id)
        if (entry === undefined) {
          return yield* new Conflict({
            message: `run ${id} is not supervised by this service process`,
            details: { reason: "not_supervised" }
          })
        }
        if (entry.phase !== "finishing") {
          entry.stop ??= { kind: "user", by: actor.userId }
          entry.handle?.stop(graceMs)
        }
        yield* Deferred.await(entry.done)
        const final = yield* repo.get(id)
        if (final === undefined) return yield* NotFound.of("run", id)
        if (final.status !== "stopped") return yield* runEnded(final)
        return toRun(final, parseOutput(final.output))
      }),

      /** Start-up: runs left `running` by a previous process become `failed`. Answers how many. */
      recover: Effect.gen(function* () {
        let recovered = 0
        for (const row of yield* repo.running) {
          if (active.has(row.id)) continue
          yield* recoverOne(row)
          recovered += 1
        }
        return recovered
      }).pipe(Effect.withSpan("Runs.recover")),

      /** Runs this process supervises right now. */
      activeCount: Effect.sync(() => active.size)
    }
  })
}) {}
