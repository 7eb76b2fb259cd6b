import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { ReviewCreate, ReviewResult } from "@taskwright/core"
import { ConflictError, NotFoundError } from "../Errors.js"
import { Authentication, RequiredScope } from "../Security.js"
import { TaskPath } from "./Tasks.js"

/** Reviews of a task's work. */
export class ReviewsGroup extends HttpApiGroup.make("reviews")
  .add(
    HttpApiEndpoint.post("review", "/api/tasks/:id/review")
      .setPath(TaskPath)
      .setPayload(ReviewCreate)
      .addSuccess(ReviewResult)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(RequiredScope, "tasks:write")
      .annotate(
        OpenApi.Summary,
        "Review a task in_review: approve → done, reject → backlog, request_changes → in_progress (with a comment, a follow-up run)"
      )
  )
  .middleware(Authentication) {}
