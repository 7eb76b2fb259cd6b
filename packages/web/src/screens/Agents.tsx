import { useId, useState } from "preact/hooks"
import { api, messageOf } from "../api.js"
import { Empty, ErrorState, Loading, notify, Options, useSubmit, useTitle } from "../components.js"
import { agents } from "../resources.js"
import { type Agent, AUTONOMIES, type Autonomy } from "../types.js"

const AgentForm = ({
  name,
  agent,
  admin
}: {
  readonly name: string
  readonly agent: Agent
  readonly admin: boolean
}) => {
  const id = useId()
  const [enabled, setEnabled] = useState(agent.enabled)
  const [model, setModel] = useState(agent.model)
  const [autonomy, setAutonomy] = useState<Autonomy>(agent.autonomy)
  const [timeout, setTimeoutS] = useState(String(agent.timeout_s))
  const { busy, error, onSubmit } = useSubmit(async () => {
    await api("PUT", `/api/agents/${encodeURIComponent(name)}`, {
      enabled,
      model,
      autonomy,
      timeout_s: Number(timeout)
    })
    await agents.reload()
    notify(`Saved ${name}.`)
  })
  const changed =
    enabled !== agent.enabled ||
    model !== agent.model ||
    autonomy !== agent.autonomy ||
    timeout !== String(agent.timeout_s)
  return (
    <form class="panel form agent" noValidate onSubmit={onSubmit}>
      <fieldset disabled={!admin || busy}>
        <legend>
          {name} <span class={enabled ? "badge badge-completed" : "badge badge-stopped"}>{enabled ? "On" : "Off"}</span>
        </legend>
        <label class="check">
          <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.currentTarget.checked)} />
          Enabled
        </label>
        <div class="form-row">
          <div class="field">
            <label for={`${id}-model`}>Model</label>
            <input
              id={`${id}-model`}
              value={model}
              onInput={(e) => setModel(e.currentTarget.value)}
              autoComplete="off"
            />
          </div>
          <div class="field">
            <label for={`${id}-autonomy`}>Autonomy</label>
            <select
              id={`${id}-autonomy`}
              value={autonomy}
              onChange={(e) => setAutonomy(e.currentTarget.value as Autonomy)}
            >
              <Options values={AUTONOMIES} />
            </select>
          </div>
          <div class="field">
            <label for={`${id}-timeout`}>Timeout (seconds)</label>
            <input
              id={`${id}-timeout`}
              type="number"
              min={1}
              inputMode="numeric"
              value={timeout}
              onInput={(e) => setTimeoutS(e.currentTarget.value)}
            />
          </div>
        </div>
        {error !== undefined && (
          <p class="form-error" role="alert">
            {messageOf(error)}
          </p>
        )}
        {admin && (
          <div class="actions">
            <button type="submit" class="button button-primary" disabled={!changed || busy}>
              Save {name}
            </button>
          </div>
        )}
      </fieldset>
    </form>
  )
}

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
      <p class="lead">
        {admin
          ? "The coding agents runs can use. A command agent's command line and environment are set in agents.json or with PUT /api/agents/:name."
          : "Agents are configured by administrators; this is what runs can use."}
      </p>
      {list.error !== undefined && <ErrorState error={list.error} onRetry={() => void list.reload()} />}
      {list.value === undefined && list.error === undefined && <Loading label="Loading agents…" />}
      {list.value !== undefined && entries.length === 0 && <Empty title="No agent is configured." />}
      <div class="agents">
        {entries.map(([name, a]) => (
          <AgentForm key={`${name}:${JSON.stringify(a)}`} name={name} agent={a} admin={admin} />
        ))}
      </div>
    </div>
  )
}
