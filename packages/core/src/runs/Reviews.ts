/**
 * Reviews of a task in `in_review`: `approve` → `done`, `reject` → `backlog`,
 * `request_changes` → `in_progress`, and with a comment a follow-up run of the same agent on the
 * same branch whose prompt carries the comment. The status change is conditional on the task
 * still being in review, so two reviews racing each other cannot both land.
 */
import { Effect } from "effect"
import type { Actor } from "../auth/Actor.js"
import { Conflict } from "../domain/Errors.js"
import type { TaskId } from "../domain/Ids.js"
import { now } from "../domain/Timestamp.js"
import { fn } from "../domain/Traced.js"
import type { TaskStatus } from "../tasks/Task.js"
import { Tasks } from "../tasks/Tasks.js"
import { newReviewId, type ReviewAction, type ReviewCreate, type ReviewResult } from "./Review.js"
import { Runs } from "./Runs.js"
import { RunsRepo } from "./RunsRepo.js"

const nextStatus: Record<ReviewAction, TaskStatus> = {
  approve: "done",
  reject: "backlog",
  request_changes: "in_progress"
}

const notInReview = (taskId: TaskId, status: string) =>
  new Conflict({
    message: `task ${taskId} is ${status}; only a task in_review can be reviewed`,
    details: { reason: "not_in_review", status }
  })

export class Reviews extends Effect.Service<Reviews>()("@taskwright/core/Reviews", {
  effect: Effect.gen(function* () {
    const tasks = yield* Tasks
    const runs = yield* Runs
    const repo = yield* RunsRepo

    return {
      /** `POST /api/tasks/:id/review`. */
      review: fn("Reviews.review")(function* (actor: Actor, taskId: TaskId, input: ReviewCreate) {
        const task = yield* tasks.load(actor, taskId)
        if (task.status !== "in_review") return yield* notInReview(task.id, task.status)
        const comment = input.comment === undefined || input.comment.trim() === "" ? null : input.comment
        const status = nextStatus[input.action]
        const review = {
          id: newReviewId(),
          action: input.action,
          comment,
          reviewer: actor.userId,
          created_at: now()
        }
        const claimed = yield* repo.transaction(
          Effect.gen(function* () {
            if (!(yield* repo.reviewTransition(task.id, status, review.created_at))) return false
            yield* repo.insertReview({ ...review, task_id: task.id, run_id: null })
            return true
          })
        )
        if (!claimed) {
          const current = yield* tasks.load(actor, taskId)
          return yield* notInReview(task.id, current.status)
        }
        let runId: ReviewResult["run_id"] = null
        if (input.action === "request_changes" && comment !== null) {
          const started = yield* runs
            .followUp(task, comment)
            .pipe(Effect.tapError(() => repo.undoReview(review.id, task.id, status, now())))
          if (started !== null) {
            runId = started.run_id
            yield* repo.setReviewRun(review.id, started.run_id)
          }
        }
        return { task: yield* tasks.get(actor, taskId), review, run_id: runId } satisfies ReviewResult
      })
    }
  })
}) {}
