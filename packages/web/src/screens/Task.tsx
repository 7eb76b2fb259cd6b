/**
 * A task: its description (Markdown, rendered safely), status, priority, labels and project;
 * its agent runs with their figures; the selected run's log; starting and stopping runs; and the
 * review of work waiting in "In review".
 */
import type { JSX } from "preact"
import { useEffect, useId, useMemo, useRef, useState } from "preact/hooks"
import { ApiError, api, messageOf } from "../api.js"
import {
  Confirm,
  ErrorState,
  FieldError,
  FormActions,
  fieldError,
  formatDateTime,
  formatDuration,
  Loading,
  labelChip,
  notify,
  Options,
  useSubmit,
  useTitle
} from "../components.js"
import { useLiveEvents, useLiveRefresh } from "../live.js"
import { agents, labelColors, labels, projects } from "../resources.js"
import { Link, navigate } from "../router.js"
import {
  AUTONOMIES,
  type Autonomy,
  type Me,
  PRIORITIES,
  PRIORITY_NAMES,
  type Run,
  type RunStatus,
  STATUS_NAMES,
  STATUSES,
  type TaskDetail,
  type TaskPriority,
  type TaskStatus
} from "../types.js"
import { RunLog } from "./RunLog.js"

const RUN_STATUS: Record<RunStatus, string> = {
  running: "Running",
  completed: "Completed",
  failed: "Failed",
  stopped: "Stopped"
}

const isRun = (u: unknown): u is Run =>
  typeof u === "object" && u !== null && typeof (u as Run).id === "string" && typeof (u as Run).task_id === "number"

type MarkdownView = (props: { readonly source: string }) => JSX.Element
let markdownView: MarkdownView | undefined

/**
 * The description as Markdown. The renderer (and its parser) is a chunk of its own, fetched the
 * first time a task is opened, so the board's first load does not carry it.
 */
const Description = ({ source }: { readonly source: string }) => {
  const [View, setView] = useState<MarkdownView | undefined>(() => markdownView)
  const [failed, setFailed] = useState(false)
  useEffect(() => {
    if (View !== undefined) return
    import("../markdown.js").then(
      (m) => {
        markdownView = m.Markdown
        setView(() => m.Markdown)
      },
      () => setFailed(true)
    )
  }, [])
  if (View !== undefined) return <View source={source} />
  // Until the renderer arrives (or if it cannot be fetched), the text as it was written.
  return <div class={failed ? "plain" : "plain plain-pending"}>{source}</div>
}

const plural = (n: number, one: string, many: string) => `${n.toLocaleString()} ${n === 1 ? one : many}`

/** Ticks every second while `on`, so running durations move. */
const useClock = (on: boolean): number => {
  const [now, setNow] = useState(Date.now())
  useEffect(() => {
    if (!on) return
    const timer = setInterval(() => setNow(Date.now()), 1000)
    return () => clearInterval(timer)
  }, [on])
  return on ? now : Date.now()
}

