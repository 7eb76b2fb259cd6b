/** Password hashing: argon2id at OWASP's minimum (m = 19 MiB, t = 2, p = 1). */
import { hash, verify } from "@node-rs/argon2"
import { Effect } from "effect"

const options = { algorithm: 2 /* Argon2id */, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const

export const hashPassword = (password: string): Effect.Effect<string> => Effect.promise(() => hash(password, options))

export const verifyPassword = (stored: string, password: string): Effect.Effect<boolean> =>
  Effect.promise(() => verify(stored, password).catch(() => false))
