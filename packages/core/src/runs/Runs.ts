/**
 * Agent runs: start an agent on a task in a git worktree of the task's project, supervise its
 * process (in a sandbox, see `Sandbox.ts`, unless the operator turned that off), store its output
 * as log entries, commit its work on the run's branch, and record how it ended. Also the reads (a
 * run with its figures so far, pages of its log), stop, recovery of runs a dead service left
 * `running`, and a clean stop of every run when the service shuts down.
 *
 * A run is `running`, then `completed` (exit 0: the task moves to `in_review`), `failed`
 * (non-zero exit, timeout, crash, or the service going away) or `stopped` (`POST .../stop`).
 * Starting one moves the task to `in_progress`; `failed` and `stopped` leave it there.
 *
 * At most `maxRuns` runs at once in this service process; at most one running run per task (the
 * store enforces that too, across processes). Several processes may share a store: each keeps
 * the heartbeat of the runs it supervises, stops them when asked through another process, and
 * recovers only orphans, runs whose supervisor is gone (`Supervision.ts`).
 *
 * A review run (`startReview`) reads a commit of another repository instead: a new task, a clone
 * at that commit checked out read-only, an agent that answers rather than edits, and at the end
 * no commit: its answer becomes `output.review` (see `reviews/`), and the clone is removed.
 */

import { existsSync } from "node:fs"
import { mkdir } from "node:fs/promises"
import { basename, dirname, join, resolve } from "node:path"
import {
  type Actor,
  type Autonomy,
  BadRequest,
  type Conflict,
  decoder,
  type EventDraft,
  NotFound,
  newRunId,
  now,
  type RunId,
  type RunLogs,
  RunLogsParams,
  type RunOutput,
  type RunReview,
  RunStart,
  type RunStarted,
  type RunStatus,
  ServiceUnavailable,
  type TaskId
} from "@taskwright/domain"
import { Deferred, Effect, Either, Exit, FiberSet, Option, Schedule } from "effect"
import { type LogDraft, type LogLevel, type StreamParser, truncate } from "../agents/AgentStreams.js"
import { Agents, type ResolvedAgent } from "../agents/Agents.js"
import { type AgentExecutor, executorFor } from "../agents/Executors.js"
import { authorizeOwned } from "../auth/Policy.js"
import { TaskwrightConfig } from "../Config.js"
import { fn } from "../domain/Traced.js"
import { Events } from "../events/Events.js"
import { Projects } from "../projects/Projects.js"
import { ProjectsRepo } from "../projects/ProjectsRepo.js"
import type { StoreError } from "../store/Store.js"
import { taskUpdated } from "../tasks/TaskEvents.js"
import { Tasks } from "../tasks/Tasks.js"
import { type TaskRow, TasksRepo, toCreatedTask } from "../tasks/TasksRepo.js"
import { type AgentHandle, buildAgentEnv, DEFAULT_GRACE_MS, spawnAgent } from "./AgentProcess.js"
import {
  type ClonedCommit,
  cloneAtCommit,
  commitAll,
  createWorktree,
  diffStats,
  isGitRepository,
  removeClone,
  removeWorktree
} from "./GitWorkspace.js"
import { killLeftoverGroup } from "./ProcessGroups.js"
import { makeRunLog, type RunLog } from "./RunLog.js"
import {
  buildPrompt,
  COMMIT_AUTHOR,
  capacityFull,
  cloneError,
  commitMessage,
  decide,
  defaultBranch,
  emptyDiff,
  notStarted,
  type Outcome,
  parseOutput,
  promptForEnv,
  runEnded,
  type StopRequest,
  taskBusy,
  toRun,
  worktreeError
} from "./RunRules.js"
import { type RunRow, RunsRepo } from "./RunsRepo.js"
import { prepareSandbox, probeSandbox, removeSandbox, type SandboxProbe, type SandboxStatus } from "./Sandbox.js"
import {
  HEARTBEAT_MS,
  isOrphan,
  makeSupervisor,
  onThisMachine,
  STOP_POLL_MS,
  type Supervisor,
  SWEEP_MS
} from "./Supervision.js"

export { buildPrompt, COMMIT_AUTHOR, defaultBranch, parseOutput } from "./RunRules.js"

/** How long the figures of a running run are reused before git is asked again. */
const LIVE_OUTPUT_TTL_MS = 1_000