const RunItem = ({
  run,
  selected,
  now,
  canRun,
  onSelect,
  onStopped
}: {
  readonly run: Run
  readonly selected: boolean
  readonly now: number
  readonly canRun: boolean
  readonly onSelect: () => void
  readonly onStopped: (run: Run) => void
}) => {
  const [stopping, setStopping] = useState(false)
  const end = run.completed_at === null ? now : Date.parse(run.completed_at)
  const usage = run.output.usage
  const files = run.output.files_modified
  return (
    <li class={selected ? "run run-selected" : "run"}>
      <div class="run-head">
        <span class={`badge badge-${run.status}`}>{RUN_STATUS[run.status]}</span>
        <strong>{run.agent}</strong>
        <span class="muted">{formatDateTime(run.started_at)}</span>
      </div>
      <dl class="figures">
        <div>
          <dt>Duration</dt>
          <dd>{formatDuration(end - Date.parse(run.started_at))}</dd>
        </div>
        <div>
          <dt>Changes</dt>
          <dd>
            <span class="added">+{run.output.lines_added}</span>{" "}
            <span class="removed">−{run.output.lines_removed}</span> in {plural(files.length, "file", "files")}
          </dd>
        </div>
        <div>
          <dt>Tokens</dt>
          <dd>
            {usage === undefined
              ? "not reported"
              : `${usage.input_tokens.toLocaleString()} in / ${usage.output_tokens.toLocaleString()} out`}
          </dd>
        </div>
        <div>
          <dt>Cost</dt>
          <dd>{usage?.cost_usd == null ? "—" : `$${usage.cost_usd.toFixed(4)}`}</dd>
        </div>
      </dl>
      {run.error !== null && <p class="run-error">{run.error}</p>}
      {files.length > 0 && (
        <details class="files">
          <summary>Files changed</summary>
          <ul class="files-list">
            {files.map((f) => (
              <li key={f}>
                <code>{f}</code>
              </li>
            ))}
          </ul>
        </details>
      )}
      <div class="actions">
        <button type="button" class="button button-small" aria-pressed={selected} onClick={onSelect}>
          Show log
          <span class="visually-hidden">
            {" "}
            of the {run.agent} run started {formatDateTime(run.started_at)}
          </span>
        </button>
        {run.status === "running" && canRun && (
          <button
            type="button"
            class="button button-small button-danger"
            disabled={stopping}
            onClick={async () => {
              setStopping(true)
              try {
                onStopped(await api<Run>("POST", `/api/runs/${run.id}/stop`))
                notify("The run was stopped.")
              } catch (e) {
                notify(`Could not stop the run: ${messageOf(e)}`, "error")
              } finally {
                setStopping(false)
              }
            }}
          >
            Stop run
          </button>
        )}
      </div>
    </li>
  )
}

const StartRun = ({ task, onStarted }: { readonly task: TaskDetail; readonly onStarted: (runId: string) => void }) => {
  const id = useId()
  const list = agents.use()
  const enabled = Object.entries(list.value ?? {}).filter(([, a]) => a.enabled)
  const [agent, setAgent] = useState("")
  const [branch, setBranch] = useState("")
  const [autonomy, setAutonomy] = useState<Autonomy | "">("")
  const chosen = agent !== "" ? agent : (enabled[0]?.[0] ?? "")
  const { busy, error, onSubmit } = useSubmit(async () => {
    const started = await api<{ run_id: string }>("POST", `/api/tasks/${task.id}/run`, {
      agent: chosen,
      ...(branch.trim() === "" ? {} : { branch: branch.trim() }),
      ...(autonomy === "" ? {} : { autonomy })
    })
    onStarted(started.run_id)
    notify("The run started.")
  })

  if (list.error !== undefined) return <ErrorState error={list.error} onRetry={() => void agents.reload()} />
  if (list.value === undefined) return <Loading label="Loading agents…" />
  if (enabled.length === 0) {
    return <p class="muted">No agent is enabled. An administrator can enable one under Agents.</p>
  }
  const branchError = fieldError(error, "branch")
  return (
    <form class="form" noValidate onSubmit={onSubmit}>
      <div class="field">
        <label for={`${id}-agent`}>Agent</label>
        <select id={`${id}-agent`} value={chosen} onChange={(e) => setAgent(e.currentTarget.value)}>
          {enabled.map(([name, a]) => (
            <option key={name} value={name}>
              {a.model === "default" ? name : `${name} (${a.model})`}
            </option>
          ))}
        </select>
      </div>
      <div class="field">
        <label for={`${id}-branch`}>Branch</label>
        <input
          id={`${id}-branch`}
          value={branch}
          placeholder={`taskwright/task-${task.id}`}
          onInput={(e) => setBranch(e.currentTarget.value)}
          aria-invalid={branchError !== undefined ? true : undefined}
          aria-describedby={`${id}-branch-hint${branchError === undefined ? "" : ` ${id}-branch-error`}`}
          autoComplete="off"
        />
        <p class="hint" id={`${id}-branch-hint`}>
          Empty: taskwright/task-{task.id}. An existing branch is continued.
        </p>
        {branchError !== undefined && (
          <p class="field-error" id={`${id}-branch-error`}>
            {branchError}
          </p>
        )}
      </div>
      <div class="field">
        <label for={`${id}-autonomy`}>Autonomy</label>
        <select
          id={`${id}-autonomy`}
          value={autonomy}
          onChange={(e) => setAutonomy(e.currentTarget.value as Autonomy | "")}
        >
          <option value="">The agent's setting ({list.value[chosen]?.autonomy ?? "workspace-write"})</option>
          <Options values={AUTONOMIES} />
        </select>
      </div>
      <FormActions error={error} fields={["agent", "branch", "autonomy"]} busy={busy} submit="Start run" />
    </form>
  )
}

