import { useState } from "preact/hooks"
import { api, messageOf } from "../api.js"
import { Field, useSubmit, useTitle } from "../components.js"
import type { Me } from "../types.js"

/** Email and password; a refusal shows the API's own message. */
export const SignIn = ({ onSignedIn }: { readonly onSignedIn: (me: Me) => void }) => {
  useTitle("Sign in")
  const [email, setEmail] = useState("")
  const [password, setPassword] = useState("")
  const { busy, error, onSubmit } = useSubmit(async () => {
    await api("POST", "/api/auth/login", { email, password })
    onSignedIn(await api<Me>("GET", "/api/auth/me"))
  })
  const message = error === undefined ? undefined : messageOf(error)

  return (
    <main class="signin">
      <div class="signin-card">
        <p class="brand brand-large">
          <span class="brand-mark" aria-hidden="true" />
          Taskwright
        </p>
        <h1>Sign in</h1>
        <form onSubmit={onSubmit} noValidate aria-describedby={message === undefined ? undefined : "signin-error"}>
          <Field
            label="Email"
            type="email"
            autoComplete="username"
            value={email}
            onInput={(e) => setEmail(e.currentTarget.value)}
          />
          <Field
            label="Password"
            type="password"
            autoComplete="current-password"
            value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
          />
          {message !== undefined && (
            <p class="form-error" id="signin-error" role="alert">
              {message}
            </p>
          )}
          <button type="submit" class="button button-primary button-block" disabled={busy}>
            {busy ? "Signing in…" : "Sign in"}
          </button>
        </form>
      </div>
    </main>
  )
}
