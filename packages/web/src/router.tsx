/** The app's few client routes on the History API; the server answers `index.html` for each. */
import type { ComponentChildren, JSX } from "preact"
import { useEffect, useState } from "preact/hooks"

export type Route =
  | { readonly name: "board" }
  | { readonly name: "task"; readonly id: number }
  | { readonly name: "projects" }
  | { readonly name: "keys" }
  | { readonly name: "agents" }
  | { readonly name: "not-found" }

export const parseRoute = (pathname: string): Route => {
  if (pathname === "/") return { name: "board" }
  if (pathname === "/projects") return { name: "projects" }
  if (pathname === "/settings/keys") return { name: "keys" }
  if (pathname === "/settings/agents") return { name: "agents" }
  const task = /^\/tasks\/([1-9][0-9]{0,14})$/.exec(pathname)
  if (task?.[1] !== undefined) return { name: "task", id: Number(task[1]) }
  return { name: "not-found" }
}

const listeners = new Set<() => void>()
const emit = () => {
  for (const l of listeners) l()
}
window.addEventListener("popstate", emit)

export const navigate = (to: string): void => {
  if (to === location.pathname + location.search) return
  history.pushState(null, "", to)
  emit()
}

/** The current path; re-renders on navigation. */
export const usePathname = (): string => {
  const [path, setPath] = useState(location.pathname)
  useEffect(() => {
    const update = () => setPath(location.pathname)
    listeners.add(update)
    return () => {
      listeners.delete(update)
    }
  }, [])
  return path
}

type LinkProps = Omit<JSX.HTMLAttributes<HTMLAnchorElement>, "href"> & {
  readonly href: string
  readonly children: ComponentChildren
}

/** An ordinary link (open in a new tab works) that navigates in place on a plain click. */
export const Link = ({ href, children, ...rest }: LinkProps) => (
  <a
    {...rest}
    href={href}
    onClick={(e) => {
      if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return
      e.preventDefault()
      navigate(href)
    }}
  >
    {children}
  </a>
)