const Review = ({
  task,
  onReviewed
}: {
  readonly task: TaskDetail
  readonly onReviewed: (runId: string | null) => void
}) => {
  const id = useId()
  const [comment, setComment] = useState("")
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const commentRef = useRef<HTMLTextAreaElement>(null)
  const commentError = fieldError(error, "comment")
  const review = async (action: "approve" | "reject" | "request_changes") => {
    setBusy(true)
    setError(undefined)
    try {
      const result = await api<{ run_id: string | null }>("POST", `/api/tasks/${task.id}/review`, {
        action,
        ...(comment.trim() === "" ? {} : { comment: comment.trim() })
      })
      setComment("")
      notify(
        action === "approve"
          ? "Approved: the task is done."
          : action === "reject"
            ? "Rejected: the task is back in the backlog."
            : result.run_id !== null
              ? "Changes requested: a follow-up run started."
              : "Changes requested: the task is in progress again."
      )
      onReviewed(result.run_id)
    } catch (e) {
      setError(e)
      if (fieldError(e, "comment") !== undefined) requestAnimationFrame(() => commentRef.current?.focus())
    } finally {
      setBusy(false)
    }
  }
  return (
    <section class="panel panel-review" aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>Review</h2>
      <p>The agent's work is waiting for review on its branch.</p>
      <div class="field">
        <label for={`${id}-comment`}>Comment</label>
        <textarea
          ref={commentRef}
          id={`${id}-comment`}
          rows={3}
          value={comment}
          onInput={(e) => setComment(e.currentTarget.value)}
          aria-invalid={commentError !== undefined ? true : undefined}
          aria-describedby={`${id}-comment-hint${commentError === undefined ? "" : ` ${id}-comment-error`}`}
        />
        <p class="hint" id={`${id}-comment-hint`}>
          With "Request changes", the comment starts a follow-up run on the same branch.
        </p>
        <FieldError id={`${id}-comment-error`} message={commentError} />
      </div>
      {error !== undefined && commentError === undefined && (
        <p class="form-error" role="alert">
          {messageOf(error)}
        </p>
      )}
      <div class="actions">
        <button type="button" class="button button-primary" disabled={busy} onClick={() => review("approve")}>
          Approve
        </button>
        <button type="button" class="button" disabled={busy} onClick={() => review("request_changes")}>
          Request changes
        </button>
        <button type="button" class="button button-danger" disabled={busy} onClick={() => review("reject")}>
          Reject
        </button>
      </div>
    </section>
  )
}

