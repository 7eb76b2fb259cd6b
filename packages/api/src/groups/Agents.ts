import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { AgentDetail, AgentList, AgentName, AgentUpdate } from "@taskwright/core"
import { Schema } from "effect"
import { Authentication, RequiredScope } from "../Security.js"

const AgentPath = Schema.Struct({ name: AgentName })

/** Agent configuration (`<data dir>/agents.json`). */
export class AgentsGroup extends HttpApiGroup.make("agents")
  .add(
    HttpApiEndpoint.get("list", "/api/agents")
      .addSuccess(AgentList)
      .annotate(RequiredScope, "agents:run")
      .annotate(OpenApi.Summary, "The configured agents: enabled, model, autonomy")
  )
  .add(
    HttpApiEndpoint.put("update", "/api/agents/:name")
      .setPath(AgentPath)
      .setPayload(AgentUpdate)
      .addSuccess(AgentDetail)
      .annotate(RequiredScope, "admin")
      .annotate(
        OpenApi.Summary,
        "Change one agent's settings (enabled, model, autonomy, command, env, timeout_s, max_log_bytes); a new name is a command agent"
      )
  )
  .middleware(Authentication) {}
