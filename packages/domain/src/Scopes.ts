import { Schema } from "effect"

/** Every scope a credential can carry (spec part 5). `admin` implies all the others. */
export const Scope = Schema.Literal(
  "tasks:read",
  "tasks:write",
  "projects:read",
  "projects:write",
  "agents:run",
  "admin"
)
export type Scope = typeof Scope.Type

export const allScopes: ReadonlyArray<Scope> = Scope.literals

/** The scopes a user may hand to a credential: admins everything, others everything but `admin`. */
export const grantableScopes = (isAdmin: boolean): ReadonlyArray<Scope> =>
  isAdmin ? allScopes : allScopes.filter((s) => s !== "admin")

/** Parses the comma-separated form kept in the store, dropping anything unknown. */
export const parseScopes = (text: string): Set<Scope> => {
  const out = new Set<Scope>()
  for (const part of text.split(",")) {
    const s = part.trim()
    if ((allScopes as ReadonlyArray<string>).includes(s)) out.add(s as Scope)
  }
  return out
}
