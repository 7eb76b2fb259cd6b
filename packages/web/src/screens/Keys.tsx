/**
 * API keys: the signed-in user's keys, a new key with chosen scopes and expiry, the secret shown
 * once, rotation and revocation (each confirmed), and each key's requests per day.
 */
import { useEffect, useId, useRef, useState } from "preact/hooks"
import { allPages, api, messageOf } from "../api.js"
import {
  Confirm,
  Empty,
  ErrorState,
  Field,
  FieldError,
  FormActions,
  fieldError,
  formatDate,
  formatDateTime,
  Loading,
  notify,
  useSubmit,
  useTitle
} from "../components.js"
import { useLiveRefresh } from "../live.js"
import type { ApiKey, ApiKeyWithSecret, KeyUsage, Me, Scope } from "../types.js"
import { SCOPES } from "../types.js"

const DAYS = 30
const EXPIRIES = [
  { value: "never", label: "Never", days: 0 },
  { value: "30", label: "In 30 days", days: 30 },
  { value: "90", label: "In 90 days", days: 90 },
  { value: "365", label: "In a year", days: 365 }
] as const

/** The last {@link DAYS} days, oldest first, with the count of each (0 when absent). */
export const lastDays = (byDay: ReadonlyArray<{ date: string; count: number }>, today = new Date()) => {
  const counts = new Map(byDay.map((d) => [d.date, d.count]))
  const out: Array<{ date: string; count: number }> = []
  for (let i = DAYS - 1; i >= 0; i--) {
    const date = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - i))
      .toISOString()
      .slice(0, 10)
    out.push({ date, count: counts.get(date) ?? 0 })
  }
  return out
}

const UsageChart = ({ keyId, name }: { readonly keyId: string; readonly name: string }) => {
  const [usage, setUsage] = useState<KeyUsage | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const load = () =>
    api<KeyUsage>("GET", `/api/keys/${keyId}/usage`).then(
      (u) => {
        setUsage(u)
        setError(undefined)
      },
      (e: unknown) => setError(e)
    )
  useEffect(() => {
    void load()
  }, [keyId])
  if (error !== undefined) return <p class="muted">Usage could not be loaded: {messageOf(error)}</p>
  if (usage === undefined) return <p class="muted">Loading usage…</p>
  const days = lastDays(usage.by_day)
  const max = Math.max(1, ...days.map((d) => d.count))
  const inWindow = days.reduce((n, d) => n + d.count, 0)
  const w = 6
  const gap = 2
  const h = 40
  return (
    <figure class="usage">
      <svg
        class="chart"
        viewBox={`0 0 ${DAYS * (w + gap)} ${h}`}
        role="img"
        aria-label={`Requests per day with ${name} over the last ${DAYS} days: ${inWindow.toLocaleString()} in all, at most ${max === 1 && inWindow === 0 ? 0 : max.toLocaleString()} in one day.`}
        preserveAspectRatio="none"
      >
        {days.map((d, i) => {
          const bh = d.count === 0 ? 1 : Math.max(2, (d.count / max) * h)
          return (
            <rect
              key={d.date}
              class={d.count === 0 ? "bar bar-zero" : "bar"}
              x={i * (w + gap)}
              y={h - bh}
              width={w}
              height={bh}
            >
              <title>
                {d.date}: {d.count.toLocaleString()} requests
              </title>
            </rect>
          )
        })}
      </svg>
      <figcaption class="muted">
        {usage.total_requests.toLocaleString()} requests in all · {inWindow.toLocaleString()} in the last {DAYS} days
      </figcaption>
    </figure>
  )
}

const Secret = ({
  keyName,
  secret,
  onDone
}: {
  readonly keyName: string
  readonly secret: string
  readonly onDone: () => void
}) => {
  const id = useId()
  const input = useRef<HTMLInputElement>(null)
  const [copied, setCopied] = useState(false)
  useEffect(() => {
    input.current?.focus()
    input.current?.select()
  }, [secret])
  return (
    <section class="panel panel-secret" aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>Your new key “{keyName}”</h2>
      <p class="warning" id={`${id}-warning`}>
        Copy it now: it will not be shown again. Taskwright keeps only a digest of it.
      </p>
      <div class="secret-row">
        <label for={`${id}-secret`} class="visually-hidden">
          New key secret
        </label>
        <input
          ref={input}
          id={`${id}-secret`}
          class="secret"
          readOnly
          value={secret}
          aria-describedby={`${id}-warning`}
          onFocus={(e) => e.currentTarget.select()}
        />
        <button
          type="button"
          class="button"
          onClick={async () => {
            try {
              await navigator.clipboard.writeText(secret)
            } catch {
              input.current?.select()
              document.execCommand("copy")
            }
            setCopied(true)
            notify("The key is on the clipboard.")
          }}
        >
          {copied ? "Copied" : "Copy"}
        </button>
      </div>
      <button type="button" class="button button-quiet" onClick={onDone}>
        I have stored it
      </button>
    </section>
  )
}

