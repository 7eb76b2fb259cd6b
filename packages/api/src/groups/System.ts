import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { Unmetered } from "../Documentation.js"
import { ServiceUnavailableError } from "../Errors.js"
import { RequiredScope } from "../Security.js"

/** Unauthenticated endpoints. */
export class SystemGroup extends HttpApiGroup.make("system")
  .add(
    HttpApiEndpoint.get("health", "/api/health")
      .addSuccess(
        Schema.Struct({ status: Schema.Literal("ok") }).annotations({
          description: "The service and its store answer.",
          examples: [{ status: "ok" }]
        })
      )
      .addError(ServiceUnavailableError)
      .annotate(Unmetered, true)
      .annotate(OpenApi.Summary, "Check liveness")
      .annotate(
        OpenApi.Description,
        "200 once the store answers, 503 while it cannot be reached. Needs no credential and spends no rate-limit budget, so load balancers and monitors can call it as often as they like."
      )
  )
  .annotate(RequiredScope, "public")
  .annotate(OpenApi.Description, "The service itself: is it up.") {}
