/**
 * Lists several screens share (projects, labels, the signed-in user's agents): loaded once,
 * reloaded when an event or a poll says they may have changed, and kept as the same object when
 * a reload brings nothing new, so screens that render from them do not redraw for nothing.
 */
import { useEffect, useState } from "preact/hooks"
import { allPages, api } from "./api.js"
import { live } from "./live.js"
import type { Agent, Label, Project } from "./types.js"

export interface ResourceState<T> {
  readonly value: T | undefined
  readonly error: unknown
  readonly loading: boolean
}

export interface Resource<T> {
  get(): ResourceState<T>
  /** Reloads (deduplicated while a load is under way); resolves when done. */
  reload(): Promise<void>
  /** Forgets the value (signing out). */
  reset(): void
  use(): ResourceState<T> & { readonly reload: () => Promise<void> }
}

export const resource = <T>(load: () => Promise<T>, reloadOn: ReadonlyArray<string>): Resource<T> => {
  let state: ResourceState<T> = { value: undefined, error: undefined, loading: false }
  let json = ""
  let pending: Promise<void> | undefined
  let users = 0
  const listeners = new Set<(s: ResourceState<T>) => void>()
  const set = (next: ResourceState<T>) => {
    state = next
    for (const l of listeners) l(state)
  }
  const reload = (): Promise<void> => {
    pending ??= (async () => {
      if (state.value === undefined) set({ ...state, loading: true })
      try {
        const value = await load()
        const text = JSON.stringify(value)
        if (text === json && state.value !== undefined) {
          if (state.error !== undefined || state.loading) set({ ...state, error: undefined, loading: false })
        } else {
          json = text
          set({ value, error: undefined, loading: false })
        }
      } catch (error) {
        set({ ...state, error, loading: false })
      } finally {
        pending = undefined
      }
    })()
    return pending
  }
  live.onEvent((e) => {
    if (users > 0 && reloadOn.includes(e.type)) void reload()
  })
  live.onRefresh(() => {
    if (users > 0 && state.value !== undefined) void reload()
  })
  return {
    get: () => state,
    reload,
    reset: () => {
      json = ""
      set({ value: undefined, error: undefined, loading: false })
    },
    use: () => {
      const [s, setS] = useState(state)
      useEffect(() => {
        users++
        listeners.add(setS)
        setS(state)
        if (state.value === undefined && !state.loading) void reload()
        return () => {
          users--
          listeners.delete(setS)
        }
      }, [])
      return { ...s, reload }
    }
  }
}

export const projects = resource(
  () => allPages<"projects", Project>("/api/projects", "projects"),
  ["project.created", "project.deleted"]
)

export const labels = resource(
  () => allPages<"labels", Label>("/api/labels", "labels"),
  ["label.created", "task.created", "task.updated"]
)

export const agents = resource(
  () => api<{ agents: Record<string, Agent> }>("GET", "/api/agents").then((r) => r.agents),
  []
)

/** Label name (case-folded) → colour. */
export const labelColors = (list: ReadonlyArray<Label> | undefined): ReadonlyMap<string, string> =>
  new Map((list ?? []).map((l) => [l.name.toLowerCase(), l.color]))
