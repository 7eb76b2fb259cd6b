/**
 * Browser sessions: login with email and password, the `service_session` cookie, refresh and
 * logout. A session token is 32 random bytes (43 base64url characters); only its SHA-256 is
 * stored. Login answers an unknown email, a user without a password and a wrong password alike,
 * after the same argon2id work, and is limited per account as well as per address.
 */

import { randomBytes } from "node:crypto"
import {
  type Actor,
  decoder,
  Forbidden,
  grantableScopes,
  LoginRequest,
  type LoginResponse,
  now,
  RateLimited,
  randomBase62,
  type Scope,
  type SessionInfo,
  Unauthorized,
  type UserId
} from "@taskwright/domain"
import { Effect, Option } from "effect"
import { TaskwrightConfig } from "../Config.js"
import { RateLimiter } from "../ratelimit/RateLimiter.js"
import { toUser } from "../users/Users.js"
import { UsersRepo } from "../users/UsersRepo.js"
import { AuthRepo, type SessionCredentialRow } from "./AuthRepo.js"
import { defaultAuthSettings, publicOrigin } from "./AuthSettings.js"
import { sameOrigin } from "./Csrf.js"
import { verifyPasswordOrDummy } from "./Passwords.js"
import type { RequestInfo } from "./RequestInfo.js"
import { digestsEqual, hashSecret } from "./Secrets.js"

/** The cookie that carries a session token. */
export const SESSION_COOKIE = "service_session"
/** A session lasts 7 days from login or refresh. */
export const SESSION_TTL_SECONDS = 7 * 24 * 60 * 60

const TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/

/** The token in a `Cookie` header, if it has a session token's shape. */
export const sessionTokenFromCookie = (header: string | undefined): string | undefined => {
  if (header === undefined) return undefined
  let at = header.indexOf(`${SESSION_COOKIE}=`)
  while (at !== -1) {
    if (at === 0 || header[at - 1] === " " || header[at - 1] === ";") {
      const start = at + SESSION_COOKIE.length + 1
      const end = header.indexOf(";", start)
      const value = (end === -1 ? header.slice(start) : header.slice(start, end)).trim()
      return TOKEN_SHAPE.test(value) ? value : undefined
    }
    at = header.indexOf(`${SESSION_COOKIE}=`, at + 1)
  }
  return undefined
}

const decodeLogin = decoder(LoginRequest, "body")

const failed = new Unauthorized({ message: "wrong email or password", details: {} })
const invalid = new Unauthorized({ message: "invalid or expired credential", details: {} })

const newToken = (): string => randomBytes(32).toString("base64url")
const expiry = (from: number): string => new Date(from + SESSION_TTL_SECONDS * 1000).toISOString()

// Session rows come from a cache, so the same row object recurs: its scopes are made once.
const sessionScopes = new WeakMap<SessionCredentialRow, ReadonlySet<Scope>>()

/** The actor of a session's row, or `undefined` when the row does not match the token or has expired. */
const sessionActor = (row: SessionCredentialRow | undefined, hash: string): Actor | undefined => {
  if (row === undefined || !digestsEqual(row.token_hash, hash) || row.expires_at <= now()) return undefined
  let scopes = sessionScopes.get(row)
  if (scopes === undefined) {
    scopes = new Set(grantableScopes(Boolean(row.is_admin)))
    sessionScopes.set(row, scopes)
  }
  return { userId: row.user_id, scopes, credential: { kind: "session", id: row.id, expiresAt: row.expires_at } }
}

