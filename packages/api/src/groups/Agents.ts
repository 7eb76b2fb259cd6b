import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { AgentDetail, AgentList, AgentName, AgentUpdate } from "@taskwright/domain"
import { Schema } from "effect"
import { ErrorExamples, fieldExample, invalidJsonExample } from "../Documentation.js"
import { ForbiddenError, RequestErrors } from "../Errors.js"
import { Authentication, RequiredScope } from "../Security.js"

const AgentPath = Schema.Struct({ name: AgentName })

/** Agent configuration (`<data dir>/agents.json`). */
export class AgentsGroup extends HttpApiGroup.make("agents")
  .add(
    HttpApiEndpoint.get("list", "/api/agents")
      .addSuccess(AgentList)
      .annotate(RequiredScope, "agents:run")
      .annotate(ErrorExamples, { 400: [invalidJsonExample] })
      .annotate(OpenApi.Summary, "List agents")
      .annotate(
        OpenApi.Description,
        "Each configured agent: whether it is enabled, its model, autonomy and timeout, never its command line or environment. Needs agents:run."
      )
  )
  .add(
    HttpApiEndpoint.put("update", "/api/agents/:name")
      .setPath(AgentPath)
      .setPayload(AgentUpdate)
      .addSuccess(AgentDetail)
      .annotate(RequiredScope, "admin")
      .annotate(ErrorExamples, {
        400: [fieldExample("An unknown field", "timeout_seconds", "timeout_seconds is not a field of this request")]
      })
      .annotate(OpenApi.Summary, "Configure an agent")
      .annotate(
        OpenApi.Description,
        "Changes the settings sent (null puts command, env, timeout_s, max_log_bytes, credentials or read_only_paths back to the default) and answers the agent with its command and the names of its variables, never their values. A name other than the built-in claude-code, codex, gemini and command creates a further command agent. Needs admin."
      )
  )
  .middleware(Authentication)
  .addError(RequestErrors)
  .addError(ForbiddenError)
  .annotate(OpenApi.Description, "Agents: which AI coding agents can run, and how (admins configure them).") {}
