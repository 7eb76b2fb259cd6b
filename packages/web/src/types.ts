/** The JSON shapes of Taskwright's public HTTP API that the board reads and writes. */

export const STATUSES = ["backlog", "todo", "in_progress", "in_review", "done", "cancelled"] as const
export type TaskStatus = (typeof STATUSES)[number]

export const STATUS_NAMES: Record<TaskStatus, string> = {
  backlog: "Backlog",
  todo: "To do",
  in_progress: "In progress",
  in_review: "In review",
  done: "Done",
  cancelled: "Cancelled"
}

export const PRIORITIES = ["low", "medium", "high", "urgent"] as const
export type TaskPriority = (typeof PRIORITIES)[number]

export const PRIORITY_NAMES: Record<TaskPriority, string> = {
  low: "Low",
  medium: "Medium",
  high: "High",
  urgent: "Urgent"
}

export const AUTONOMIES = ["read-only", "workspace-write", "danger-full-access"] as const
export type Autonomy = (typeof AUTONOMIES)[number]

export const SCOPES = ["tasks:read", "tasks:write", "projects:read", "projects:write", "agents:run", "admin"] as const
export type Scope = (typeof SCOPES)[number]

/** A task as lists show it; the get-task answer adds `project_id` and `agent_runs`. */
export interface TaskItem {
  readonly id: number
  readonly title: string
  readonly description: string
  readonly status: TaskStatus
  readonly priority: TaskPriority
  readonly labels: ReadonlyArray<string>
  readonly created_at: string
  readonly updated_at: string
  readonly project_id?: string | null
}

export type RunStatus = "running" | "completed" | "failed" | "stopped"

export interface RunSummary {
  readonly id: string
  readonly agent: string
  readonly status: RunStatus
  readonly started_at: string
  readonly completed_at: string | null
}

export interface TaskDetail extends TaskItem {
  readonly project_id: string | null
  readonly agent_runs: ReadonlyArray<RunSummary>
}

export interface Run extends RunSummary {
  readonly task_id: number
  readonly branch: string
  readonly autonomy: Autonomy
  readonly error: string | null
  readonly output: {
    readonly files_modified: ReadonlyArray<string>
    readonly lines_added: number
    readonly lines_removed: number
    readonly usage?: {
      readonly input_tokens: number
      readonly output_tokens: number
      readonly cost_usd: number | null
    }
    readonly commit?: string
  }
}

export type LogLevel = "debug" | "info" | "warn" | "error"

export interface LogEntry {
  readonly seq: number
  readonly timestamp: string
  readonly level: LogLevel
  readonly message: string
}

export interface Project {
  readonly id: string
  readonly name: string
  readonly path: string
  readonly git_url: string | null
  readonly created_at: string
}

export interface Label {
  readonly id: string
  readonly name: string
  readonly color: string
}

export interface User {
  readonly id: string
  readonly email: string
  readonly name: string
}

export interface Me {
  readonly user: User
  readonly scopes: ReadonlyArray<Scope>
  readonly credential?: { readonly kind: string; readonly expires_at: string | null }
}

export interface ApiKey {
  readonly id: string
  readonly name: string
  readonly prefix: string
  readonly scopes: ReadonlyArray<Scope>
  readonly created_at: string
  readonly expires_at: string | null
  readonly revoked_at: string | null
  readonly last_used_at: string | null
}

export interface ApiKeyWithSecret extends ApiKey {
  readonly secret: string
}

export interface KeyUsage {
  readonly total_requests: number
  readonly last_used_at: string | null
  readonly by_day: ReadonlyArray<{ readonly date: string; readonly count: number }>
}

export interface Agent {
  readonly enabled: boolean
  readonly model: string
  readonly autonomy: Autonomy
  readonly timeout_s: number
}

export interface Page {
  readonly total: number
  readonly limit: number
  readonly offset: number
}

/** A message of the events socket. */
export interface LiveEvent {
  readonly id: number
  readonly type: string
  readonly timestamp: string
  readonly data: unknown
}
