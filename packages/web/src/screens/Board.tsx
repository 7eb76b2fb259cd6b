/**
 * The board: a column per status, cards with title, priority and labels, filters, drag and drop
 * between columns and, for keyboards, a "Status" select in each card's menu.
 *
 * A board of a thousand cards must be drawn and usable within 300 ms: cards are class components
 * that redraw only when their own task changes, a reload keeps the objects of unchanged tasks,
 * and drag events are handled once on the board rather than on every card.
 */
import { Component } from "preact"
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks"
import { api, messageOf } from "../api.js"
import { takeTasks } from "../boardData.js"
import { Empty, ErrorState, Loading, labelChip, notify, Options, priorityBadge, useTitle } from "../components.js"
import { useLiveEvents, useLiveRefresh } from "../live.js"
import { labelColors, labels, projects } from "../resources.js"
import { Link, navigate } from "../router.js"
import {
  type LiveEvent,
  type Me,
  PRIORITIES,
  PRIORITY_NAMES,
  STATUS_NAMES,
  STATUSES,
  type TaskItem,
  type TaskPriority,
  type TaskStatus
} from "../types.js"
import { NewTaskDialog } from "./NewTask.js"

const DRAG_TYPE = "application/x-taskwright-task"

/**
 * Cards drawn in each column by the first frame of a board: more than the window shows (a card
 * and the gap after it take 83 px or more at the default font size; 72 leaves room for a smaller
 * one). The rest follow in the browser's idle time, four times as many each time, so a board of a
 * thousand tasks is on screen and usable without waiting for the cards below the fold.
 */
const FIRST_CARDS = Math.max(8, Math.ceil(window.innerHeight / 72))

/** How long a read asked for during another waits after it. */
const AGAIN_AFTER_MS = 300

/** Calls `f` when the browser is idle (soon after a frame where it cannot tell); answers the cancel. */
const whenIdle = (f: () => void): (() => void) => {
  if (typeof window.requestIdleCallback === "function") {
    const id = window.requestIdleCallback(f, { timeout: 250 })
    return () => window.cancelIdleCallback(id)
  }
  // Safari has no idle callbacks.
  const id = setTimeout(f, 20)
  return () => clearTimeout(id)
}

interface Filters {
  readonly project: string
  readonly priority: TaskPriority | ""
  readonly label: string
}

// Kept across visits to other screens, like a tab's scroll position.
let savedFilters: Filters = { project: "", priority: "", label: "" }

type Tasks = ReadonlyMap<number, TaskItem>

const isStatus = (s: unknown): s is TaskStatus => (STATUSES as ReadonlyArray<unknown>).includes(s)

/** A task from an event's data, when it has the fields a card needs. */
const taskOf = (data: unknown): TaskItem | undefined => {
  const t = data as Partial<TaskItem> | null
  return t !== null &&
    typeof t === "object" &&
    typeof t.id === "number" &&
    typeof t.title === "string" &&
    isStatus(t.status) &&
    Array.isArray(t.labels)
    ? (t as TaskItem)
    : undefined
}

/** A task event as a change to the board of one project (or of all): the task to show, or the id to drop. */
type TaskChange = { readonly show: TaskItem } | { readonly drop: number }

/** The change an event makes to the board filtered on `project`; undefined when the board must be read again. */
const taskChange = (event: LiveEvent, project: string): TaskChange | undefined => {
  if (event.type === "task.deleted") {
    const id = (event.data as { id?: unknown } | null)?.id
    return typeof id === "number" ? { drop: id } : undefined
  }
  const task = taskOf(event.data)
  if (task === undefined || (project !== "" && task.project_id === undefined)) return undefined
  return project === "" || task.project_id === project ? { show: task } : { drop: task.id }
}

/** The board's tasks after a change; the same map when it changes nothing (an older copy of a task, say). */
const applyChange = (tasks: Tasks, change: TaskChange, pendingMoves: ReadonlyMap<number, TaskStatus>): Tasks => {
  if ("drop" in change) {
    if (!tasks.has(change.drop)) return tasks
    const next = new Map(tasks)
    next.delete(change.drop)
    return next
  }
  const task = change.show
  const old = tasks.get(task.id)
  if (old !== undefined && old.updated_at > task.updated_at) return tasks
  // A move on its way keeps the card where the user put it until the server answers.
  return new Map(tasks).set(task.id, pendingMoves.has(task.id) ? (old ?? task) : task)
}

