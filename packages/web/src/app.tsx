/** The shell: who is signed in, the header and navigation, and the screen for the current path. */
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks"
import { ApiError, api, onUnauthorized } from "./api.js"
import { forgetEarlyTasks } from "./boardData.js"
import { Empty, ErrorState, Loading, Notices, useTitle } from "./components.js"
import { type LiveMode, live, useLiveMode } from "./live.js"
import { agents, labels, projects } from "./resources.js"
import { Link, parseRoute, usePathname } from "./router.js"
import { AgentsScreen } from "./screens/Agents.js"
import { Board } from "./screens/Board.js"
import { KeysScreen } from "./screens/Keys.js"
import { ProjectsScreen } from "./screens/Projects.js"
import { SignIn } from "./screens/SignIn.js"
import { TaskScreen } from "./screens/Task.js"
import type { Me } from "./types.js"

type Session =
  | { readonly status: "loading" }
  | { readonly status: "failed"; readonly error: unknown }
  | { readonly status: "signed-out" }
  | { readonly status: "signed-in"; readonly me: Me }

const SESSION_RENEW_MS = 24 * 3600 * 1000

let earlyMe: Promise<Me> | undefined

/**
 * Asks who is signed in as the script starts, before the first drawing (the server has the
 * browser preload it with the page): the app's first screen waits on this answer.
 */
export const prefetchMe = (): Promise<Me> => {
  earlyMe = api<Me>("GET", "/api/auth/me")
  earlyMe.catch(() => {})
  return earlyMe
}

/** The early answer once, then a new request each time (Try again). */
const takeMe = (): Promise<Me> => {
  const taken = earlyMe
  earlyMe = undefined
  return taken ?? api<Me>("GET", "/api/auth/me")
}

const LIVE_TEXT: Record<LiveMode, string> = {
  connecting: "Connecting…",
  live: "Live",
  polling: "Refreshing every few seconds"
}

const LiveIndicator = () => {
  const mode = useLiveMode()
  return (
    <span class={`live live-${mode}`} title={LIVE_TEXT[mode]}>
      <span class="live-dot" aria-hidden="true" />
      <span class="live-text">{mode === "polling" ? "Polling" : LIVE_TEXT[mode]}</span>
    </span>
  )
}

const NotFound = () => {
  useTitle("Not found")
  return (
    <div class="page">
      <h1 tabIndex={-1}>Page not found</h1>
      <Empty title="There is nothing at this address.">
        <Link href="/" class="button">
          Back to the board
        </Link>
      </Empty>
    </div>
  )
}

export const App = () => {
  const [session, setSession] = useState<Session>({ status: "loading" })
  const pathname = usePathname()
  const mainRef = useRef<HTMLElement>(null)
  const firstPath = useRef(true)

  const loadMe = () => {
    setSession({ status: "loading" })
    takeMe().then(
      (me) => setSession({ status: "signed-in", me }),
      (error: unknown) => {
        // The board's early read failed alike, or is not this session's: it reads anew.
        forgetEarlyTasks()
        setSession(
          error instanceof ApiError && error.status === 401 ? { status: "signed-out" } : { status: "failed", error }
        )
      }
    )
  }

  // Before the first paint: an answer already in (the early one) is drawn in the first frame.
  useLayoutEffect(() => {
    onUnauthorized(() => setSession({ status: "signed-out" }))
    loadMe()
  }, [])

  const signedIn = session.status === "signed-in"
  useEffect(() => {
    if (!signedIn) return
    // A session lasts 7 days from sign-in or refresh: one used within its last day is renewed.
    const credential = session.status === "signed-in" ? session.me.credential : undefined
    if (credential?.kind === "session" && credential.expires_at !== null) {
      if (Date.parse(credential.expires_at) - Date.now() < SESSION_RENEW_MS)
        void api("POST", "/api/auth/refresh").catch(() => {})
    }
    live.start()
    return () => {
      live.stop()
      for (const r of [projects, labels, agents]) r.reset()
    }
  }, [signedIn])

  // A new screen: move focus to its heading so a screen reader starts there, not at the header.
  // A screen still loading has none yet: focus waits on `main` for it, unless the reader moves on.
  useEffect(() => {
    if (firstPath.current) {
      firstPath.current = false
      return
    }
    window.scrollTo(0, 0)
    const main = mainRef.current
    if (main === null) return
    const heading = () => main.querySelector<HTMLElement>("h1")
    const now = heading()
    if (now !== null) return void now.focus()
    main.focus()
    const observer = new MutationObserver(() => {
      const h1 = heading()
      if (h1 === null) return
      observer.disconnect()
      if (document.activeElement === main) h1.focus()
    })
    observer.observe(main, { childList: true, subtree: true })
    return () => observer.disconnect()
  }, [pathname])

  if (session.status === "loading") {
    return (
      <main class="center">
        <Loading label="Loading Taskwright…" />
      </main>
    )
  }
  if (session.status === "failed") {
    return (
      <main class="center">
        <ErrorState error={session.error} onRetry={loadMe} />
      </main>
    )
  }
  if (session.status === "signed-out") {
    return (
      <>
        <Notices />
        <SignIn onSignedIn={(me) => setSession({ status: "signed-in", me })} />
      </>
    )
  }

  const me = session.me
  const admin = me.scopes.includes("admin")
  const route = parseRoute(pathname)
  const current = (name: string) => (route.name === name ? "page" : undefined)
  const signOut = async () => {
    try {
      await api("POST", "/api/auth/logout")
    } finally {
      setSession({ status: "signed-out" })
    }
  }

  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <Link href="/" class="brand">
          <span class="brand-mark" aria-hidden="true" />
          Taskwright
        </Link>
        <nav aria-label="Main">
          <ul class="nav-list">
            <li>
              <Link href="/" aria-current={current("board")}>
                Board
              </Link>
            </li>
            <li>
              <Link href="/projects" aria-current={current("projects")}>
                Projects
              </Link>
            </li>
            <li>
              <Link href="/settings/keys" aria-current={current("keys")}>
                API keys
              </Link>
            </li>
            {admin && (
              <li>
                <Link href="/settings/agents" aria-current={current("agents")}>
                  Agents
                </Link>
              </li>
            )}
          </ul>
        </nav>
        <div class="top-end">
          <LiveIndicator />
          <span class="who" title={me.user.email}>
            {me.user.name}
          </span>
          <button type="button" class="button button-quiet" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      <Notices />
      <main id="main" ref={mainRef} tabIndex={-1}>
        {route.name === "board" && <Board me={me} />}
        {route.name === "task" && <TaskScreen key={route.id} id={route.id} me={me} />}
        {route.name === "projects" && <ProjectsScreen />}
        {route.name === "keys" && <KeysScreen me={me} />}
        {route.name === "agents" && <AgentsScreen admin={admin} />}
        {route.name === "not-found" && <NotFound />}
      </main>
    </>
  )
}
