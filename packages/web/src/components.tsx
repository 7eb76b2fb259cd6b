/** Pieces every screen uses: states (loading, empty, error), dialogs, fields, badges, notices. */
import type { ComponentChildren, JSX } from "preact"
import { useEffect, useId, useRef, useState } from "preact/hooks"
import { ApiError, messageOf } from "./api.js"
import { PRIORITY_NAMES, type TaskPriority } from "./types.js"

export const Loading = ({ label }: { readonly label: string }) => (
  <div class="state" role="status" aria-live="polite">
    <span class="spinner" aria-hidden="true" />
    <span>{label}</span>
  </div>
)

export const ErrorState = ({ error, onRetry }: { readonly error: unknown; readonly onRetry?: () => void }) => (
  <div class="state state-error" role="alert">
    <p>
      <strong>That did not work.</strong> {messageOf(error)}
    </p>
    {onRetry !== undefined && (
      <button type="button" class="button" onClick={onRetry}>
        Try again
      </button>
    )}
  </div>
)

export const Empty = ({ title, children }: { readonly title: string; readonly children?: ComponentChildren }) => (
  <div class="state state-empty">
    <p class="state-title">{title}</p>
    {children}
  </div>
)

/** The `<option>`s of a select over fixed values, shown by their names when given. */
export const Options = <T extends string>({
  values,
  names
}: {
  readonly values: ReadonlyArray<T>
  readonly names?: Readonly<Record<T, string>>
}) => (
  <>
    {values.map((v) => (
      <option key={v} value={v}>
        {names?.[v] ?? v}
      </option>
    ))}
  </>
)

/** Black or white, whichever reads better on `hex` (at least 4.5:1 against any colour). */
export const textOn = (hex: string): string => {
  const n = Number.parseInt(hex.slice(1), 16)
  const channel = (c: number) => {
    const s = c / 255
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4
  }
  const l = 0.2126 * channel((n >> 16) & 255) + 0.7152 * channel((n >> 8) & 255) + 0.0722 * channel(n & 255)
  return l > 0.179 ? "#000000" : "#ffffff"
}

const HEX = /^#[0-9a-fA-F]{6}$/

const chipStyles = new Map<string, { readonly backgroundColor: string; readonly color: string }>()

/**
 * A label in its colour. Plain functions rather than components (here and for the priority):
 * a board draws thousands of them, and an element costs less than a component instance.
 */
export const labelChip = (name: string, color: string | undefined) => {
  const bg = color !== undefined && HEX.test(color) ? color : "#6b7280"
  let style = chipStyles.get(bg)
  if (style === undefined) {
    style = { backgroundColor: bg, color: textOn(bg) }
    chipStyles.set(bg, style)
  }
  return (
    <span class="chip" style={style}>
      {name}
    </span>
  )
}

export const priorityBadge = (priority: TaskPriority) => (
  <span class={`priority priority-${priority}`}>
    <span class="visually-hidden">Priority: </span>
    {PRIORITY_NAMES[priority]}
  </span>
)

/**
 * A modal dialog on the native `<dialog>`: focus moves in (to the element marked
 * `data-autofocus`, else the first field, else the browser's choice) and is kept there, Escape
 * closes it, and focus returns to what opened it.
 */
export const Dialog = ({
  title,
  onClose,
  children,
  wide
}: {
  readonly title: string
  readonly onClose: () => void
  readonly children: ComponentChildren
  readonly wide?: boolean
}) => {
  const ref = useRef<HTMLDialogElement>(null)
  const id = useId()
  useEffect(() => {
    const dialog = ref.current
    const opener = document.activeElement
    dialog?.showModal()
    dialog?.querySelector<HTMLElement>("[data-autofocus], input:not([type=hidden]), textarea, select")?.focus()
    return () => {
      dialog?.close()
      if (opener instanceof HTMLElement && opener.isConnected) opener.focus()
    }
  }, [])
  return (
    <dialog
      ref={ref}
      class={wide === true ? "dialog dialog-wide" : "dialog"}
      aria-labelledby={id}
      onCancel={(e) => {
        e.preventDefault()
        onClose()
      }}
    >
      <div class="dialog-head">
        <h2 id={id}>{title}</h2>
        <button type="button" class="icon-button" aria-label="Close" onClick={onClose}>
          ×
        </button>
      </div>
      {children}
    </dialog>
  )
}

/** Asks before something that cannot be undone. */
export const Confirm = ({
  title,
  message,
  confirmLabel,
  onConfirm,
  onClose,
  children
}: {
  readonly title: string
  readonly message: string
  readonly confirmLabel: string
  readonly onConfirm: () => Promise<void>
  readonly onClose: () => void
  readonly children?: ComponentChildren
}) => {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  return (
    <Dialog title={title} onClose={onClose}>
      <p>{message}</p>
      {children}
      {error !== undefined && (
        <p class="form-error" role="alert">
          {messageOf(error)}
        </p>
      )}
      <div class="actions">
        <button
          type="button"
          class="button button-danger"
          disabled={busy}
          onClick={async () => {
            setBusy(true)
            setError(undefined)
            try {
              await onConfirm()
            } catch (e) {
              setError(e)
              setBusy(false)
            }
          }}
        >
          {confirmLabel}
        </button>
        {/* The safe choice has the focus: Enter at once cancels. */}
        <button type="button" class="button button-quiet" onClick={onClose} data-autofocus>
          Cancel
        </button>
      </div>
    </Dialog>
  )
}

type InputProps = JSX.InputHTMLAttributes<HTMLInputElement>