const byRecent = (a: TaskItem, b: TaskItem) =>
  a.updated_at < b.updated_at ? 1 : a.updated_at > b.updated_at ? -1 : b.id - a.id

interface CardProps {
  readonly task: TaskItem
  readonly colors: ReadonlyMap<string, string>
  /** The credential may change tasks (`tasks:write`): drag and the Status select are offered. */
  readonly canWrite: boolean
  readonly menuOpen: boolean
  /** Below the first screenful: laid out and painted only near the viewport (`card-later`). */
  readonly later: boolean
  readonly onMenu: (id: number | null) => void
  readonly onMove: (id: number, status: TaskStatus) => void
}

class Card extends Component<CardProps> {
  override shouldComponentUpdate(next: CardProps): boolean {
    const p = this.props
    return (
      next.task !== p.task ||
      next.colors !== p.colors ||
      next.menuOpen !== p.menuOpen ||
      next.canWrite !== p.canWrite ||
      next.later !== p.later
    )
  }

  override render() {
    const { task, colors, canWrite, menuOpen, later, onMenu, onMove } = this.props
    return (
      <li
        class={`card${canWrite ? " card-movable" : ""}${menuOpen ? " card-open" : ""}${later ? " card-later" : ""}`}
        draggable={canWrite}
        data-task-id={task.id}
      >
        <div class="card-top">
          {/* A plain link: the board follows it in place (one listener for all cards). */}
          <a class="card-title" href={`/tasks/${task.id}`}>
            {task.title}
          </a>
          <button
            type="button"
            class="icon-button card-menu-button"
            data-menu={task.id}
            aria-label={`Actions for ${task.title}`}
            aria-expanded={menuOpen}
            onClick={() => onMenu(menuOpen ? null : task.id)}
          >
            ⋯
          </button>
        </div>
        <div class="card-meta">
          {priorityBadge(task.priority)}
          <span class="card-id">#{task.id}</span>
        </div>
        {task.labels.length > 0 && (
          <ul class="chips" aria-label="Labels">
            {task.labels.map((l) => (
              <li key={l}>{labelChip(l, colors.get(l.toLowerCase()))}</li>
            ))}
          </ul>
        )}
        {menuOpen && <CardMenu task={task} canWrite={canWrite} onMove={onMove} onClose={() => onMenu(null)} />}
      </li>
    )
  }
}

const CardMenu = ({
  task,
  canWrite,
  onMove,
  onClose
}: {
  readonly task: TaskItem
  readonly canWrite: boolean
  readonly onMove: (id: number, status: TaskStatus) => void
  readonly onClose: () => void
}) => {
  const ref = useRef<HTMLFieldSetElement>(null)
  useEffect(() => {
    ref.current?.querySelector<HTMLElement>("select, a")?.focus()
    const outside = (e: PointerEvent) => {
      const card = ref.current?.closest(".card")
      if (card !== null && card !== undefined && !card.contains(e.target as Node)) onClose()
    }
    document.addEventListener("pointerdown", outside)
    return () => document.removeEventListener("pointerdown", outside)
  }, [])
  return (
    <fieldset
      ref={ref}
      class="card-menu"
      onKeyDown={(e) => {
        if (e.key === "Escape") {
          e.stopPropagation()
          onClose()
          document.querySelector<HTMLElement>(`[data-menu="${task.id}"]`)?.focus()
        }
      }}
    >
      <legend class="visually-hidden">Change “{task.title}”</legend>
      {canWrite ? (
        <label class="field-inline">
          Status
          <select value={task.status} onChange={(e) => onMove(task.id, e.currentTarget.value as TaskStatus)}>
            <Options values={STATUSES} names={STATUS_NAMES} />
          </select>
        </label>
      ) : (
        <p class="muted card-menu-note">{STATUS_NAMES[task.status]}. Your access lets you read tasks, not move them.</p>
      )}
      <div class="card-menu-actions">
        <Link href={`/tasks/${task.id}`} class="button button-small">
          Open task
        </Link>
        <button type="button" class="button button-small button-quiet" onClick={onClose}>
          Close
        </button>
      </div>
    </fieldset>
  )
}

