/** Reviews of a task's work: the request, the stored review and the answer. */
import { Schema } from "effect"
import { RunId, randomBase62 } from "../domain/Ids.js"
import { Timestamp } from "../domain/Timestamp.js"
import { Task } from "../tasks/Task.js"

export const ReviewAction = Schema.Literal("approve", "reject", "request_changes")
export type ReviewAction = typeof ReviewAction.Type

/** `rev_` + 16 base62 characters. */
export const ReviewId = Schema.String.pipe(
  Schema.pattern(/^rev_[0-9A-Za-z]{16}$/, { message: () => "must look like rev_ followed by 16 letters or digits" }),
  Schema.brand("ReviewId")
)
export type ReviewId = typeof ReviewId.Type

export const newReviewId = (): ReviewId => ReviewId.make(`rev_${randomBase62(16)}`)

/** `POST /api/tasks/:id/review`. */
export const ReviewCreate = Schema.Struct({
  action: ReviewAction,
  comment: Schema.optional(
    Schema.String.pipe(Schema.maxLength(20_000, { message: () => "comment must be at most 20,000 characters" }))
  )
})
export type ReviewCreate = typeof ReviewCreate.Type

export const Review = Schema.Struct({
  id: ReviewId,
  action: ReviewAction,
  comment: Schema.NullOr(Schema.String),
  /** The reviewing user's id. */
  reviewer: Schema.String,
  created_at: Timestamp
})
export type Review = typeof Review.Type

/** The answer: the task after the review, the review, and the follow-up run a change request started. */
export const ReviewResult = Schema.Struct({
  task: Task,
  review: Review,
  run_id: Schema.NullOr(RunId)
})
export type ReviewResult = typeof ReviewResult.Type
