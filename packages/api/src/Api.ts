/**
 * The Taskwright HTTP contract: one `HttpApi` shared by the server, the typed client, the
 * in-process API and the tests. Each domain's group lives in `groups/`; the OpenAPI document is
 * generated from this.
 */
import { HttpApi, OpenApi } from "@effect/platform"
import {
  BadRequestError,
  ForbiddenError,
  InternalServerError,
  PayloadTooLargeError,
  RateLimitedError,
  UnauthorizedError
} from "./Errors.js"
import { AgentsGroup } from "./groups/Agents.js"
import { AuthGroup } from "./groups/Auth.js"
import { KeysGroup } from "./groups/Keys.js"
import { LabelsGroup } from "./groups/Labels.js"
import { ProjectsGroup } from "./groups/Projects.js"
import { ReviewsGroup } from "./groups/Reviews.js"
import { RunsGroup } from "./groups/Runs.js"
import { SystemGroup } from "./groups/System.js"
import { TasksGroup } from "./groups/Tasks.js"

/** The whole contract. Errors every endpoint may answer are declared once, here. */
export class TaskwrightApi extends HttpApi.make("taskwright")
  .add(SystemGroup)
  .add(TasksGroup)
  .add(ProjectsGroup)
  .add(LabelsGroup)
  .add(AuthGroup)
  .add(KeysGroup)
  .add(RunsGroup)
  .add(ReviewsGroup)
  .add(AgentsGroup)
  .addError(BadRequestError)
  .addError(UnauthorizedError)
  .addError(ForbiddenError)
  .addError(PayloadTooLargeError)
  .addError(RateLimitedError)
  .addError(InternalServerError)
  .annotate(OpenApi.Title, "Taskwright")
  .annotate(
    OpenApi.Description,
    "Tasks, projects and labels with AI coding agents attached. Every error is {error:{code,message,details}}."
  ) {}