const Column = ({
  status,
  tasks,
  limit,
  dropTarget,
  ...card
}: {
  readonly status: TaskStatus
  readonly tasks: ReadonlyArray<TaskItem>
  /** How many of its cards are drawn yet (see {@link FIRST_CARDS}). */
  readonly limit: number
  readonly dropTarget: boolean
  readonly colors: ReadonlyMap<string, string>
  readonly canWrite: boolean
  readonly menuFor: number | null
  readonly onMenu: (id: number | null) => void
  readonly onMove: (id: number, status: TaskStatus) => void
}) => (
  <section class={dropTarget ? "column column-drop" : "column"} aria-labelledby={`col-${status}`} data-status={status}>
    <div class="column-head">
      <h2 id={`col-${status}`}>{STATUS_NAMES[status]}</h2>
      <span class="count">
        {tasks.length}
        <span class="visually-hidden"> {tasks.length === 1 ? "task" : "tasks"}</span>
      </span>
    </div>
    {tasks.length === 0 ? (
      <p class="column-empty">{dropTarget ? "Drop here" : "No tasks"}</p>
    ) : (
      <ul class="cards" aria-labelledby={`col-${status}`}>
        {(tasks.length > limit ? tasks.slice(0, limit) : tasks).map((t, i) => (
          <Card
            key={t.id}
            task={t}
            colors={card.colors}
            canWrite={card.canWrite}
            menuOpen={card.menuFor === t.id}
            later={i >= FIRST_CARDS}
            onMenu={card.onMenu}
            onMove={card.onMove}
          />
        ))}
      </ul>
    )}
  </section>
)

