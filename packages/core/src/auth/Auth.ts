/**
 * Authentication: turns the credential of a request into an {@link Actor} or `Unauthorized`.
 *
 * - `Authorization: Bearer <API key>`: checked for shape and checksum before any lookup, then
 *   found by its SHA-256 and compared in constant time.
 * - `Authorization: Bearer <access token>`: a JWT, verified by {@link AccessTokens}.
 * - The `service_session` cookie, when no `Authorization` header is sent: see {@link Sessions}.
 */
import { type Actor, decoder, now, parseScopes, type Scope, TokenRequest, Unauthorized } from "@taskwright/domain"
import { Effect } from "effect"
import type { StoreError } from "../store/Store.js"
import { type KeyCredentialRow, UsersRepo } from "../users/UsersRepo.js"
import { AccessTokens } from "./AccessTokens.js"
import { readingFresh } from "./CredentialCache.js"
import { digestsEqual, hashSecret, isWellFormedApiKey } from "./Secrets.js"
import { Sessions, sessionTokenFromCookie } from "./Sessions.js"

const invalid = new Unauthorized({ message: "invalid or expired credential", details: {} })
const missing = new Unauthorized({
  message:
    "authentication required: send Authorization: Bearer <API key or access token>, or the service_session cookie",
  details: {}
})

/** `Bearer <token>` → the token, case-insensitive scheme. */
export const bearerToken = (header: string | undefined): string | undefined => {
  if (header === undefined) return undefined
  const match = /^Bearer[ ]+([^ ]+)[ ]*$/i.exec(header)
  return match?.[1]
}

const decodeToken = decoder(TokenRequest, "body")

/** The credentials a request may carry. */
export interface RequestCredentials {
  readonly authorization: string | undefined
  readonly cookie: string | undefined
}

// Credential rows come from a cache, so the same row object recurs: its scopes are parsed once.
const parsedScopes = new WeakMap<KeyCredentialRow, ReadonlySet<Scope>>()
const keyScopes = (row: KeyCredentialRow): ReadonlySet<Scope> => {
  let scopes = parsedScopes.get(row)
  if (scopes === undefined) {
    const parsed = parseScopes(row.scopes)
    // A key keeps admin power only while its user is an admin.
    if (!row.is_admin) parsed.delete("admin")
    scopes = parsed
    parsedScopes.set(row, scopes)
  }
  return scopes
}

export class Auth extends Effect.Service<Auth>()("@taskwright/core/Auth", {
  effect: Effect.gen(function* () {
    const users = yield* UsersRepo
    const tokens = yield* AccessTokens
    const sessions = yield* Sessions

    /** The actor of a key's credential row, or `undefined` when the key may not be used. */
    const keyActor = (row: KeyCredentialRow | undefined, hash: string): Actor | undefined => {
      if (row === undefined || !digestsEqual(row.secret_hash, hash) || row.revoked_at !== null) return undefined
      if (row.expires_at !== null && row.expires_at <= now()) return undefined
      return {
        userId: row.user_id,
        scopes: keyScopes(row),
        credential: { kind: "api_key", id: row.id, expiresAt: row.expires_at, keyId: row.id }
      }
    }

    const apiKey = (secret: string): Effect.Effect<Actor, Unauthorized | StoreError> => {
      if (!isWellFormedApiKey(secret)) return Effect.fail(invalid)
      const hash = hashSecret(secret)
      return Effect.flatMap(users.credentialByHash(hash), (row) => {
        const actor = keyActor(row, hash)
        return actor === undefined ? Effect.fail(invalid) : Effect.succeed(actor)
      })
    }

    const bearer = (token: string): Effect.Effect<Actor, Unauthorized | StoreError> =>
      token.startsWith("twk_") ? apiKey(token) : tokens.verify(token)

    /** Authenticates the `Authorization` header: an API key or an access token. */
    const authenticate = (authorization: string | undefined): Effect.Effect<Actor, Unauthorized | StoreError> => {
      const token = bearerToken(authorization)
      if (token === undefined) return Effect.fail(authorization === undefined ? missing : invalid)
      return bearer(token)
    }

    /**
     * Authenticates a request: the `Authorization` header when there is one (a cookie beside it
     * is ignored), else the session cookie.
     */
    const authenticateRequest = (request: RequestCredentials): Effect.Effect<Actor, Unauthorized | StoreError> => {
      if (request.authorization !== undefined) return authenticate(request.authorization)
      const session = sessionTokenFromCookie(request.cookie)
      return session === undefined ? Effect.fail(missing) : sessions.authenticate(session)
    }

    return {
      authenticate,
      /**
       * The actor of a request carrying a remembered, valid API key or access token (the
       * `Authorization` header) or session (the cookie, when there is no header), answered
       * synchronously; `undefined` for anything else (a credential not remembered, revoked or
       * expired): then {@link authenticateRequest} decides. A remembered key row matched the
       * secret's SHA-256, and a remembered token was verified by its exact text, so the shape,
       * checksum and signature checks (guards in front of the database) are not needed here.
       */
      authenticateNow: (request: RequestCredentials): Actor | undefined => {
        if (request.authorization === undefined) {
          const session = sessionTokenFromCookie(request.cookie)
          return session === undefined ? undefined : sessions.authenticateNow(session)
        }
        const token = bearerToken(request.authorization)
        if (token === undefined) return undefined
        if (!token.startsWith("twk_")) return tokens.verifyNow(token)
        const hash = hashSecret(token)
        return keyActor(users.cachedCredential(hash), hash)
      },
      authenticateRequest,
      /**
       * {@link authenticateRequest} from the stored rows, nothing remembered: for a check that must
       * see a change made outside the service at once (an event socket's periodic one). Remembered
       * rows answer for a few seconds after such a change (`CREDENTIAL_FRESH_FOR_MS`, 5 s).
       */
      reauthenticate: (request: RequestCredentials) => readingFresh(authenticateRequest(request)),
      /** Exchanges an API key (never a token or a session) for an access token carrying the key's scopes. */
      issueToken: Effect.fn("Auth.issueToken")(function* (body: unknown) {
        const input = yield* decodeToken(body)
        const actor = yield* apiKey(input.api_key.trim())
        const key = yield* users.keyById(actor.credential.id)
        if (key === undefined) return yield* invalid
        return yield* tokens.issue({
          keyId: key.id,
          userId: actor.userId,
          scopes: actor.scopes,
          keyExpiresAt: key.expires_at
        })
      })
    }
  })
}) {}
