/** The events a task's changes append, where more than one service makes them. */
import type { EventDraft, ProjectId, TaskId } from "@taskwright/domain"
import { type TaskRow, toCreatedTask } from "./TasksRepo.js"

/** `task.deleted`: which task, and the project it was in. */
export const taskDeleted = (row: {
  readonly id: TaskId
  readonly owner_id: string
  readonly project_id: ProjectId | null
}): EventDraft => ({
  type: "task.deleted",
  ownerId: row.owner_id,
  data: { id: Number(row.id), project_id: row.project_id }
})

/** `task.updated`: the task as it is now (with `project_id`, without its runs: those have their own events). */
export const taskUpdated = (row: TaskRow): EventDraft => ({
  type: "task.updated",
  ownerId: row.owner_id,
  data: toCreatedTask(row)
})
