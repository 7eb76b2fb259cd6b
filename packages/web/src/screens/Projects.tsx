import { useState } from "preact/hooks"
import { api } from "../api.js"
import {
  Confirm,
  Empty,
  ErrorState,
  Field,
  FormActions,
  fieldError,
  formatDate,
  Loading,
  notify,
  useSubmit,
  useTitle
} from "../components.js"
import { projects } from "../resources.js"
import type { Project } from "../types.js"

const CreateProject = () => {
  const [name, setName] = useState("")
  const [path, setPath] = useState("")
  const [gitUrl, setGitUrl] = useState("")
  const { busy, error, onSubmit } = useSubmit(async () => {
    const created = await api<Project>("POST", "/api/projects", {
      name,
      path,
      ...(gitUrl.trim() === "" ? {} : { git_url: gitUrl.trim() })
    })
    setName("")
    setPath("")
    setGitUrl("")
    await projects.reload()
    notify(`Created the project “${created.name}”.`)
  })
  return (
    <form class="panel form" aria-labelledby="new-project-heading" noValidate onSubmit={onSubmit}>
      <h2 id="new-project-heading">New project</h2>
      <Field
        label="Name"
        value={name}
        onInput={(e) => setName(e.currentTarget.value)}
        error={fieldError(error, "name")}
      />
      <Field
        label="Path"
        value={path}
        onInput={(e) => setPath(e.currentTarget.value)}
        error={fieldError(error, "path")}
        hint="An absolute path on the server: an existing git repository, or where to clone the Git URL."
        autoComplete="off"
      />
      <Field
        label="Git URL"
        value={gitUrl}
        onInput={(e) => setGitUrl(e.currentTarget.value)}
        error={fieldError(error, "git_url")}
        hint="Optional: https://, ssh://, git@host: or file:// — cloned into the path."
        autoComplete="off"
      />
      <FormActions
        error={error}
        fields={["name", "path", "git_url"]}
        busy={busy}
        submit={busy ? "Creating…" : "Create project"}
      />
    </form>
  )
}

/** Projects: the list, a form to create one (over a path, or cloning a git URL), deletion. */
export const ProjectsScreen = () => {
  useTitle("Projects")
  const list = projects.use()
  const [deleting, setDeleting] = useState<Project | null>(null)
  const [cascade, setCascade] = useState(false)

  return (
    <div class="page">
      <div class="toolbar">
        <h1 tabIndex={-1}>Projects</h1>
      </div>
      <div class="two-col">
        <section aria-labelledby="project-list-heading">
          <h2 id="project-list-heading" class="visually-hidden">
            Your projects
          </h2>
          {list.error !== undefined && <ErrorState error={list.error} onRetry={() => void list.reload()} />}
          {list.value === undefined && list.error === undefined && <Loading label="Loading projects…" />}
          {list.value?.length === 0 && (
            <Empty title="No projects yet.">
              <p>A project is a git repository on the server that agents work in. Create one with the form.</p>
            </Empty>
          )}
          {list.value !== undefined && list.value.length > 0 && (
            <ul class="list">
              {list.value.map((p) => (
                <li key={p.id} class="list-item">
                  <div class="list-main">
                    <strong>{p.name}</strong>
                    <code class="path">{p.path}</code>
                    {p.git_url !== null && <span class="muted">from {p.git_url}</span>}
                    <span class="muted">Created {formatDate(p.created_at)}</span>
                  </div>
                  <button
                    type="button"
                    class="button button-small button-danger"
                    aria-label={`Delete ${p.name}`}
                    onClick={() => {
                      setCascade(false)
                      setDeleting(p)
                    }}
                  >
                    Delete
                  </button>
                </li>
              ))}
            </ul>
          )}
        </section>
        <CreateProject />
      </div>
      {deleting !== null && (
        <Confirm
          title={`Delete ${deleting.name}?`}
          message="The project is removed from Taskwright; its directory on the server stays as it is."
          confirmLabel="Delete project"
          onClose={() => setDeleting(null)}
          onConfirm={async () => {
            await api("DELETE", `/api/projects/${deleting.id}${cascade ? "?cascade=true" : ""}`)
            notify(`Deleted the project “${deleting.name}”.`)
            setDeleting(null)
            await projects.reload()
          }}
        >
          <label class="check">
            <input type="checkbox" checked={cascade} onChange={(e) => setCascade(e.currentTarget.checked)} />
            Also delete its tasks (otherwise a project with tasks is kept)
          </label>
        </Confirm>
      )}
    </div>
  )
}
