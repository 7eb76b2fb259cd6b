/** Password hashing: argon2id at OWASP's minimum (m = 19 MiB, t = 2, p = 1). */
import { createRequire } from "node:module"
import { Effect } from "effect"

type Argon2 = typeof import("@node-rs/argon2")

// The native module is loaded on first use: it costs start-up time and memory (measured 8 ms and
// 4.6 MiB) that a server whose users come with API keys never needs. Required, not imported: the
// CLI runs its bundle as a script from V8's code cache, where a dynamic import has no loader.
let argon2: Argon2 | undefined
const loadArgon2 = (): Argon2 => {
  argon2 ??= createRequire(import.meta.url)("@node-rs/argon2") as Argon2
  return argon2
}

const options = { algorithm: 2 /* Argon2id */, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const

/**
 * An argon2id hash, with the same parameters, of a random password nobody knows. A login for an
 * unknown email (or a user without a password) is checked against it, so it costs what a wrong
 * password costs and answers the same.
 */
const DUMMY_HASH = "$argon2id$v=19$m=19456,t=2,p=1$w3wbWfwvJ0Klh+YtlyOg/g$XLHjMFtmwyZxNUGxorCgnahnnLqx6YfroN6UFNUEGJM"

export const hashPassword = (password: string): Effect.Effect<string> =>
  Effect.promise(() => loadArgon2().hash(password, options))

/** False for a wrong password or a malformed stored hash; a module that cannot load is a defect. */
export const verifyPassword = (stored: string, password: string): Effect.Effect<boolean> =>
  Effect.promise(() =>
    loadArgon2()
      .verify(stored, password)
      .catch(() => false)
  )

/** Checks `password` against `stored`, or against the dummy hash when there is none: same cost either way. */
export const verifyPasswordOrDummy = (stored: string | null, password: string): Effect.Effect<boolean> =>
  Effect.map(verifyPassword(stored ?? DUMMY_HASH, password), (ok) => ok && stored !== null)
