/**
 * Rows of runs, their log entries and task reviews, plus the task status changes a run makes.
 *
 * Log entries are written in batches: one statement inserts a whole batch passed as one JSON
 * array (`json_each` on SQLite, `json_array_elements` on PostgreSQL), so a chatty agent costs one
 * round trip per batch rather than one per line on either engine.
 */
import type { Autonomy, RunId, RunLogEntry, RunStatus, TaskId, TaskStatus, Timestamp } from "@taskwright/domain"
import { Effect } from "effect"
import { StoreTag, statement } from "../store/Store.js"
import { type TaskRow, taskColumns } from "../tasks/TasksRepo.js"

export interface RunRow {
  readonly id: RunId
  readonly task_id: TaskId
  readonly owner_id: string
  readonly agent: string
  readonly autonomy: Autonomy
  readonly branch: string
  readonly status: RunStatus
  readonly started_at: Timestamp
  readonly completed_at: Timestamp | null
  /** JSON of `RunOutput`. */
  readonly output: string
  readonly repo_path: string | null
  readonly worktree_path: string | null
  readonly base_sha: string | null
  readonly pid: number | null
  readonly error: string | null
  /** The service process supervising the run (see `Supervision.ts`); null on runs of older versions. */
  readonly supervisor: string | null
  /** When the supervisor last said it is alive. */
  readonly heartbeat_at: Timestamp | null
}

export interface ReviewRow {
  readonly id: string
  readonly task_id: TaskId
  readonly action: string
  readonly comment: string | null
  readonly reviewer: string
  readonly run_id: RunId | null
  readonly created_at: Timestamp
}

const runColumns =
  "id, task_id, owner_id, agent, autonomy, branch, status, started_at, completed_at, output, repo_path, worktree_path, base_sha, pid, error, supervisor, heartbeat_at"

const logColumns = "seq, timestamp, level, message"

