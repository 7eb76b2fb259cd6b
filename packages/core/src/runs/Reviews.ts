/**
 * Reviews of a task in `in_review`: `approve` → `done`, `reject` → `backlog`,
 * `request_changes` → `in_progress`, and with a comment a follow-up run of the same agent on the
 * same branch whose prompt carries the comment. The status change is conditional on the task
 * still being in review, so two reviews racing each other cannot both land.
 *
 * And agent reviews of GitHub pull requests (`pullRequest`, see `reviews/PullRequestReviews.ts`).
 */
import {
  type Actor,
  Conflict,
  decoder,
  newReviewId,
  now,
  type ReviewAction,
  ReviewCreate,
  type ReviewResult,
  type TaskId,
  type TaskStatus
} from "@taskwright/domain"
import { Effect } from "effect"
import { fn } from "../domain/Traced.js"
import { Events } from "../events/Events.js"
import { makePullRequestReviews } from "../reviews/PullRequestReviews.js"
import { taskUpdated } from "../tasks/TaskEvents.js"
import { Tasks } from "../tasks/Tasks.js"
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

const decodeReview = decoder(ReviewCreate, "body")

export class Reviews extends Effect.Service<Reviews>()("@taskwright/core/Reviews", {
  effect: Effect.gen(function* () {
    const tasks = yield* Tasks
    const runs = yield* Runs
    const repo = yield* RunsRepo
    const events = yield* Events
    const pullRequest = yield* makePullRequestReviews

    return {
      /**
       * `POST /api/review/pr`; `body` as a client sends it (`PullRequestReviewCreate`): a
       * read-only review run of the agent on the pull request's head, on a new task of the caller's.
       */
      pullRequest,

      /** `POST /api/tasks/:id/review`. */
      /** `POST /api/tasks/:id/review`; `body` as a client sends it ({@link ReviewCreate}). */
      review: fn("Reviews.review")(function* (actor: Actor, taskId: TaskId, body: unknown) {
        const input = yield* decodeReview(body)
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
        const created = {
          type: "review.created",
          ownerId: task.owner_id,
          data: { ...review, task_id: task.id }
        } as const
        // A review with a follow-up run stands only once the run has started (it is undone when the
        // run cannot start): its event is appended then, so an undone review leaves none.
        const followUp = input.action === "request_changes" && comment !== null
        const claimed = yield* repo.transaction(
          Effect.gen(function* () {
            const moved = yield* repo.reviewTransition(task.id, status, review.created_at)
            if (moved === undefined) return false
            yield* repo.insertReview({ ...review, task_id: task.id, run_id: null })
            yield* events.append(followUp ? [taskUpdated(moved)] : [created, taskUpdated(moved)], review.created_at)
            return true
          })
        )
        if (!claimed) {
          const current = yield* tasks.load(actor, taskId)
          return yield* notInReview(task.id, current.status)
        }
        let runId: ReviewResult["run_id"] = null
        if (followUp) {
          const started = yield* runs.followUp(task, comment).pipe(
            Effect.tapError(() =>
              repo.transaction(
                Effect.gen(function* () {
                  const at = now()
                  const back = yield* repo.undoReview(review.id, task.id, status, at)
                  if (back !== undefined) yield* events.append([taskUpdated(back)], at)
                })
              )
            )
          )
          if (started !== null) runId = started.run_id
          yield* repo.transaction(
            Effect.gen(function* () {
              if (started !== null) yield* repo.setReviewRun(review.id, started.run_id)
              yield* events.append([created], review.created_at)
            })
          )
        }
        return { task: yield* tasks.get(actor, taskId), review, run_id: runId } satisfies ReviewResult
      })
    }
  })
}) {}