const NewKey = ({
  scopes,
  onCreated,
  onCancel
}: {
  readonly scopes: ReadonlyArray<Scope>
  readonly onCreated: (key: ApiKeyWithSecret) => void
  readonly onCancel: () => void
}) => {
  const id = useId()
  const [name, setName] = useState("")
  const [chosen, setChosen] = useState<ReadonlySet<Scope>>(new Set(scopes.filter((s) => s.endsWith(":read"))))
  const [expiry, setExpiry] = useState<(typeof EXPIRIES)[number]["value"]>("90")
  const { busy, error, onSubmit } = useSubmit(async () => {
    const days = EXPIRIES.find((x) => x.value === expiry)?.days ?? 0
    onCreated(
      await api<ApiKeyWithSecret>("POST", "/api/keys", {
        name,
        scopes: SCOPES.filter((s) => chosen.has(s)),
        expires_at: days === 0 ? null : new Date(Date.now() + days * 86_400_000).toISOString()
      })
    )
  })
  const scopeError = fieldError(error, "scopes")
  const form = useRef<HTMLFormElement>(null)
  // "New key" goes away as the form comes: the focus goes to the form's first field.
  useEffect(() => form.current?.querySelector("input")?.focus(), [])
  return (
    <form ref={form} class="panel form" aria-labelledby={`${id}-title`} noValidate onSubmit={onSubmit}>
      <h2 id={`${id}-title`}>New key</h2>
      <Field
        label="Name"
        value={name}
        onInput={(e) => setName(e.currentTarget.value)}
        error={fieldError(error, "name")}
        hint="What the key is for, such as “CI” or “laptop script”."
        autoComplete="off"
      />
      <fieldset class="scopes" aria-describedby={scopeError === undefined ? undefined : `${id}-scopes-error`}>
        <legend>Scopes</legend>
        {scopes.map((s) => (
          <label key={s} class="check">
            <input
              type="checkbox"
              checked={chosen.has(s)}
              onChange={(e) => {
                const next = new Set(chosen)
                if (e.currentTarget.checked) next.add(s)
                else next.delete(s)
                setChosen(next)
              }}
            />
            {s}
          </label>
        ))}
        <FieldError id={`${id}-scopes-error`} message={scopeError} />
      </fieldset>
      <div class="field">
        <label for={`${id}-expiry`}>Expires</label>
        <select
          id={`${id}-expiry`}
          value={expiry}
          onChange={(e) => setExpiry(e.currentTarget.value as (typeof EXPIRIES)[number]["value"])}
        >
          {EXPIRIES.map((x) => (
            <option key={x.value} value={x.value}>
              {x.label}
            </option>
          ))}
        </select>
      </div>
      <FormActions
        error={error}
        fields={["name", "scopes", "expires_at"]}
        busy={busy}
        submit="Create key"
        onCancel={onCancel}
      />
    </form>
  )
}

const KeyItem = ({
  k,
  onRotate,
  onRevoke
}: {
  readonly k: ApiKey
  readonly onRotate?: () => void
  readonly onRevoke?: () => void
}) => (
  <li class="list-item key">
    <div class="list-main">
      <strong>{k.name}</strong>
      <code class="prefix">{k.prefix}…</code>
      <ul class="chips" aria-label="Scopes">
        {k.scopes.map((s) => (
          <li key={s}>
            <span class="chip chip-plain">{s}</span>
          </li>
        ))}
      </ul>
      <dl class="facts facts-inline">
        <div>
          <dt>Created</dt>
          <dd>{formatDate(k.created_at)}</dd>
        </div>
        <div>
          <dt>Last used</dt>
          <dd>{formatDateTime(k.last_used_at, "never")}</dd>
        </div>
        <div>
          <dt>{k.revoked_at === null ? "Expires" : "Revoked"}</dt>
          <dd>{k.revoked_at === null ? formatDate(k.expires_at, "never") : formatDateTime(k.revoked_at)}</dd>
        </div>
      </dl>
      {k.revoked_at === null && <UsageChart keyId={k.id} name={k.name} />}
    </div>
    {onRotate !== undefined && onRevoke !== undefined && (
      <div class="actions actions-column">
        <button type="button" class="button button-small" aria-label={`Rotate ${k.name}`} onClick={onRotate}>
          Rotate
        </button>
        <button
          type="button"
          class="button button-small button-danger"
          aria-label={`Revoke ${k.name}`}
          onClick={onRevoke}
        >
          Revoke
        </button>
      </div>
    )}
  </li>
)