const q = {
  get: statement<RunRow>("runs.get", `SELECT ${runColumns} FROM runs WHERE id = ?`),
  running: statement<RunRow>("runs.running", `SELECT ${runColumns} FROM runs WHERE status = 'running'`),
  latestForTask: statement<RunRow>(
    "runs.latestForTask",
    `SELECT ${runColumns} FROM runs WHERE task_id = ? ORDER BY started_at DESC, id DESC LIMIT 1`
  ),
  insert: statement(
    "runs.insert",
    `INSERT INTO runs (${runColumns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
  ),
  // One statement a beat: the heartbeat, and which of its runs the store still says it supervises.
  heartbeat: statement<{ id: RunId }>(
    "runs.heartbeat",
    "UPDATE runs SET heartbeat_at = ? WHERE supervisor = ? AND status = 'running' RETURNING id"
  ),
  stopRequests: statement<{ id: RunId; stop_requested: string }>(
    "runs.stopRequests",
    "SELECT id, stop_requested FROM runs WHERE supervisor = ? AND status = 'running' AND stop_requested IS NOT NULL"
  ),
  requestStop: statement(
    "runs.requestStop",
    "UPDATE runs SET stop_requested = COALESCE(stop_requested, ?) WHERE id = ? AND status = 'running'"
  ),
  // Taken only from the supervisor and heartbeat the taker saw: two processes never both take a run.
  claim: statement(
    "runs.claim",
    "UPDATE runs SET supervisor = ?, heartbeat_at = ? WHERE id = ? AND status = 'running' AND COALESCE(supervisor, '') = ? AND COALESCE(heartbeat_at, '') = ?"
  ),
  setPid: statement("runs.setPid", "UPDATE runs SET pid = ? WHERE id = ?"),
  finish: statement<RunRow>(
    "runs.finish",
    `UPDATE runs SET status = ?, completed_at = ?, output = ?, error = ?, pid = NULL WHERE id = ? AND status = 'running' RETURNING ${runColumns}`
  ),
  // `updated_at` never goes back in commit order (as a PATCH's); the row answered is the task's event.
  setTaskStatus: statement<TaskRow>(
    "runs.setTaskStatus",
    `UPDATE tasks SET status = ?, updated_at = MAX(?, updated_at) WHERE id = ? RETURNING ${taskColumns}`,
    `UPDATE tasks SET status = $1, updated_at = GREATEST($2, updated_at) WHERE id = $3 RETURNING ${taskColumns}`
  ),
  insertLogs: statement(
    "runs.insertLogs",
    "INSERT INTO run_logs (run_id, seq, timestamp, level, message) SELECT ?, value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(?)",
    "INSERT INTO run_logs (run_id, seq, timestamp, level, message) SELECT $1, (e ->> 0)::bigint, e ->> 1, e ->> 2, e ->> 3 FROM json_array_elements($2::json) AS e"
  ),
  // `seq <= after + limit` as well: a run's seqs are contiguous from 1, so the range holds the
  // page exactly, and no plan (PostgreSQL's included, with statistics not yet caught up with a
  // run that just wrote a million lines) can turn a page into a scan of the rest of the run.
  logsAfter: statement<RunLogEntry>(
    "runs.logsAfter",
    `SELECT ${logColumns} FROM run_logs WHERE run_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?`
  ),
  firstSince: statement<{ seq: number }>(
    "runs.firstSince",
    "SELECT seq FROM run_logs WHERE run_id = ? AND timestamp > ? ORDER BY timestamp, seq LIMIT 1"
  ),
  lastLog: statement<{ seq: number; timestamp: Timestamp }>(
    "runs.lastLog",
    "SELECT seq, timestamp FROM run_logs WHERE run_id = ? ORDER BY seq DESC LIMIT 1"
  ),
  reviewTransition: statement<TaskRow>(
    "reviews.transition",
    `UPDATE tasks SET status = ?, updated_at = MAX(?, updated_at) WHERE id = ? AND status = 'in_review' RETURNING ${taskColumns}`,
    `UPDATE tasks SET status = $1, updated_at = GREATEST($2, updated_at) WHERE id = $3 AND status = 'in_review' RETURNING ${taskColumns}`
  ),
  undoReviewTransition: statement<TaskRow>(
    "reviews.undoTransition",
    `UPDATE tasks SET status = 'in_review', updated_at = MAX(?, updated_at) WHERE id = ? AND status = ? RETURNING ${taskColumns}`,
    `UPDATE tasks SET status = 'in_review', updated_at = GREATEST($1, updated_at) WHERE id = $2 AND status = $3 RETURNING ${taskColumns}`
  ),
  deleteReview: statement("reviews.delete", "DELETE FROM reviews WHERE id = ?"),
  setReviewRun: statement("reviews.setRun", "UPDATE reviews SET run_id = ? WHERE id = ?"),
  projectPaths: statement<{ path: string }>("runs.projectPaths", "SELECT DISTINCT path FROM projects"),
  insertReview: statement(
    "reviews.insert",
    "INSERT INTO reviews (id, task_id, action, comment, reviewer, run_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
  )
}

/** A log entry in the JSON form the batch insert takes: `[seq, timestamp, level, message]`. */
export type LogTuple = readonly [number, string, string, string]

const toRunRow = (row: RunRow): RunRow => ({ ...row, task_id: Number(row.task_id) as TaskId })
const toEntry = (row: RunLogEntry): RunLogEntry => ({ ...row, seq: Number(row.seq) })

export class RunsRepo extends Effect.Service<RunsRepo>()("@taskwright/core/RunsRepo", {
  effect: Effect.gen(function* () {
    const store = yield* StoreTag
    const getRun = (id: string) =>
      Effect.map(store.get(q.get, [id]), (row) => (row === undefined ? row : toRunRow(row)))
    return {
      transaction: store.transaction,
      get: getRun,
      running: Effect.map(store.all(q.running), (rows) => rows.map(toRunRow)),
      latestForTask: (taskId: TaskId) =>
        Effect.map(store.get(q.latestForTask, [taskId]), (row) => (row === undefined ? row : toRunRow(row))),
      insert: (row: RunRow) =>
        store.run(q.insert, [
          row.id,
          row.task_id,
          row.owner_id,
          row.agent,
          row.autonomy,
          row.branch,
          row.status,
          row.started_at,
          row.completed_at,
          row.output,
          row.repo_path,
          row.worktree_path,
          row.base_sha,
          row.pid,
          row.error,
          row.supervisor,
          row.heartbeat_at
        ]),
      /** Refreshes the heartbeat of `supervisor`'s runs; answers the ids of those still running. */
      heartbeat: (supervisor: string, at: Timestamp) =>
        Effect.map(store.all(q.heartbeat, [at, supervisor]), (rows) => new Set(rows.map((row) => row.id))),
      /** `supervisor`'s running runs that a user asked (through another process) to stop, and who. */
      stopRequests: (supervisor: string) => store.all(q.stopRequests, [supervisor]),
      /** Asks the supervisor of a running run to stop it; false when the run is not running. */
      requestStop: (id: RunId, by: string) => Effect.map(store.run(q.requestStop, [by, id]), (n) => n > 0),
      /** Takes over an orphan as its row was read; false when another process changed it first. */
      claim: (row: RunRow, supervisor: string, at: Timestamp) =>
        Effect.map(
          store.run(q.claim, [supervisor, at, row.id, row.supervisor ?? "", row.heartbeat_at ?? ""]),
          (n) => n > 0
        ),
      setPid: (id: RunId, pid: number | null) => store.run(q.setPid, [pid, id]),
      /** Ends a running run; answers the ended row, or `undefined` when it had already ended. */
      finish: (id: RunId, end: { status: RunStatus; completedAt: Timestamp; output: string; error: string | null }) =>
        Effect.map(store.get(q.finish, [end.status, end.completedAt, end.output, end.error, id]), (row) =>
          row === undefined ? row : toRunRow(row)
        ),
      /** Moves a task to `status`; answers the task as stored, or `undefined` when it is gone. */
      setTaskStatus: (taskId: TaskId, status: TaskStatus, at: Timestamp) =>
        Effect.map(store.get(q.setTaskStatus, [status, at, taskId]), (row) =>
          row === undefined ? row : { ...row, id: Number(row.id) as TaskId }
        ),
      /** Inserts log entries (already sanitised, seq increasing) in one statement. */
      insertLogs: (runId: RunId, entries: ReadonlyArray<LogTuple>) =>
        entries.length === 0 ? Effect.succeed(0) : store.run(q.insertLogs, [runId, JSON.stringify(entries)]),
      /** {@link insertLogs} of entries already as JSON (`[[seq, timestamp, level, message], ...]`). */
      insertLogsJson: (runId: RunId, entries: string) => store.run(q.insertLogs, [runId, entries]),
      /** A page of log entries, oldest first: `seq > after` and, when given, `timestamp > since`. */
      logs: (runId: RunId, page: { after: number; since: Timestamp | undefined; limit: number }) =>
        Effect.gen(function* () {
          let after = page.after
          if (page.since !== undefined) {
            // Timestamps never decrease along seq within a run (RunLog sees to it), so the entries
            // after `since` are exactly those from the first one on.
            const first = yield* store.get(q.firstSince, [runId, page.since])
            if (first === undefined) return []
            after = Math.max(after, Number(first.seq) - 1)
          }
          return (yield* store.all(q.logsAfter, [runId, after, after + page.limit, page.limit])).map(toEntry)
        }),
      lastLog: (runId: RunId) =>
        Effect.map(store.get(q.lastLog, [runId]), (row) =>
          row === undefined ? undefined : { seq: Number(row.seq), timestamp: row.timestamp }
        ),
      /** Moves a task out of `in_review`; answers the task, or `undefined` when it was not (or no longer) in review. */
      reviewTransition: (taskId: TaskId, status: TaskStatus, at: Timestamp) =>
        Effect.map(store.get(q.reviewTransition, [status, at, taskId]), (row) =>
          row === undefined ? row : { ...row, id: Number(row.id) as TaskId }
        ),
      /** Takes a review back (its follow-up run could not start); answers the task back in review, if it moved. */
      undoReview: (reviewId: string, taskId: TaskId, status: TaskStatus, at: Timestamp) =>
        Effect.zipRight(
          store.run(q.deleteReview, [reviewId]),
          Effect.map(store.get(q.undoReviewTransition, [at, taskId, status]), (row) =>
            row === undefined ? row : { ...row, id: Number(row.id) as TaskId }
          )
        ),
      /** Every project's directory: what a sandboxed agent must not see (but its own project's objects). */
      projectPaths: Effect.map(store.all(q.projectPaths), (rows) => rows.map((row) => row.path)),
      setReviewRun: (reviewId: string, runId: RunId) => store.run(q.setReviewRun, [runId, reviewId]),
      insertReview: (row: ReviewRow) =>
        store.run(q.insertReview, [
          row.id,
          row.task_id,
          row.action,
          row.comment,
          row.reviewer,
          row.run_id,
          row.created_at
        ])
    }
  })
}) {}
