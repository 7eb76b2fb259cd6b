import { useId, useState } from "preact/hooks"
import { api } from "../api.js"
import { Dialog, Field, FieldError, FormActions, fieldError, Options, useSubmit } from "../components.js"
import { labels, projects } from "../resources.js"
import { PRIORITIES, PRIORITY_NAMES, type TaskDetail, type TaskPriority } from "../types.js"

/** Comma-separated label names, trimmed, without empties or repeats. */
export const parseLabels = (text: string): Array<string> => {
  const seen = new Set<string>()
  const out: Array<string> = []
  for (const raw of text.split(",")) {
    const name = raw.trim()
    if (name === "" || seen.has(name.toLowerCase())) continue
    seen.add(name.toLowerCase())
    out.push(name)
  }
  return out
}

/** "New task": the API validates; its message for each field appears next to that field. */
export const NewTaskDialog = ({
  defaultProject,
  onClose,
  onCreated
}: {
  readonly defaultProject: string
  readonly onClose: () => void
  readonly onCreated: (task: TaskDetail) => void
}) => {
  const id = useId()
  const projectList = projects.use()
  const labelList = labels.use()
  const [title, setTitle] = useState("")
  const [description, setDescription] = useState("")
  const [priority, setPriority] = useState<TaskPriority>("medium")
  const [labelText, setLabelText] = useState("")
  const [project, setProject] = useState(defaultProject)
  const { busy, error, onSubmit } = useSubmit(async () => {
    const task = await api<TaskDetail>("POST", "/api/tasks", {
      title,
      description,
      priority,
      labels: parseLabels(labelText),
      ...(project === "" ? {} : { project_id: project })
    })
    onCreated(task)
  })

  const known = (labelList.value ?? []).map((l) => l.name).join(", ")

  return (
    <Dialog title="New task" onClose={onClose} wide>
      <form onSubmit={onSubmit} noValidate class="form">
        <Field
          label="Title"
          value={title}
          onInput={(e) => setTitle(e.currentTarget.value)}
          error={fieldError(error, "title")}
          autoComplete="off"
        />
        <div class="field">
          <label for={`${id}-description`}>Description</label>
          <textarea
            id={`${id}-description`}
            rows={6}
            value={description}
            onInput={(e) => setDescription(e.currentTarget.value)}
            aria-describedby={`${id}-description-hint${fieldError(error, "description") === undefined ? "" : ` ${id}-description-error`}`}
            aria-invalid={fieldError(error, "description") !== undefined ? true : undefined}
          />
          <p class="hint" id={`${id}-description-hint`}>
            Markdown: **bold**, `code`, lists, links.
          </p>
          <FieldError id={`${id}-description-error`} message={fieldError(error, "description")} />
        </div>
        <div class="form-row">
          <div class="field">
            <label for={`${id}-priority`}>Priority</label>
            <select
              id={`${id}-priority`}
              value={priority}
              onChange={(e) => setPriority(e.currentTarget.value as TaskPriority)}
              aria-describedby={fieldError(error, "priority") === undefined ? undefined : `${id}-priority-error`}
            >
              <Options values={PRIORITIES} names={PRIORITY_NAMES} />
            </select>
            <FieldError id={`${id}-priority-error`} message={fieldError(error, "priority")} />
          </div>
          <div class="field">
            <label for={`${id}-project`}>Project</label>
            <select
              id={`${id}-project`}
              value={project}
              onChange={(e) => setProject(e.currentTarget.value)}
              aria-invalid={fieldError(error, "project_id") !== undefined ? true : undefined}
              aria-describedby={fieldError(error, "project_id") === undefined ? undefined : `${id}-project-error`}
            >
              <option value="">No project</option>
              {(projectList.value ?? []).map((p) => (
                <option key={p.id} value={p.id}>
                  {p.name}
                </option>
              ))}
            </select>
            <FieldError id={`${id}-project-error`} message={fieldError(error, "project_id")} />
          </div>
        </div>
        <Field
          label="Labels"
          value={labelText}
          onInput={(e) => setLabelText(e.currentTarget.value)}
          error={fieldError(error, "labels")}
          hint={known === "" ? "Separate labels with commas." : `Separate labels with commas. Existing: ${known}.`}
          autoComplete="off"
        />
        <FormActions
          error={error}
          fields={["title", "description", "priority", "labels", "project_id"]}
          busy={busy}
          submit="Create task"
          onCancel={onClose}
        />
      </form>
    </Dialog>
  )
}