export const KeysScreen = ({ me }: { readonly me: Me }) => {
  useTitle("API keys")
  const [keys, setKeys] = useState<ReadonlyArray<ApiKey> | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [creating, setCreating] = useState(false)
  const [secret, setSecret] = useState<{ name: string; secret: string } | null>(null)
  const [confirm, setConfirm] = useState<{ key: ApiKey; action: "rotate" | "revoke" } | null>(null)
  const newKeyButton = useRef<HTMLButtonElement>(null)
  const userScopes = SCOPES.filter((s) => me.scopes.includes(s))

  const load = () =>
    allPages<"keys", ApiKey>("/api/keys", "keys").then(
      (list) => {
        setKeys(list)
        setError(undefined)
      },
      (e: unknown) => setError(e)
    )
  useEffect(() => {
    void load()
  }, [])
  useLiveRefresh(() => void load())

  const active = (keys ?? []).filter((k) => k.revoked_at === null)
  const revoked = (keys ?? []).filter((k) => k.revoked_at !== null)

  return (
    <div class="page">
      <div class="toolbar">
        <h1 tabIndex={-1}>API keys</h1>
        {!creating && (
          <button
            ref={newKeyButton}
            type="button"
            class="button button-primary"
            onClick={() => {
              setSecret(null)
              setCreating(true)
            }}
          >
            New key
          </button>
        )}
      </div>
      <p class="lead">
        Keys let scripts and other tools call the API as you: send one as <code>Authorization: Bearer &lt;key&gt;</code>
        .
      </p>
      {secret !== null && (
        <Secret
          keyName={secret.name}
          secret={secret.secret}
          onDone={() => {
            setSecret(null)
            requestAnimationFrame(() => newKeyButton.current?.focus())
          }}
        />
      )}
      {creating && (
        <NewKey
          scopes={userScopes}
          onCancel={() => {
            setCreating(false)
            requestAnimationFrame(() => newKeyButton.current?.focus())
          }}
          onCreated={(key) => {
            setCreating(false)
            setSecret({ name: key.name, secret: key.secret })
            void load()
          }}
        />
      )}
      {error !== undefined && <ErrorState error={error} onRetry={() => void load()} />}
      {keys === undefined && error === undefined && <Loading label="Loading your keys…" />}
      {keys !== undefined && active.length === 0 && (
        <Empty title="You have no API keys.">
          <p>Create one with “New key”; its secret is shown once.</p>
        </Empty>
      )}
      {active.length > 0 && (
        <section aria-labelledby="active-keys">
          <h2 id="active-keys">Your keys</h2>
          <ul class="list">
            {active.map((k) => (
              <KeyItem
                key={k.id}
                k={k}
                onRotate={() => setConfirm({ key: k, action: "rotate" })}
                onRevoke={() => setConfirm({ key: k, action: "revoke" })}
              />
            ))}
          </ul>
        </section>
      )}
      {revoked.length > 0 && (
        <details class="revoked">
          <summary>Revoked keys ({revoked.length})</summary>
          <ul class="list">
            {revoked.map((k) => (
              <KeyItem key={k.id} k={k} />
            ))}
          </ul>
        </details>
      )}
      {confirm !== null &&
        (confirm.action === "rotate" ? (
          <Confirm
            title={`Rotate ${confirm.key.name}?`}
            message="The key gets a new secret; the old one and its access tokens stop working at once."
            confirmLabel="Rotate key"
            onClose={() => setConfirm(null)}
            onConfirm={async () => {
              const rotated = await api<ApiKeyWithSecret>("POST", `/api/keys/${confirm.key.id}/rotate`)
              setConfirm(null)
              setSecret({ name: rotated.name, secret: rotated.secret })
              void load()
            }}
          />
        ) : (
          <Confirm
            title={`Revoke ${confirm.key.name}?`}
            message="The key and its access tokens stop working at once. This cannot be undone."
            confirmLabel="Revoke key"
            onClose={() => setConfirm(null)}
            onConfirm={async () => {
              await api("DELETE", `/api/keys/${confirm.key.id}`)
              setConfirm(null)
              notify(`Revoked ${confirm.key.name}.`)
              // Its row, and the button that opened the dialog, leave the list.
              await load()
              requestAnimationFrame(() => newKeyButton.current?.focus())
            }}
          />
        ))}
    </div>
  )
}
