import { useId, useState } from "preact/hooks"
import { ApiError, api } from "../api.js"
import {
  Empty,
  ErrorState,
  Field,
  FieldError,
  FormActions,
  fieldError,
  Loading,
  lazy,
  notify,
  Options,
  refuse,
  useSubmit,
  useTitle
} from "../components.js"
import { agents } from "../resources.js"
import { type Agent, AUTONOMIES, type Autonomy } from "../types.js"

/** The API's bounds on `timeout_s`: a second to a week. */
const TIMEOUT_MAX_S = 7 * 24 * 3600
const timeoutRule = lazy(() => `a whole number of seconds from 1 to ${TIMEOUT_MAX_S.toLocaleString("en")}`)

/** The timeout as typed, or the message that refuses it (an empty field is not "0"). */
const parseTimeout = (text: string): number | string => {
  const trimmed = text.trim()
  if (trimmed === "") return `Enter the timeout: ${timeoutRule()}.`
  const n = Number(trimmed)
  return /^[0-9]+$/.test(trimmed) && n >= 1 && n <= TIMEOUT_MAX_S ? n : `The timeout must be ${timeoutRule()}.`
}

const AgentForm = ({ name, agent }: { readonly name: string; readonly agent: Agent }) => {
  const id = useId()
  const [enabled, setEnabled] = useState(agent.enabled)
  const [model, setModel] = useState(agent.model)
  const [autonomy, setAutonomy] = useState<Autonomy>(agent.autonomy)
  const [timeout, setTimeoutS] = useState(String(agent.timeout_s))
  const { busy, error, onSubmit } = useSubmit(async () => {
    const timeoutS = parseTimeout(timeout)
    if (typeof timeoutS === "string") throw refuse("timeout_s", timeoutS)
    // Only what changed: the API keeps every setting not sent.
    await api("PUT", `/api/agents/${encodeURIComponent(name)}`, {
      ...(enabled === agent.enabled ? {} : { enabled }),
      ...(model === agent.model ? {} : { model }),
      ...(autonomy === agent.autonomy ? {} : { autonomy }),
      ...(timeoutS === agent.timeout_s ? {} : { timeout_s: timeoutS })
    })
    await agents.reload()
    notify(`Saved ${name}.`)
  })
  const changed =
    enabled !== agent.enabled ||
    model !== agent.model ||
    autonomy !== agent.autonomy ||
    timeout.trim() !== String(agent.timeout_s)
  const enabledError = fieldError(error, "enabled")
  const autonomyError = fieldError(error, "autonomy")
  return (
    <form class="panel form agent" noValidate onSubmit={onSubmit}>
      <fieldset disabled={busy}>
        <legend>
          {name} <span class={enabled ? "badge badge-completed" : "badge badge-stopped"}>{enabled ? "On" : "Off"}</span>
        </legend>
        <label class="check">
          <input
            type="checkbox"
            checked={enabled}
            onChange={(e) => setEnabled(e.currentTarget.checked)}
            aria-invalid={enabledError !== undefined ? true : undefined}
            aria-describedby={enabledError === undefined ? undefined : `${id}-enabled-error`}
          />
          Enabled
        </label>
        <FieldError id={`${id}-enabled-error`} message={enabledError} />
        <div class="form-row">
          <Field
            label="Model"
            value={model}
            onInput={(e) => setModel(e.currentTarget.value)}
            error={fieldError(error, "model")}
            autoComplete="off"
          />
          <div class="field">
            <label for={`${id}-autonomy`}>Autonomy</label>
            <select
              id={`${id}-autonomy`}
              value={autonomy}
              onChange={(e) => setAutonomy(e.currentTarget.value as Autonomy)}
              aria-invalid={autonomyError !== undefined ? true : undefined}
              aria-describedby={autonomyError === undefined ? undefined : `${id}-autonomy-error`}
            >
              <Options values={AUTONOMIES} />
            </select>
            <FieldError id={`${id}-autonomy-error`} message={autonomyError} />
          </div>
          <Field
            label="Timeout (seconds)"
            type="number"
            min={1}
            max={TIMEOUT_MAX_S}
            step={1}
            inputMode="numeric"
            value={timeout}
            onInput={(e) => setTimeoutS(e.currentTarget.value)}
            error={fieldError(error, "timeout_s")}
          />
        </div>
        <FormActions
          error={error}
          fields={["enabled", "model", "autonomy", "timeout_s"]}
          busy={busy || !changed}
          submit={`Save ${name}`}
        />
      </fieldset>
    </form>
  )
}

/** What a signed-in person who is not an administrator sees of an agent: its settings, as text. */
const AgentFacts = ({ name, agent }: { readonly name: string; readonly agent: Agent }) => (
  <section class="panel agent" aria-label={name}>
    <h2 class="agent-name">
      {name}{" "}
      <span class={agent.enabled ? "badge badge-completed" : "badge badge-stopped"}>
        {agent.enabled ? "On" : "Off"}
      </span>
    </h2>
    <dl class="facts facts-inline">
      <div>
        <dt>Model</dt>
        <dd>{agent.model}</dd>
      </div>
      <div>
        <dt>Autonomy</dt>
        <dd>{agent.autonomy}</dd>
      </div>
      <div>
        <dt>Timeout</dt>
        <dd>{agent.timeout_s.toLocaleString()} s</dd>
      </div>
    </dl>
  </section>
)

/** The configured agents; administrators change them (`PUT /api/agents/:name`). */
export const AgentsScreen = ({ admin }: { readonly admin: boolean }) => {
  useTitle("Agents")
  const list = agents.use()
  const entries = Object.entries(list.value ?? {}).sort(([a], [b]) => a.localeCompare(b))
  return (
    <div class="page">
      <div class="toolbar">
        <h1 tabIndex={-1}>Agents</h1>
      </div>
      {admin ? (
        <p class="lead">
          The coding agents runs can use. A command agent's command line and environment are set in agents.json or with
          PUT /api/agents/:name.
        </p>
      ) : (
        <div class="state state-empty" role="note">
          <p class="state-title">Only administrators change agents.</p>
          <p>This is what runs can use. Ask an administrator to enable an agent or change its settings.</p>
        </div>
      )}
      {list.error !== undefined && !(list.error instanceof ApiError && list.error.status === 403 && !admin) && (
        <ErrorState error={list.error} onRetry={() => void list.reload()} />
      )}
      {list.value === undefined && list.error === undefined && <Loading label="Loading agents…" />}
      {list.value !== undefined && entries.length === 0 && <Empty title="No agent is configured." />}
      <div class="agents">
        {entries.map(([name, a]) =>
          admin ? (
            <AgentForm key={`${name}:${JSON.stringify(a)}`} name={name} agent={a} />
          ) : (
            <AgentFacts key={name} name={name} agent={a} />
          )
        )}
      </div>
    </div>
  )
}