export class Sessions extends Effect.Service<Sessions>()("@taskwright/core/Sessions", {
  effect: Effect.gen(function* () {
    const repo = yield* AuthRepo
    const users = yield* UsersRepo
    const limiter = yield* RateLimiter
    const settings = (yield* TaskwrightConfig).auth ?? defaultAuthSettings
    const httpsByConfig = Option.exists(publicOrigin(settings), (o) => o.startsWith("https:"))

    const cookieAttributes = (request: RequestInfo) =>
      `Path=/; HttpOnly; SameSite=Lax${request.secure || httpsByConfig ? "; Secure" : ""}`

    const start = (userId: UserId) =>
      Effect.gen(function* () {
        const token = newToken()
        const at = Date.now()
        const row = {
          id: `ses_${randomBase62(16)}`,
          user_id: userId,
          token_hash: hashSecret(token),
          created_at: new Date(at).toISOString(),
          expires_at: expiry(at)
        }
        yield* repo.pruneSessions(row.created_at)
        yield* repo.insertSession(row)
        return { token, expires_at: row.expires_at } satisfies SessionInfo
      })

    return {
      /** The `Set-Cookie` value that hands `token` to the browser. */
      cookie: (token: string, request: RequestInfo) =>
        `${SESSION_COOKIE}=${token}; Max-Age=${SESSION_TTL_SECONDS}; ${cookieAttributes(request)}`,
      /** The `Set-Cookie` value that makes the browser drop its session cookie. */
      expiredCookie: (request: RequestInfo) =>
        `${SESSION_COOKIE}=; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT; ${cookieAttributes(request)}`,

      /** The actor of a session token (from the cookie). */
      authenticate: (token: string) => {
        if (!TOKEN_SHAPE.test(token)) return Effect.fail(invalid)
        const hash = hashSecret(token)
        return Effect.flatMap(repo.sessionByHash(hash), (row): Effect.Effect<Actor, Unauthorized> => {
          const actor = sessionActor(row, hash)
          return actor === undefined ? Effect.fail(invalid) : Effect.succeed(actor)
        })
      },
      /**
       * The actor of a session token whose session is remembered and valid, answered synchronously;
       * `undefined` otherwise (then {@link authenticate} decides).
       */
      authenticateNow: (token: string): Actor | undefined => {
        const hash = hashSecret(token)
        return sessionActor(repo.cachedSession(hash), hash)
      },

      /**
       * Checks an email and password and opens a session. A cross-site login form (an `Origin`
       * that is not ours) is refused; so is an account past its attempt budget, before any
       * password work.
       */
      login: Effect.fn("Sessions.login")(function* (body: unknown, request: RequestInfo) {
        const input = yield* decodeLogin(body)
        if (!sameOrigin(settings, request, false)) {
          return yield* new Forbidden({
            message: "cross-origin login refused: the Origin is not this service's",
            details: { reason: "csrf" }
          })
        }
        const account = input.email.trim().toLowerCase()
        const budget = yield* limiter.consume(limiter.policies.login, account)
        if (!budget.allowed) {
          return yield* new RateLimited({
            message: "too many login attempts for this account; try again later",
            details: { retry_after: budget.retryAfter }
          })
        }
        const user = yield* users.userByEmail(account)
        const ok = yield* verifyPasswordOrDummy(user?.password_hash ?? null, input.password)
        if (user === undefined || !ok) return yield* failed
        const session = yield* start(user.id)
        return { user: toUser(user), session } satisfies LoginResponse
      }),

      /** A new token and a new 7-day expiry for the actor's session; the old token stops working at once. */
      refresh: Effect.fn("Sessions.refresh")(function* (actor: Actor, currentToken: string) {
        const token = newToken()
        const expiresAt = expiry(Date.now())
        const changed = yield* repo.replaceSessionToken(
          actor.credential.id,
          hashSecret(currentToken),
          hashSecret(token),
          expiresAt
        )
        if (changed === 0) return yield* invalid
        return { token, expires_at: expiresAt } satisfies SessionInfo
      }),

      /** Ends the actor's session server-side. */
      logout: Effect.fn("Sessions.logout")(function* (actor: Actor) {
        yield* repo.deleteSession(actor.credential.id)
      })
    }
  })
}) {}