export const Board = ({ me }: { readonly me: Me }) => {
  useTitle("Board")
  const [filters, setFiltersState] = useState(savedFilters)
  const [tasks, setTasks] = useState<Tasks | undefined>(undefined)
  const tasksRef = useRef(tasks)
  tasksRef.current = tasks
  const [error, setError] = useState<unknown>(undefined)
  const [menuFor, setMenuFor] = useState<number | null>(null)
  const [creating, setCreating] = useState(false)
  const [dropTarget, setDropTarget] = useState<TaskStatus | null>(null)
  const [limit, setLimit] = useState(FIRST_CARDS)
  const projectList = projects.use()
  const labelList = labels.use()
  const colors = useMemo(() => labelColors(labelList.value), [labelList.value])
  const loading = useRef(false)
  const again = useRef(false)
  const mounted = useRef(false)
  const pendingMoves = useRef(new Map<number, TaskStatus>())
  const changesSinceRead = useRef<Array<TaskChange>>([])
  const reloadTimer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined)
  const canWrite = me.scopes.includes("tasks:write") || me.scopes.includes("admin")

  const setFilters = (f: Filters) => {
    savedFilters = f
    setFiltersState(f)
  }

  /**
   * Reads the board (of the project filtered on) and draws it. One read at a time: a call while
   * one is under way (a poll, the socket's first opening, a filter change) makes it read once
   * more when it is done, after its result is drawn, so the first drawing never waits for a
   * second read of the same thousand tasks, and no answer read earlier overwrites a later one.
   */
  const load = useCallback(async () => {
    if (loading.current) {
      again.current = true
      return
    }
    loading.current = true
    again.current = false
    changesSinceRead.current = []
    const project = savedFilters.project
    try {
      // The labels' colours come with the first drawing of the cards, not in a second one.
      const [list] = await Promise.all([
        takeTasks(project),
        labels.get().value === undefined ? labels.reload() : undefined
      ])
      if (!mounted.current || project !== savedFilters.project) return
      performance.mark("board:data")
      setError(undefined)
      const changes = changesSinceRead.current
      setTasks((prev) => {
        const next = new Map<number, TaskItem>()
        for (const t of list) {
          const old = prev?.get(t.id)
          const pending = pendingMoves.current.get(t.id)
          const fresh = pending !== undefined ? { ...t, status: pending } : t
          // Kept when unchanged, and when newer: an event applied while this read was on its way.
          const kept =
            old !== undefined &&
            (old.updated_at > fresh.updated_at || (old.updated_at === fresh.updated_at && old.status === fresh.status))
          next.set(t.id, kept ? old : fresh)
        }
        return changes.reduce<Tasks>((map, change) => applyChange(map, change, pendingMoves.current), next)
      })
    } catch (e) {
      if (mounted.current && project === savedFilters.project) setError(e)
    } finally {
      loading.current = false
      // Once the frame that shows this read is drawn and the first click on it answered: the read
      // again (the socket opened during this one, say) is of the same thousand tasks.
      if (again.current && mounted.current) setTimeout(() => whenIdle(() => void load()), AGAIN_AFTER_MS)
    }
  }, [])

  useLayoutEffect(() => {
    mounted.current = true
    return () => {
      mounted.current = false
      clearTimeout(reloadTimer.current)
    }
  }, [])

  // Before the first paint, not after it: a read that has already arrived (the board's early one)
  // is drawn in the first frame, not one frame later.
  useLayoutEffect(() => {
    setTasks(undefined)
    setLimit(FIRST_CARDS)
    void load()
  }, [filters.project])

  const reloadSoon = () => {
    clearTimeout(reloadTimer.current)
    reloadTimer.current = setTimeout(() => void load(), 300)
  }

  useLiveRefresh(() => void load())
  useLiveEvents((event: LiveEvent) => {
    if (event.type === "task.deleted" || event.type === "task.created" || event.type === "task.updated") {
      const project = savedFilters.project
      const change = taskChange(event, project)
      if (change === undefined) return reloadSoon()
      // A read on its way may have been answered before this change: it is applied again on its answer.
      if (loading.current) changesSinceRead.current.push(change)
      setTasks((prev) => (prev === undefined ? prev : applyChange(prev, change, pendingMoves.current)))
      return
    }
    // A run moves its task (started: in progress; completed: in review).
    if (event.type.startsWith("run.") && event.type !== "run.log") reloadSoon()
  })

  const move = useCallback(async (id: number, status: TaskStatus) => {
    const original = tasksRef.current?.get(id)
    if (original === undefined || original.status === status) return
    setTasks((prev) =>
      prev === undefined ? prev : new Map(prev).set(id, { ...original, status, updated_at: new Date().toISOString() })
    )
    setMenuFor(null)
    pendingMoves.current.set(id, status)
    try {
      const updated = await api<TaskItem>("PATCH", `/api/tasks/${id}`, { status })
      pendingMoves.current.delete(id)
      setTasks((prev) => (prev === undefined ? prev : new Map(prev).set(id, updated)))
      notify(`Moved “${original.title}” to ${STATUS_NAMES[status]}.`)
    } catch (e) {
      pendingMoves.current.delete(id)
      setTasks((prev) => (prev === undefined ? prev : new Map(prev).set(id, original)))
      notify(`Could not move “${original.title}”: ${messageOf(e)}`, "error")
    }
    // The card is drawn anew in its new column; give the keyboard its menu button back.
    requestAnimationFrame(() => document.querySelector<HTMLElement>(`[data-menu="${id}"]`)?.focus())
  }, [])

  const columns = useMemo(() => {
    const out = new Map<TaskStatus, Array<TaskItem>>(STATUSES.map((s) => [s, []]))
    if (tasks === undefined) return out
    const label = filters.label.toLowerCase()
    for (const t of tasks.values()) {
      if (filters.priority !== "" && t.priority !== filters.priority) continue
      if (label !== "" && !t.labels.some((l) => l.toLowerCase() === label)) continue
      out.get(t.status)?.push(t)
    }
    for (const list of out.values()) list.sort(byRecent)
    return out
  }, [tasks, filters.priority, filters.label])

  // The cards below the fold, once the frame with those above it is drawn.
  const longest = Math.max(0, ...[...columns.values()].map((c) => c.length))
  const loaded = tasks !== undefined
  useEffect(() => {
    if (!loaded || limit >= longest) return
    // In the browser's idle time: a click or a key press on the cards already drawn goes first.
    return whenIdle(() => setLimit((n) => n * 4))
  }, [loaded, limit, longest])

  const filtered = filters.project !== "" || filters.priority !== "" || filters.label !== ""
  const shown = [...columns.values()].reduce((n, c) => n + c.length, 0)

  const dragStatus = (e: DragEvent): TaskStatus | null => {
    const column = (e.target as Element | null)?.closest?.("[data-status]")
    const s = column?.getAttribute("data-status")
    return isStatus(s) ? s : null
  }

  return (
    <div class="page page-board">
      <div class="toolbar">
        <h1 tabIndex={-1}>Board</h1>
        <fieldset class="filters">
          <legend class="visually-hidden">Filters</legend>
          <label class="field-inline">
            Project
            <select
              value={filters.project}
              onChange={(e) => setFilters({ ...filters, project: e.currentTarget.value })}
            >
              <option value="">All projects</option>
              {(projectList.value ?? []).map((p) => (
                <option key={p.id} value={p.id}>
                  {p.name}
                </option>
              ))}
            </select>
          </label>
          <label class="field-inline">
            Priority
            <select
              value={filters.priority}
              onChange={(e) => setFilters({ ...filters, priority: e.currentTarget.value as TaskPriority | "" })}
            >
              <option value="">Any priority</option>
              <Options values={PRIORITIES} names={PRIORITY_NAMES} />
            </select>
          </label>
          <label class="field-inline">
            Label
            <select value={filters.label} onChange={(e) => setFilters({ ...filters, label: e.currentTarget.value })}>
              <option value="">Any label</option>
              {(labelList.value ?? []).map((l) => (
                <option key={l.id} value={l.name}>
                  {l.name}
                </option>
              ))}
            </select>
          </label>
          {filtered && (
            <button
              type="button"
              class="button button-quiet button-small"
              onClick={() => setFilters({ project: "", priority: "", label: "" })}
            >
              Clear filters
            </button>
          )}
        </fieldset>
        {canWrite && (
          <button type="button" class="button button-primary" onClick={() => setCreating(true)}>
            New task
          </button>
        )}
      </div>

      {error !== undefined && <ErrorState error={error} onRetry={() => void load()} />}
      {tasks === undefined && error === undefined && <Loading label="Loading the board…" />}
      {tasks !== undefined && shown === 0 && (
        <Empty title={filtered ? "No task matches these filters." : "No tasks yet."}>
          {filtered ? (
            <p>Change or clear the filters to see more of the board.</p>
          ) : (
            <p>Create a task, then drag it across the columns as the work moves on.</p>
          )}
        </Empty>
      )}
      {tasks !== undefined && (
        // biome-ignore lint/a11y/noStaticElementInteractions: drag and drop is the pointer's way; keyboards use each card's Status select
        // biome-ignore lint/a11y/useKeyWithClickEvents: the clicks handled are the cards' links', which Enter fires too
        <div
          class="board"
          onClick={(e) => {
            const link = (e.target as Element | null)?.closest?.("a.card-title")
            const href = link?.getAttribute("href")
            if (
              href === null ||
              href === undefined ||
              e.button !== 0 ||
              e.metaKey ||
              e.ctrlKey ||
              e.shiftKey ||
              e.altKey
            ) {
              return
            }
            e.preventDefault()
            navigate(href)
          }}
          onDragStart={(e) => {
            if (!canWrite) return
            const card = (e.target as Element | null)?.closest?.("[data-task-id]")
            const id = card?.getAttribute("data-task-id")
            if (id === null || id === undefined || e.dataTransfer === null) return
            e.dataTransfer.setData(DRAG_TYPE, id)
            e.dataTransfer.effectAllowed = "move"
            card?.classList.add("card-dragging")
            setMenuFor(null)
          }}
          onDragEnd={(e) => {
            ;(e.target as Element | null)?.closest?.("[data-task-id]")?.classList.remove("card-dragging")
            setDropTarget(null)
          }}
          onDragOver={(e) => {
            const s = dragStatus(e)
            if (!canWrite || s === null || e.dataTransfer === null || !e.dataTransfer.types.includes(DRAG_TYPE)) return
            e.preventDefault()
            e.dataTransfer.dropEffect = "move"
            if (s !== dropTarget) setDropTarget(s)
          }}
          onDragLeave={(e) => {
            if (e.relatedTarget === null || !(e.currentTarget as Element).contains(e.relatedTarget as Node)) {
              setDropTarget(null)
            }
          }}
          onDrop={(e) => {
            const s = dragStatus(e)
            const id = Number(e.dataTransfer?.getData(DRAG_TYPE))
            setDropTarget(null)
            if (!canWrite || s === null || !Number.isInteger(id) || id <= 0) return
            e.preventDefault()
            void move(id, s)
          }}
        >
          {STATUSES.map((s) => (
            <Column
              key={s}
              status={s}
              tasks={columns.get(s) ?? []}
              limit={limit}
              dropTarget={dropTarget === s}
              colors={colors}
              canWrite={canWrite}
              menuFor={menuFor}
              onMenu={setMenuFor}
              onMove={move}
            />
          ))}
        </div>
      )}

      {creating && (
        <NewTaskDialog
          defaultProject={filters.project}
          onClose={() => setCreating(false)}
          onCreated={(task) => {
            setCreating(false)
            if (filters.project === "" || task.project_id === filters.project) {
              setTasks((prev) => (prev === undefined ? prev : new Map(prev).set(task.id, task)))
            }
            void labels.reload()
            notify(`Created “${task.title}”.`)
          }}
        />
      )}
    </div>
  )
}
