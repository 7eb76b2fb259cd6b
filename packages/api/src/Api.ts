/**
 * The Taskwright HTTP contract: one `HttpApi` shared by the server, the typed client, the
 * in-process API and the tests. Each domain's group lives in `groups/`; the OpenAPI document is
 * generated from this, and from nothing else.
 */
import { HttpApi, OpenApi } from "@effect/platform"
import { documentApi } from "./Documentation.js"
import { errorDescriptions } from "./Errors.js"
import { AgentsGroup } from "./groups/Agents.js"
import { AuthGroup } from "./groups/Auth.js"
import { KeysGroup } from "./groups/Keys.js"
import { LabelsGroup } from "./groups/Labels.js"
import { ProjectsGroup } from "./groups/Projects.js"
import { ReviewsGroup } from "./groups/Reviews.js"
import { RunsGroup } from "./groups/Runs.js"
import { SystemGroup } from "./groups/System.js"
import { TasksGroup } from "./groups/Tasks.js"

const groups = [
  SystemGroup,
  TasksGroup,
  ProjectsGroup,
  LabelsGroup,
  AuthGroup,
  KeysGroup,
  RunsGroup,
  ReviewsGroup,
  AgentsGroup
] as const

const description = `Tasks, projects and labels with AI coding agents attached: start an agent on a task in a git worktree, follow its log, review its work.

**Authentication.** Send an API key or an access token as \`Authorization: Bearer <credential>\`, or the \`service_session\` cookie that \`POST /api/auth/login\` sets. Each endpoint needs a scope (\`tasks:read\`, \`tasks:write\`, \`projects:read\`, \`projects:write\`, \`agents:run\`, \`admin\`); \`admin\` implies them all.

**Errors.** Every error is \`{"error":{"code","message","details"}}\`, with \`details\` always present. A request that does not decode is a 400 whose \`details.fields\` lists each offending field with a message in words and the bounds it broke. The checks run in this order: authentication (401), the endpoint's scope (403), the request (400), existence (404), ownership (403), state (409).

**Rate limits.** 1000 requests a minute per credential, 10 a minute per client address without one. Every answer says where the budget stands in \`X-RateLimit-Limit\`, \`X-RateLimit-Remaining\` and \`X-RateLimit-Reset\`; a 429 also carries \`Retry-After\`.

**HTTP.** A path called with a method it does not have answers 405 with \`Allow\`; \`OPTIONS\` answers 204 with \`Allow\`; every GET answers \`HEAD\`. Bodies are JSON (\`Content-Type: application/json\`), at most 1 MiB.`

/**
 * Where the API is: the origin that serves the document. `x-internal: false` says the API is meant
 * for its users, not only for the service's own board.
 */
const thisService: OpenApi.OpenAPISpecServer & { readonly "x-internal": boolean } = {
  url: "/",
  description:
    "This service: the origin that serves this document, from a local deployment (http://127.0.0.1:3000) to production behind HTTPS.",
  "x-internal": false
}

/** The whole contract. Each group declares the errors its endpoints can answer. */
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
  .annotate(OpenApi.Title, "Taskwright")
  .annotate(OpenApi.Summary, "Tasks and AI coding agents, over a JSON REST API.")
  .annotate(OpenApi.Description, description)
  .annotate(OpenApi.License, { name: "MIT", url: "https://opensource.org/licenses/MIT" })
  .annotate(OpenApi.Servers, [thisService])
  .annotate(
    OpenApi.Transform,
    documentApi({
      groups,
      // No public address is set up for the project yet; the maintainers are reached where it is hosted.
      contact: { name: "Taskwright maintainers" },
      badRequest: errorDescriptions.BadRequest.description
    })
  ) {}