/** A labelled input with the API's message for its field below it. */
export const Field = ({
  label,
  error,
  hint,
  ...input
}: InputProps & { readonly label: string; readonly error?: string | undefined; readonly hint?: string }) => {
  const id = useId()
  const described = [hint !== undefined ? `${id}-hint` : "", error !== undefined ? `${id}-error` : ""]
    .filter((s) => s !== "")
    .join(" ")
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <input
        {...input}
        id={id}
        aria-invalid={error !== undefined ? true : undefined}
        aria-describedby={described === "" ? undefined : described}
      />
      {hint !== undefined && (
        <p class="hint" id={`${id}-hint`}>
          {hint}
        </p>
      )}
      <FieldError id={`${id}-error`} message={error} />
    </div>
  )
}

export const FieldError = ({ id, message }: { readonly id: string; readonly message: string | undefined }) =>
  message === undefined ? null : (
    <p class="field-error" id={id}>
      {message}
    </p>
  )

/**
 * A form's own refusal of a field, in the API's shape, so its message appears beside the field
 * exactly as the API's would (and nothing is sent).
 */
export const refuse = (path: string, message: string): ApiError =>
  new ApiError(400, "BAD_REQUEST", message, { fields: [{ path, message }] })

/** The API's message for a field, or undefined. */
export const fieldError = (error: unknown, name: string): string | undefined =>
  error instanceof ApiError ? error.fieldMessage(name) : undefined

/**
 * A form's submission: busy while `action` runs, its failure kept (for the fields' messages), and
 * focus moved to the first field the API refused.
 */
export const useSubmit = (action: () => Promise<void>) => {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const onSubmit = async (e: Event) => {
    e.preventDefault()
    const form = e.currentTarget as HTMLFormElement
    setBusy(true)
    setError(undefined)
    try {
      await action()
    } catch (err) {
      setError(err)
      requestAnimationFrame(() => form.querySelector<HTMLElement>("[aria-invalid=true]")?.focus())
    } finally {
      setBusy(false)
    }
  }
  return { busy, error, onSubmit }
}

/**
 * The end of a form: the failure when no field of the form carries it, the submit button and,
 * when given, "Cancel".
 */
export const FormActions = ({
  error,
  fields,
  busy,
  submit,
  onCancel
}: {
  readonly error: unknown
  /** The fields the form shows, whose messages appear beside them instead. */
  readonly fields: ReadonlyArray<string>
  readonly busy: boolean
  readonly submit: string
  readonly onCancel?: () => void
}) => {
  const shown = error instanceof ApiError && fields.some((f) => error.fieldMessage(f) !== undefined)
  return (
    <>
      {error !== undefined && !shown && (
        <p class="form-error" role="alert">
          {messageOf(error)}
        </p>
      )}
      <div class="actions">
        <button type="submit" class="button button-primary" disabled={busy}>
          {submit}
        </button>
        {onCancel !== undefined && (
          <button type="button" class="button button-quiet" onClick={onCancel}>
            Cancel
          </button>
        )}
      </div>
    </>
  )
}

/*
 * One polite region for short confirmations ("Moved to To do"), one assertive for failures. They
 * sit in the page's flow under the header (sticky while the page scrolls), never over a panel
 * at rest, and each shows its newest message only: an older one is stale once another comes.
 */
type Notice = { readonly id: number; readonly text: string; readonly kind: "info" | "error" }
const noticeListeners = new Set<(notices: ReadonlyArray<Notice>) => void>()
let notices: ReadonlyArray<Notice> = []
let nextNotice = 1

const setNotices = (next: ReadonlyArray<Notice>) => {
  notices = next
  for (const l of noticeListeners) l(notices)
}

/** Shows a short message for a few seconds and reads it to screen readers. */
export const notify = (text: string, kind: "info" | "error" = "info"): void => {
  const id = nextNotice++
  setNotices([...notices.filter((n) => n.kind !== kind), { id, text, kind }])
  setTimeout(() => setNotices(notices.filter((n) => n.id !== id)), kind === "error" ? 8000 : 4000)
}

export const Notices = () => {
  const [list, setList] = useState(notices)
  useEffect(() => {
    noticeListeners.add(setList)
    return () => {
      noticeListeners.delete(setList)
    }
  }, [])
  return (
    <div class="notices">
      <div role="status" aria-live="polite">
        {list
          .filter((n) => n.kind === "info")
          .map((n) => (
            <p key={n.id} class="notice">
              {n.text}
            </p>
          ))}
      </div>
      <div role="alert">
        {list
          .filter((n) => n.kind === "error")
          .map((n) => (
            <p key={n.id} class="notice notice-error">
              {n.text}
            </p>
          ))}
      </div>
    </div>
  )
}

/**
 * A value made on first use. For `Intl` formatters: the first one a page builds loads the locale's
 * data (tens of milliseconds on a slow core), which the board's first drawing has no use for.
 */
export const lazy = <T,>(make: () => T): (() => T) => {
  let value: T | undefined
  return () => {
    value ??= make()
    return value
  }
}

const dateTime = lazy(() => new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" }))
const dateOnly = lazy(() => new Intl.DateTimeFormat(undefined, { dateStyle: "medium" }))

export const formatDateTime = (iso: string | null, none = "—"): string =>
  iso === null ? none : dateTime().format(new Date(iso))

export const formatDate = (iso: string | null, none = "—"): string =>
  iso === null ? none : dateOnly().format(new Date(iso))

export const formatDuration = (ms: number): string => {
  const s = Math.max(0, Math.round(ms / 1000))
  if (s < 60) return `${s}s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m}m ${s % 60}s`
  return `${Math.floor(m / 60)}h ${m % 60}m`
}

/** Sets the document's title for a screen. */
export const useTitle = (title: string): void => {
  useEffect(() => {
    document.title = `${title} · Taskwright`
  }, [title])
}