export const TaskScreen = ({ id, me }: { readonly id: number; readonly me: Me }) => {
  const [task, setTask] = useState<TaskDetail | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [runs, setRuns] = useState<ReadonlyMap<string, Run>>(new Map())
  const [selected, setSelected] = useState<string | null>(null)
  const [deleting, setDeleting] = useState(false)
  const [gone, setGone] = useState(false)
  const projectList = projects.use()
  const labelList = labels.use()
  const colors = useMemo(() => labelColors(labelList.value), [labelList.value])
  const scopes = me.scopes
  const canWrite = scopes.includes("tasks:write") || scopes.includes("admin")
  const canRun = scopes.includes("agents:run") || scopes.includes("admin")
  useTitle(task?.title ?? `Task ${id}`)

  const load = async () => {
    try {
      const t = await api<TaskDetail>("GET", `/api/tasks/${id}`)
      const details = await Promise.all(t.agent_runs.map((r) => api<Run>("GET", `/api/runs/${r.id}`)))
      setTask(t)
      setRuns(new Map(details.map((r) => [r.id, r])))
      setError(undefined)
      setSelected((s) => {
        if (s !== null && t.agent_runs.some((r) => r.id === s)) return s
        const latest = [...t.agent_runs].sort((a, b) => (a.started_at < b.started_at ? 1 : -1))[0]
        return latest?.id ?? null
      })
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) setGone(true)
      else setError(e)
    }
  }

  useEffect(() => {
    void load()
  }, [id])
  useLiveRefresh(() => void load())
  useLiveEvents((event) => {
    const data = event.data as { id?: unknown; task_id?: unknown } | null
    if (event.type === "task.deleted" && data?.id === id) setGone(true)
    else if (
      (event.type === "task.updated" || event.type === "review.created") &&
      (data?.id === id || data?.task_id === id)
    ) {
      void load()
    } else if (
      event.type.startsWith("run.") &&
      event.type !== "run.log" &&
      isRun(event.data) &&
      event.data.task_id === id
    ) {
      const run = event.data
      setRuns((prev) => new Map(prev).set(run.id, { ...prev.get(run.id), ...run }))
      void load()
    }
  })

  const anyRunning = [...runs.values()].some((r) => r.status === "running")
  const now = useClock(anyRunning)

  const patch = async (change: { status?: TaskStatus; priority?: TaskPriority }) => {
    try {
      const updated = await api<TaskDetail>("PATCH", `/api/tasks/${id}`, change)
      setTask((t) => (t === undefined ? updated : { ...t, ...updated }))
      notify(
        change.status !== undefined
          ? `Status: ${STATUS_NAMES[change.status]}.`
          : `Priority: ${PRIORITY_NAMES[change.priority ?? "medium"]}.`
      )
    } catch (e) {
      notify(`Could not save: ${messageOf(e)}`, "error")
    }
  }

  if (gone) {
    return (
      <div class="page">
        <h1 tabIndex={-1}>Task not found</h1>
        <p>Task #{id} does not exist or was deleted.</p>
        <Link href="/" class="button">
          Back to the board
        </Link>
      </div>
    )
  }
  if (task === undefined) {
    return (
      <div class="page">
        {error !== undefined ? (
          <ErrorState error={error} onRetry={() => void load()} />
        ) : (
          <Loading label="Loading the task…" />
        )}
      </div>
    )
  }

  const project = task.project_id === null ? undefined : projectList.value?.find((p) => p.id === task.project_id)
  const runList = [...runs.values()].sort((a, b) => (a.started_at < b.started_at ? 1 : -1))
  const selectedRun = selected === null ? undefined : runs.get(selected)

  return (
    <div class="page page-task">
      <p class="crumbs">
        <Link href="/">Board</Link> <span aria-hidden="true">/</span> Task #{task.id}
      </p>
      <h1 tabIndex={-1}>{task.title}</h1>
      {error !== undefined && <ErrorState error={error} onRetry={() => void load()} />}
      <div class="task-layout">
        <div class="task-main">
          <section class="panel" aria-labelledby="description-heading">
            <h2 id="description-heading">Description</h2>
            {task.description.trim() === "" ? (
              <p class="muted">No description.</p>
            ) : (
              <Description source={task.description} />
            )}
          </section>

          <section class="panel" aria-labelledby="runs-heading">
            <h2 id="runs-heading">Runs</h2>
            {runList.length === 0 ? (
              <p class="muted">No agent has run on this task yet.</p>
            ) : (
              <ul class="runs">
                {runList.map((r) => (
                  <RunItem
                    key={r.id}
                    run={r}
                    now={now}
                    canRun={canRun}
                    selected={r.id === selected}
                    onSelect={() => setSelected(r.id)}
                    onStopped={(stopped) => {
                      setRuns((prev) => new Map(prev).set(stopped.id, stopped))
                      void load()
                    }}
                  />
                ))}
              </ul>
            )}
          </section>

          {selectedRun !== undefined && <RunLog run={selectedRun} />}
        </div>

        <aside class="task-side" aria-label="Task details">
          {task.status === "in_review" && canWrite && (
            <Review
              task={task}
              onReviewed={(runId) => {
                if (runId !== null) setSelected(runId)
                // The review panel goes with the review: keyboard focus moves to the status it set.
                void load().then(() => requestAnimationFrame(() => document.getElementById("task-status")?.focus()))
              }}
            />
          )}
          <section class="panel" aria-labelledby="details-heading">
            <h2 id="details-heading">Details</h2>
            <div class="field">
              <label for="task-status">Status</label>
              <select
                id="task-status"
                value={task.status}
                disabled={!canWrite}
                onChange={(e) => void patch({ status: e.currentTarget.value as TaskStatus })}
              >
                <Options values={STATUSES} names={STATUS_NAMES} />
              </select>
            </div>
            <div class="field">
              <label for="task-priority">Priority</label>
              <select
                id="task-priority"
                value={task.priority}
                disabled={!canWrite}
                onChange={(e) => void patch({ priority: e.currentTarget.value as TaskPriority })}
              >
                <Options values={PRIORITIES} names={PRIORITY_NAMES} />
              </select>
            </div>
            <dl class="facts">
              <div>
                <dt>Labels</dt>
                <dd>
                  {task.labels.length === 0 ? (
                    <span class="muted">None</span>
                  ) : (
                    <ul class="chips">
                      {task.labels.map((l) => (
                        <li key={l}>{labelChip(l, colors.get(l.toLowerCase()))}</li>
                      ))}
                    </ul>
                  )}
                </dd>
              </div>
              <div>
                <dt>Project</dt>
                <dd>
                  {task.project_id === null ? (
                    <span class="muted">None</span>
                  ) : (
                    <Link href="/projects">{project?.name ?? task.project_id}</Link>
                  )}
                </dd>
              </div>
              <div>
                <dt>Created</dt>
                <dd>{formatDateTime(task.created_at)}</dd>
              </div>
              <div>
                <dt>Updated</dt>
                <dd>{formatDateTime(task.updated_at)}</dd>
              </div>
            </dl>
          </section>

          {canRun && (
            <section class="panel" aria-labelledby="start-heading">
              <h2 id="start-heading">Start a run</h2>
              {task.project_id === null ? (
                <p class="muted">A run works in the task's project: give the task a project first.</p>
              ) : (
                <StartRun
                  task={task}
                  onStarted={(runId) => {
                    setSelected(runId)
                    void load()
                  }}
                />
              )}
            </section>
          )}

          {canWrite && (
            <div class="actions">
              <button type="button" class="button button-danger button-quiet" onClick={() => setDeleting(true)}>
                Delete task
              </button>
            </div>
          )}
        </aside>
      </div>
      {deleting && (
        <Confirm
          title="Delete this task?"
          message={`“${task.title}” and its runs' records will be deleted. This cannot be undone.`}
          confirmLabel="Delete task"
          onClose={() => setDeleting(false)}
          onConfirm={async () => {
            await api("DELETE", `/api/tasks/${id}`)
            notify(`Deleted “${task.title}”.`)
            navigate("/")
          }}
        />
      )}
    </div>
  )
}