/**
 * How a review run's answer becomes its review: called once the agent exited 0 with its final
 * answer, the run's id, and `note` for the run's log. Fails with the reason when the answer is not
 * a review (the run is then `failed` with that reason).
 */
export type ReviewConcluder = (
  answer: string | null,
  run: { readonly id: RunId; readonly note: (level: LogLevel, message: string) => void }
) => Effect.Effect<RunReview, { readonly reason: string }>

/** What a review run is made of: its task, the agent and its prompt, the commit it reads, and how it concludes. */
export interface ReviewRunRequest {
  /** The new task's title and description; the task is the caller's, in no project. */
  readonly title: string
  readonly description: string
  readonly agent: ResolvedAgent
  readonly prompt: string
  /** The branch the run shows (the commit is checked out detached). */
  readonly branch: string
  /** Where the commit is cloned from (checked with `validateGitUrl`). */
  readonly cloneUrl: string
  readonly commit: string
  readonly conclude: ReviewConcluder
}

/** A run this service process supervises. */
interface ActiveRun {
  readonly id: RunId
  readonly taskId: TaskId
  /** The task's owner, who owns the run and receives its events. */
  readonly ownerId: string
  readonly repoPath: string
  readonly worktreePath: string
  baseSha: string | null
  phase: "starting" | "running" | "finishing"
  handle: AgentHandle | null
  /** False from the agent's start until none of its processes is left. */
  agentGone: boolean
  parser: StreamParser | null
  stop: StopRequest | null
  live: { readonly at: number; readonly output: RunOutput } | null
  readonly done: Deferred.Deferred<void>
  /** A review run's clone and worktree, removed when it ends; null for a task's run. */
  readonly checkout: ClonedCommit | null
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
  readonly sandbox: SandboxProbe
  /** A review run: its worktree is read-only, nothing is committed, and its answer is concluded. */
  readonly review: { readonly conclude: ReviewConcluder } | null
}

/** How a run ends, as its row records it. */
interface Ending {
  readonly status: RunStatus
  readonly output: RunOutput
  readonly error: string | null
}

const appendAll = (log: RunLog, drafts: ReadonlyArray<LogDraft>): void => {
  for (const d of drafts) log.append(d.level, d.message)
}

const decodeStart = decoder(RunStart, "body")
const decodeLogs = decoder(RunLogsParams, "query")

