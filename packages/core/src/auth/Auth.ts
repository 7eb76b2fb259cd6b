/**
 * Authentication: turns the credential of a request into an {@link Actor} or `Unauthorized`.
 * API keys are checked for shape and checksum before any lookup, then found by their SHA-256
 * and compared in constant time.
 */
import { Effect } from "effect"
import { Unauthorized } from "../domain/Errors.js"
import { UsersRepo } from "../users/UsersRepo.js"
import type { Actor } from "./Actor.js"
import { parseScopes } from "./Scopes.js"
import { digestsEqual, hashSecret, isWellFormedApiKey } from "./Secrets.js"

const invalid = new Unauthorized({ message: "invalid or expired credential", details: {} })
const missing = new Unauthorized({
  message: "authentication required: send Authorization: Bearer <API key>",
  details: {}
})

/** `Bearer <token>` → the token, case-insensitive scheme. */
export const bearerToken = (header: string | undefined): string | undefined => {
  if (header === undefined) return undefined
  const match = /^Bearer[ ]+([^ ]+)[ ]*$/i.exec(header)
  return match?.[1]
}

export class Auth extends Effect.Service<Auth>()("@taskwright/core/Auth", {
  effect: Effect.gen(function* () {
    const users = yield* UsersRepo

    const apiKey = (secret: string) => {
      if (!isWellFormedApiKey(secret)) return Effect.fail(invalid)
      const hash = hashSecret(secret)
      return Effect.flatMap(users.credentialByHash(hash), (row): Effect.Effect<Actor, Unauthorized> => {
        if (row === undefined || !digestsEqual(row.secret_hash, hash) || row.revoked_at !== null) {
          return Effect.fail(invalid)
        }
        if (row.expires_at !== null && row.expires_at <= new Date().toISOString()) return Effect.fail(invalid)
        const scopes = parseScopes(row.scopes)
        // A key keeps admin power only while its user is an admin.
        if (!row.is_admin) scopes.delete("admin")
        return Effect.succeed({
          userId: row.user_id,
          scopes,
          credential: { kind: "api_key", id: row.id, expiresAt: row.expires_at }
        })
      })
    }

    return {
      /** Authenticates the `Authorization` header of a request. */
      authenticate: (authorization: string | undefined) => {
        const token = bearerToken(authorization)
        if (token === undefined) return Effect.fail(authorization === undefined ? missing : invalid)
        return apiKey(token)
      }
    }
  })
}) {}