export class Runs extends Effect.Service<Runs>()("@taskwright/core/Runs", {
  scoped: Effect.gen(function* () {
    const repo = yield* RunsRepo
    const tasks = yield* Tasks
    const tasksRepo = yield* TasksRepo
    const projects = yield* ProjectsRepo
    const projectRules = yield* Projects
    const agents = yield* Agents
    const config = yield* TaskwrightConfig
    const events = yield* Events
    const graceMs = DEFAULT_GRACE_MS
    const worktreesDir = join(config.dataDir, "worktrees")
    // Review runs' clones; nothing else lives here, which is how recovery tells a review run.
    const reviewsDir = join(config.dataDir, "reviews")
    // Probed once, on first use: whether runs can be sandboxed on this host.
    const sandbox = yield* Effect.cached(probeSandbox(config.sandbox ?? "auto"))
    // Supervisors run on the service's own runtime, not the request's: they outlive it.
    const fork = yield* FiberSet.makeRuntime<never>()
    const active = new Map<RunId, ActiveRun>()
    const busyTasks = new Set<TaskId>()
    // This process's name on the runs it supervises.
    const me: Supervisor = yield* Effect.sync(makeSupervisor)
    // Review runs being prepared (cloning): they hold a slot before they are in `active`.
    let reserved = 0
    const slotsInUse = () => active.size + reserved

    /** Runs can be contained on this host (or the operator turned the sandbox off): the probe, else 503. */
    const admit = Effect.flatMap(sandbox, (contained) =>
      contained.mode === "unavailable"
        ? Effect.fail(
            new ServiceUnavailable({
              message: `agent runs are refused: ${contained.detail}`,
              details: { reason: "sandbox_unavailable" }
            })
          )
        : Effect.succeed(contained)
    )

    /** A run about to start, not yet supervised. */
    const newEntry = (
      fields: Pick<ActiveRun, "id" | "taskId" | "ownerId" | "repoPath" | "worktreePath" | "baseSha" | "checkout">
    ) =>
      Effect.map(
        Deferred.make<void>(),
        (done): ActiveRun => ({
          ...fields,
          phase: "starting",
          handle: null,
          agentGone: true,
          parser: null,
          stop: null,
          live: null,
          done
        })
      )

    const release = (entry: ActiveRun) =>
      Effect.sync(() => {
        active.delete(entry.id)
        busyTasks.delete(entry.taskId)
      }).pipe(Effect.zipRight(Deferred.succeed(entry.done, undefined)))

    const loadRun = (actor: Actor, id: RunId) =>
      Effect.flatMap(repo.get(id), (row) => authorizeOwned(actor, "run", id, row))

    const openLog = (
      runId: RunId,
      ownerId: string,
      firstSeq: number,
      notBefore: number,
      onPressure?: (high: boolean) => void
    ) =>
      makeRunLog({
        firstSeq,
        notBefore,
        // Each batch of lines and its `run.log` events: two statements, one transaction.
        write: (entries) => {
          if (entries.length === 0) return Effect.void
          const json = JSON.stringify(entries)
          return repo.transaction(
            Effect.zipRight(repo.insertLogsJson(runId, json), events.appendLogs(ownerId, runId, json))
          )
        },
        transaction: repo.transaction,
        ...(onPressure === undefined ? {} : { onPressure })
      })

    /** Records how a run ended (and moves a completed run's task to review); retried, the store may blink. */
    const finishRow = (runId: RunId, taskId: TaskId, status: RunStatus, output: RunOutput, error: string | null) =>
      repo
        .transaction(
          Effect.gen(function* () {
            const at = now()
            const ended = yield* repo.finish(runId, {
              status,
              completedAt: at,
              output: JSON.stringify(output),
              error
            })
            if (ended === undefined) return
            const task = status === "completed" ? yield* repo.setTaskStatus(taskId, "in_review", at) : undefined
            yield* events.append(
              [
                {
                  type: `run.${status}` as EventDraft["type"],
                  ownerId: ended.owner_id,
                  runId,
                  data: toRun(ended, output)
                },
                ...(task === undefined ? [] : [taskUpdated(task)])
              ],
              at
            )
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
            repoPath: options.repoPath,
            worktreePath: options.worktreePath,
            message: options.message,
            authorName: COMMIT_AUTHOR.name,
            authorEmail: COMMIT_AUTHOR.email
          })
        )
        const refused = Either.isRight(committed) ? committed.right.refused : []
        for (const path of refused) log.append("warn", `Not committed: ${path.path}, ${path.reason}`)
        const commit = Either.isRight(committed) ? committed.right.sha : null
        if (Either.isLeft(committed)) {
          log.append("error", `Could not commit the run's changes: ${committed.left.message}`)
        } else if (commit === null) {
          log.append("info", "No changes to commit")
        } else {
          log.append("info", `Committed ${commit.slice(0, 12)} on branch ${options.branch}`)
        }
        const diff = yield* diffStats({
          repoPath: options.repoPath,
          worktreePath: options.worktreePath,
          baseSha: options.baseSha
        }).pipe(
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
          // What was refused goes with the worktree: it was never the run's work to keep.
          const removed = yield* Effect.either(
            removeWorktree({
              repoPath: options.repoPath,
              worktreePath: options.worktreePath,
              discard: refused.map((path) => path.path)
            })
          )
          if (Either.isLeft(removed)) log.append("warn", `Could not remove the worktree: ${removed.left.message}`)
          else if (removed.right === "dirty")
            log.append("warn", `The worktree still has changes; kept at ${options.worktreePath}`)
        }
        return { commitFailed: Either.isLeft(committed), commit, diff }
      })

    /**
     * The sandbox of a run: every project's directory and the projects root are hidden besides
     * the data directory; null (with the reason in the log) when it cannot be prepared.
     */
    const sandboxFor = (entry: ActiveRun, plan: Plan, program: string, bwrap: string, log: RunLog) =>
      Effect.gen(function* () {
        const projectPaths = yield* repo.projectPaths
        const prepared = yield* prepareSandbox({
          bwrap,
          runId: entry.id,
          dataDir: config.dataDir,
          repoPath: plan.repoPath,
          worktreePath: entry.worktreePath,
          branch: plan.branch,
          hidden: [...Option.toArray(config.projectsRoot), ...projectPaths],
          program,
          commandFiles: plan.agent.settings.command ?? [],
          credentials: plan.agent.settings.credentials,
          readOnlyPaths: plan.agent.settings.read_only_paths,
          env: process.env,
          readOnlyWorktree: plan.review !== null
        })
        for (const note of prepared.notes) log.append("warn", note)
        log.append(
          "info",
          `Sandboxed with bubblewrap: ${plan.review === null ? "writable are the worktree, " : "the worktree is read-only; writable are "}` +
            "a private git directory, HOME and /tmp" +
            `${plan.agent.settings.credentials.length > 0 ? ", and the configured credentials" : ""}; the network is shared`
        )
        return prepared
      }).pipe(
        Effect.catchAll((error) =>
          Effect.sync(() => {
            log.append("error", `Could not prepare the sandbox: ${error.message}`)
            return null
          })
        )
      )

    /** Starts the agent's process and waits until it and everything it started are gone. */
    const runProcess = (entry: ActiveRun, plan: Plan, log: RunLog, parser: StreamParser) =>
      Effect.gen(function* () {
        if (entry.stop !== null) return notStarted
        const { settings } = plan.agent
        const launch = plan.executor.launch({ settings, autonomy: plan.autonomy, prompt: plan.prompt })
        const [program, ...args] = launch.argv
        if (program === undefined)
          return { ...notStarted, reason: "spawn_error", error: "no command is configured" } as const
        const bwrap = plan.sandbox.bwrap
        const sandboxed = bwrap === null ? null : yield* sandboxFor(entry, plan, program, bwrap, log)
        if (bwrap !== null && sandboxed === null) {
          return { ...notStarted, reason: "spawn_error", error: "the sandbox could not be prepared" } as const
        }
        const env = buildAgentEnv(process.env, {
          ...settings.env,
          ...launch.env,
          TASKWRIGHT_PROMPT: promptForEnv(plan.prompt),
          TASKWRIGHT_TASK_ID: String(plan.task.id),
          TASKWRIGHT_RUN_ID: entry.id,
          TASKWRIGHT_BRANCH: plan.branch,
          ...sandboxed?.env
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
          },
          ...(sandboxed === null ? {} : { sandbox: sandboxed.spawn })
        })
        entry.handle = handle
        entry.agentGone = handle.pid === null
        entry.phase = "running"
        const pid = handle.pid
        if (pid !== null) {
          log.append(
            "info",
            `Started ${basename(program)}${sandboxed === null ? "" : " in its sandbox"} (process group ${pid})`
          )
          // A stop that arrived while the process was being started.
          if (entry.stop !== null) handle.stop(graceMs)
          yield* Effect.ignore(repo.setPid(entry.id, pid))
        }
        const exit = yield* Effect.promise(() => handle.exit)
        entry.agentGone = yield* Effect.promise(() => handle.gone(graceMs + 2_000))
        if (!entry.agentGone) {
          log.append("warn", `Processes of the agent (process group ${pid}) are still alive after SIGKILL`)
        }
        return exit
      })

    /** The end of a task's run: its work committed on the branch and measured against the base. */
    const endTaskRun = (entry: ActiveRun, plan: Plan, log: RunLog, parser: StreamParser, outcome: Outcome) =>
      Effect.gen(function* () {
        const results = yield* collect({
          log,
          worktreePath: entry.worktreePath,
          repoPath: entry.repoPath,
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
        if (entry.agentGone) yield* removeSandbox(config.dataDir, entry.id)
        const commitFailed = results.commitFailed && outcome.status === "completed"
        const usage = parser.usage()
        return {
          status: commitFailed ? "failed" : outcome.status,
          output: {
            ...results.diff,
            ...(usage === null ? {} : { usage }),
            ...(results.commit === null ? {} : { commit: results.commit })
          },
          error: commitFailed ? "the run's changes could not be committed" : outcome.error
        } satisfies Ending
      })

    /**
     * The end of a review run: nothing is committed; the checkout is removed (once none of the
     * agent's processes is left: until then the supervisor's last step does it), and a completed
     * run's answer is concluded into `output.review`, or fails the run with the reason.
     */
    const endReviewRun = (
      entry: ActiveRun,
      conclude: ReviewConcluder,
      log: RunLog,
      parser: StreamParser,
      outcome: Outcome
    ) =>
      Effect.gen(function* () {
        if (entry.agentGone) {
          if (entry.checkout !== null) yield* removeClone(entry.checkout)
          yield* removeSandbox(config.dataDir, entry.id)
          log.append("info", "Removed the review's checkout; nothing is committed for a review")
        }
        const usage = parser.usage()
        const output: RunOutput = { ...emptyDiff, ...(usage === null ? {} : { usage }) }
        if (outcome.status !== "completed")
          return { status: outcome.status, output, error: outcome.error } satisfies Ending
        const concluded = yield* Effect.either(
          conclude(parser.finalText(), { id: entry.id, note: (level, message) => log.append(level, message) })
        )
        if (Either.isLeft(concluded)) {
          const reason = concluded.left.reason
          log.append("error", `No review: ${reason}`)
          return { status: "failed", output, error: reason } satisfies Ending
        }
        return { status: "completed", output: { ...output, review: concluded.right }, error: null } satisfies Ending
      })

    /** The whole life of a started run, on its own fiber; never fails. */
    const supervise = (entry: ActiveRun, plan: Plan) =>
      Effect.scoped(
        Effect.gen(function* () {
          // A store slower than the agent's output pauses reading its pipes (the agent then blocks on
          // write) instead of buffering without bound.
          const log = yield* openLog(entry.id, entry.ownerId, 1, 0, (high) =>
            high ? entry.handle?.pause() : entry.handle?.resume()
          )
          log.append(
            "info",
            plan.review === null
              ? `Run ${entry.id}: agent ${plan.agent.name}, autonomy ${plan.autonomy}, branch ${plan.branch} ` +
                  `(${plan.newBranch ? "new, from" : "existing, work measured from"} ${entry.baseSha?.slice(0, 12) ?? "?"})`
              : `Review run ${entry.id}: agent ${plan.agent.name}, autonomy ${plan.autonomy}, ` +
                  `commit ${entry.baseSha?.slice(0, 12) ?? "?"} of ${plan.branch} checked out read-only`
          )
          log.append("debug", `Prompt: ${truncate(plan.prompt)}`)
          const parser = plan.executor.parser()
          entry.parser = parser
          const exit = yield* runProcess(entry, plan, log, parser)
          entry.phase = "finishing"
          appendAll(log, parser.flush())
          const outcome = decide(exit, entry.stop, plan.agent.settings.timeout_s)
          log.append(outcome.level, outcome.message)
          const ending =
            plan.review === null
              ? yield* endTaskRun(entry, plan, log, parser, outcome)
              : yield* endReviewRun(entry, plan.review.conclude, log, parser, outcome)
          log.append(
            ending.status === "completed" ? "info" : ending.status === "stopped" ? "warn" : "error",
            `Run ${ending.status}`
          )
          yield* log.close
          yield* finishRow(entry.id, plan.task.id, ending.status, ending.output, ending.error)
        })
      ).pipe(
        // A bug or a store that stayed away: end the agent and record the run failed if we still can
        // (otherwise the next start-up's recovery does).
        Effect.catchAllCause((cause) =>
          Effect.logError(`supervising run ${entry.id} failed`, cause).pipe(
            Effect.zipRight(Effect.sync(() => entry.handle?.stop(graceMs))),
            Effect.zipRight(
              finishRow(entry.id, plan.task.id, "failed", emptyDiff, "the service failed to supervise the run")
            ),
            Effect.ignore
          )
        ),
        // Released first: the run is over once its row says so (the private directories are only
        // left-overs). They are removed only once no process of the agent is left: a live agent
        // could swap a directory for a symlink under the recursive removal and point it anywhere.
        Effect.ensuring(
          Effect.zipRight(
            release(entry),
            Effect.promise(() => entry.handle?.gone(graceMs + 2_000) ?? Promise.resolve(true)).pipe(
              Effect.flatMap((gone) =>
                gone
                  ? Effect.zipRight(
                      removeSandbox(config.dataDir, entry.id),
                      entry.checkout === null ? Effect.void : removeClone(entry.checkout)
                    )
                  : Effect.void
              )
            )
          )
        ),
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
      // Where the worktree and branch would be written: the project's own repository, or refused.
      const dirs = yield* projectRules.repositoryFor(project)
      if (busyTasks.has(task.id) || (yield* tasksRepo.hasRunningRun(task.id))) return yield* taskBusy(task.id)
      const contained = yield* admit

      const id = newRunId()
      const entry = yield* newEntry({
        id,
        taskId: task.id,
        ownerId: task.owner_id,
        repoPath: project.path,
        worktreePath: join(worktreesDir, id),
        baseSha: null,
        checkout: null
      })
      // Check and reserve with no yield in between: two requests cannot both take the last slot.
      const refused = yield* Effect.sync(() => {
        if (busyTasks.has(task.id)) return "task_busy" as const
        if (slotsInUse() >= config.maxRuns) return "capacity" as const
        active.set(entry.id, entry)
        busyTasks.add(task.id)
        return null
      })
      if (refused === "task_busy") return yield* taskBusy(task.id)
      if (refused === "capacity") return yield* capacityFull(config.maxRuns)

      return yield* Effect.gen(function* () {
        yield* Effect.promise(() => mkdir(worktreesDir, { recursive: true }))
        const created = yield* createWorktree({
          repoPath: project.path,
          worktreePath: entry.worktreePath,
          branch,
          dirs
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
          error: null,
          supervisor: me.id,
          heartbeat_at: startedAt
        }
        yield* repo
          .transaction(
            Effect.gen(function* () {
              yield* repo.insert(row)
              const moved = yield* repo.setTaskStatus(task.id, "in_progress", startedAt)
              yield* events.append(
                [
                  { type: "run.started", ownerId: row.owner_id, runId: row.id, data: toRun(row, emptyDiff) },
                  ...(moved === undefined ? [] : [taskUpdated(moved)])
                ],
                startedAt
              )
            })
          )
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
            newBranch: created.created,
            sandbox: contained,
            review: null
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
        if (entry.checkout !== null) {
          // A review changes nothing: only what the agent used so far.
          const usage = entry.parser?.usage() ?? null
          return usage === null ? emptyDiff : { ...emptyDiff, usage }
        }
        const cached = entry.live
        if (cached !== null && Date.now() - cached.at < LIVE_OUTPUT_TTL_MS) return cached.output
        const diff = yield* diffStats({
          repoPath: entry.repoPath,
          worktreePath: entry.worktreePath,
          baseSha: entry.baseSha
        }).pipe(Effect.orElseSucceed(() => cached?.output ?? emptyDiff))
        const usage = entry.parser?.usage() ?? null
        const output: RunOutput = { ...diff, ...(usage === null ? {} : { usage }) }
        entry.live = { at: Date.now(), output }
        return output
      })

    /** A review run's clone and worktree, from its row: its repository is a clone under `<data dir>/reviews`. */
    const reviewCheckout = (row: RunRow): ClonedCommit | null =>
      row.repo_path !== null && row.worktree_path !== null && dirname(resolve(row.repo_path)) === resolve(reviewsDir)
        ? { clonePath: row.repo_path, worktreePath: row.worktree_path }
        : null

    /** Marks a run a dead service process left `running` as failed, after ending its leftovers and saving its work. */
    const recoverOne = (row: RunRow) =>
      Effect.scoped(
        Effect.gen(function* () {
          const last = yield* repo.lastLog(row.id)
          const log = yield* openLog(
            row.id,
            row.owner_id,
            (last?.seq ?? 0) + 1,
            last === undefined ? 0 : Date.parse(last.timestamp)
          )
          log.append(
            "error",
            "The service stopped without finishing this run (it was killed or crashed); the run is marked failed"
          )
          if (row.pid !== null && onThisMachine(me, row.supervisor)) {
            const pid = row.pid
            if (yield* Effect.promise(() => killLeftoverGroup(pid, row.id, graceMs))) {
              log.append("warn", `Ended the agent's leftover processes (process group ${pid})`)
            }
          } else if (row.pid !== null) {
            log.append("warn", "The agent ran on another machine; its processes there are not ended from here")
          }
          let output = parseOutput(row.output)
          const review = reviewCheckout(row)
          if (review !== null) {
            yield* removeClone(review)
            log.append("info", "Removed the review's checkout")
          } else if (
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
          yield* removeSandbox(config.dataDir, row.id)
          log.append("error", "Run failed")
          yield* log.close
          yield* finishRow(row.id, row.task_id, "failed", output, "the service stopped while the run was in progress")
        })
      )

    /**
     * Recovers the running runs whose supervisor is gone (never one this process supervises),
     * each taken over first so that no two processes recover the same run. Answers how many.
     */
    const recoverOrphans = (only?: RunId) =>
      Effect.gen(function* () {
        let recovered = 0
        for (const row of yield* repo.running) {
          if ((only !== undefined && row.id !== only) || active.has(row.id) || !isOrphan(me, row, Date.now())) continue
          if (!(yield* repo.claim(row, me.id, now()))) continue
          yield* recoverOne(row)
          recovered += 1
        }
        return recovered
      })

    /**
     * This process's side of sharing the store: every second, the stops asked for through
     * another process; every few seconds, its runs' heartbeat (a run the store no longer says it
     * supervises was taken over: its agent is stopped) and the orphans of processes that died.
     * A store that is away only delays these.
     */
    const tick = (count: number) =>
      Effect.gen(function* () {
        if (active.size > 0) {
          for (const request of yield* repo.stopRequests(me.id)) {
            const entry = active.get(request.id)
            if (entry === undefined || entry.phase === "finishing") continue
            entry.stop ??= { kind: "user", by: request.stop_requested }
            entry.handle?.stop(graceMs)
          }
          if (count % (HEARTBEAT_MS / STOP_POLL_MS) === 0) {
            const mine = yield* repo.heartbeat(me.id, now())
            for (const entry of active.values()) {
              if (entry.phase !== "running" || mine.has(entry.id)) continue
              entry.stop ??= { kind: "taken_over", by: null }
              entry.handle?.stop(graceMs)
            }
          }
        }
        if (count % (SWEEP_MS / STOP_POLL_MS) === 0) {
          const recovered = yield* recoverOrphans()
          if (recovered > 0) {
            yield* Effect.logWarning(`marked ${recovered} run(s) failed whose service process is gone`)
          }
        }
      }).pipe(Effect.ignore)
    let ticks = 0

    /**
     * Stops a run another process supervises: the request goes through the store, its supervisor
     * stops the agent within a second and records the run; answers once it has. A supervisor that
     * is gone meanwhile: the run is recovered (failed) here. 503 when neither happens in time.
     */
    const stopElsewhere = (actor: Actor, row: RunRow) =>
      Effect.gen(function* () {
        const deadline = Date.now() + graceMs + 30_000
        if (!(yield* repo.requestStop(row.id, actor.userId))) {
          const ended = yield* repo.get(row.id)
          if (ended === undefined) return yield* NotFound.of("run", row.id)
          return yield* runEnded(ended)
        }
        while (Date.now() < deadline) {
          yield* Effect.sleep("200 millis")
          const current = yield* repo.get(row.id)
          if (current === undefined) return yield* NotFound.of("run", row.id)
          if (current.status === "stopped") return toRun(current, parseOutput(current.output))
          if (current.status !== "running") return yield* runEnded(current)
          if (isOrphan(me, current, Date.now())) yield* recoverOrphans(row.id)
        }
        return yield* new ServiceUnavailable({
          message: `the service process supervising run ${row.id} did not stop it in time; it will when it can`,
          details: { reason: "supervisor_unresponsive" }
        })
      })
    yield* Effect.forkScoped(
      Effect.repeat(
        Effect.suspend(() => tick(++ticks)),
        Schedule.spaced(`${STOP_POLL_MS} millis`)
      )
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
      /** `POST /api/tasks/:id/run`; `body` as a client sends it ({@link RunStart}). */
      start: fn("Runs.start")(function* (actor: Actor, taskId: TaskId, body: unknown) {
        const input = yield* decodeStart(body)
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
       * Whether a run could start now: runs can be contained on this host (503 otherwise) and a
       * slot is free (409 `capacity` otherwise). For callers with costly work to do first; the
       * start itself checks again.
       */
      admission: Effect.gen(function* () {
        yield* admit
        if (slotsInUse() >= config.maxRuns) return yield* capacityFull(config.maxRuns)
      }),

      /**
       * Starts a review run: reserves a slot, clones `cloneUrl` and checks `commit` out read-only
       * in the run's worktree, then records a new task of the caller's (no project, `in_progress`)
       * and the run in one transaction, and hands it to a supervisor. No commit is made at the end;
       * the clone is removed and the agent's answer concluded into `output.review`.
       */
      startReview: fn("Runs.startReview")(function* (actor: Actor, request: ReviewRunRequest) {
        const contained = yield* admit
        const refused = yield* Effect.sync(() => {
          if (slotsInUse() >= config.maxRuns) return true
          reserved += 1
          return false
        })
        if (refused) return yield* capacityFull(config.maxRuns)
        const id = newRunId()
        return yield* Effect.gen(function* () {
          yield* Effect.promise(() =>
            Promise.all([mkdir(worktreesDir, { recursive: true }), mkdir(reviewsDir, { recursive: true })])
          )
          const checkout = yield* cloneAtCommit({
            url: request.cloneUrl,
            clonePath: join(reviewsDir, id),
            worktreePath: join(worktreesDir, id),
            commit: request.commit
          }).pipe(Effect.mapError(cloneError(request.cloneUrl, request.commit)))
          const autonomy: Autonomy = "read-only"
          const startedAt = now()
          const task = {
            owner_id: actor.userId,
            project_id: null,
            title: request.title,
            description: request.description,
            status: "in_progress",
            priority: "medium",
            labels: "[]",
            created_at: startedAt,
            updated_at: startedAt
          } satisfies Omit<TaskRow, "id">
          const row = yield* repo
            .transaction(
              Effect.gen(function* () {
                const taskId = yield* tasksRepo.unit(() => tasksRepo.insert(task))
                const row: RunRow = {
                  id,
                  task_id: taskId,
                  owner_id: actor.userId,
                  agent: request.agent.name,
                  autonomy,
                  branch: request.branch,
                  status: "running",
                  started_at: startedAt,
                  completed_at: null,
                  output: "{}",
                  repo_path: checkout.clonePath,
                  worktree_path: checkout.worktreePath,
                  base_sha: request.commit,
                  pid: null,
                  error: null,
                  supervisor: me.id,
                  heartbeat_at: startedAt
                }
                yield* repo.insert(row)
                yield* events.append(
                  [
                    { type: "task.created", ownerId: actor.userId, data: toCreatedTask({ ...task, id: taskId }) },
                    { type: "run.started", ownerId: actor.userId, runId: id, data: toRun(row, emptyDiff) }
                  ],
                  startedAt
                )
                return row
              })
            )
            .pipe(Effect.tapError(() => removeClone(checkout)))
          const entry = yield* newEntry({
            id,
            taskId: row.task_id,
            ownerId: actor.userId,
            repoPath: checkout.clonePath,
            worktreePath: checkout.worktreePath,
            baseSha: request.commit,
            checkout
          })
          yield* Effect.sync(() => {
            active.set(id, entry)
            busyTasks.add(row.task_id)
            reserved -= 1
          })
          fork(
            supervise(entry, {
              agent: request.agent,
              executor: executorFor(request.agent.kind),
              autonomy,
              branch: request.branch,
              prompt: request.prompt,
              task: { id: row.task_id, title: request.title },
              repoPath: checkout.clonePath,
              newBranch: false,
              sandbox: contained,
              review: { conclude: request.conclude }
            })
          )
          return {
            run_id: id,
            task_id: row.task_id,
            agent: request.agent.name,
            status: "running",
            started_at: startedAt,
            branch: request.branch,
            autonomy
          } satisfies RunStarted
        }).pipe(
          // The slot goes back unless the run took it over.
          Effect.onExit((exit) =>
            Exit.isSuccess(exit)
              ? Effect.void
              : Effect.sync(() => {
                  reserved -= 1
                })
          ),
          // A client that goes away must not leave a run recorded `running` with no supervisor.
          Effect.uninterruptible
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
      /** `GET /api/runs/:run_id/logs`; `query` as a client sends it ({@link RunLogsParams}). */
      logs: fn("Runs.logs")(function* (actor: Actor, id: RunId, query: unknown) {
        const params = yield* decodeLogs(query)
        yield* loadRun(actor, id)
        const logs = yield* repo.logs(id, { after: params.after ?? 0, since: params.since, limit: params.limit })
        return { logs } satisfies RunLogs
      }),

      /** `POST /api/runs/:run_id/stop`: ends the agent's process group and answers once the run is recorded stopped. */
      stop: fn("Runs.stop")(function* (actor: Actor, id: RunId) {
        const row = yield* loadRun(actor, id)
        if (row.status !== "running") return yield* runEnded(row)
        const entry = active.get(id)
        if (entry === undefined) return yield* stopElsewhere(actor, row)
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

      /**
       * Start-up: runs left `running` by a process that is gone become `failed` (a live process's
       * runs, on this machine or another, are left to it). Answers how many.
       */
      recover: recoverOrphans().pipe(Effect.withSpan("Runs.recover")),

      /** Runs this process supervises right now. */
      activeCount: Effect.sync(() => active.size),

      /**
       * How agent runs are contained on this host (probed once): `bwrap` (sandboxed), `off`
       * (`TASKWRIGHT_SANDBOX=off`) or `unavailable` (runs are refused with 503), and a sentence
       * saying why and, when refused, how to fix it. For a host to print at start.
       */
      sandboxStatus: Effect.map(sandbox, ({ mode, detail }): SandboxStatus => ({ mode, detail }))
    }
  })
}) {}
