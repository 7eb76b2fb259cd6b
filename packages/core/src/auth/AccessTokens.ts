/**
 * Short-lived access tokens: JWTs signed HS256 with the service's secret (header `kid`, claims
 * `sub`, `iat`, `exp`, `scope` as an array, and `jti`). The secret is `TASKWRIGHT_JWT_SECRET`
 * (its UTF-8 bytes, at least 32 of them, else the service refuses to start) or one generated on
 * first start and kept in the store's `settings` table.
 *
 * Each token's `jti` is recorded against the API key it was made from, so verification can
 * check that key is still live: revoking or rotating the key, or its expiry, ends its tokens.
 * Verification pins the algorithm, requires `exp`, `iat`, `sub` and `jti`, and checks `kid`.
 */

import { createHash, createHmac, createSecretKey, randomBytes, timingSafeEqual, webcrypto } from "node:crypto"
import {
  type AccessTokenResponse,
  type Actor,
  parseScopes,
  randomBase62,
  type Scope,
  Unauthorized
} from "@taskwright/domain"
import { Data, Effect, Option } from "effect"
import { jwtVerify, SignJWT } from "jose"
import { TaskwrightConfig } from "../Config.js"
import type { StoreError } from "../store/Store.js"
import { AuthRepo, type TokenKeyRow } from "./AuthRepo.js"
import { defaultAuthSettings } from "./AuthSettings.js"

/** The configuration refuses what the service cannot safely run with. */
export class AuthConfigError extends Data.TaggedError("AuthConfigError")<{ readonly message: string }> {}

/** Access tokens live one hour (spec part 8). */
export const ACCESS_TOKEN_TTL_SECONDS = 3600
/** The one signing algorithm: tokens with any other `alg` (`none` included) are refused. */
export const ACCESS_TOKEN_ALGORITHM = "HS256"
const SETTINGS_KEY = "jwt_secret"
const MIN_SECRET_BYTES = 32
/** Tolerated clock difference between this server and the one that issued a token. */
const LEEWAY_SECONDS = 30

/** What a token is minted from: a live API key. */
export interface TokenSource {
  readonly keyId: string
  readonly userId: string
  readonly scopes: ReadonlySet<Scope>
  readonly keyExpiresAt: string | null
}

const JWT_SHAPE = /^[A-Za-z0-9_-]{2,2048}\.[A-Za-z0-9_-]{2,4096}\.[A-Za-z0-9_-]{2,512}$/

/**
 * True when `token` looks like a compact JWS (three base64url parts) whose signature is in
 * canonical base64url: a lenient decoder would otherwise accept a signature whose last
 * character differs only in its unused bits, i.e. a mutated token.
 */
export const looksLikeJwt = (token: string): boolean => {
  if (!JWT_SHAPE.test(token)) return false
  const signature = token.slice(token.lastIndexOf(".") + 1)
  return Buffer.from(signature, "base64url").toString("base64url") === signature
}

const invalid = new Unauthorized({ message: "invalid or expired credential", details: {} })

/** What a verified token says, kept while it lives. */
interface VerifiedClaims {
  readonly sub: string
  readonly jti: string
  readonly exp: number
  readonly scope: ReadonlySet<Scope>
}

/** Verified tokens remembered at most (the oldest is forgotten first). */
const VERIFIED_CACHE_SIZE = 10_000

export class AccessTokens extends Effect.Service<AccessTokens>()("@taskwright/core/AccessTokens", {
  effect: Effect.gen(function* () {
    const repo = yield* AuthRepo
    const settings = (yield* TaskwrightConfig).auth ?? defaultAuthSettings

    const secret = yield* Option.match(settings.jwtSecret, {
      onSome: (s) => Effect.succeed(s),
      onNone: () => repo.settingOrInit(SETTINGS_KEY, () => randomBytes(32).toString("base64url"))
    })
    const bytes = new TextEncoder().encode(secret)
    if (bytes.length < MIN_SECRET_BYTES) {
      return yield* new AuthConfigError({
        message: `TASKWRIGHT_JWT_SECRET must be at least ${MIN_SECRET_BYTES} bytes (it has ${bytes.length}); refusing to start`
      })
    }
    // Imported once: jose would otherwise import a raw key on every call.
    const key = yield* Effect.promise(() =>
      webcrypto.subtle.importKey("raw", bytes, { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"])
    )
    // Names the secret without revealing it; changes when the secret does.
    const kid = createHash("sha256").update("taskwright-jwt-kid:").update(bytes).digest("base64url").slice(0, 16)

    /**
     * Whether a compact token's signature is this secret's HS256 one, checked synchronously
     * (node:crypto's HMAC, a few µs) before jose verifies it through WebCrypto (asynchronous,
     * ~100 µs, and an error object per refusal): a token signed with anything else, the bulk of
     * what a flood of forged tokens sends, is refused for the price of one HMAC. jose still
     * verifies, algorithm and claims included, every token that passes.
     */
    const hmacKey = createSecretKey(bytes)
    const signedHere = (token: string): boolean => {
      const dot = token.lastIndexOf(".")
      const expected = createHmac("sha256", hmacKey).update(token.slice(0, dot)).digest()
      const given = Buffer.from(token.slice(dot + 1), "base64url")
      return given.length === expected.length && timingSafeEqual(given, expected)
    }

    /**
     * Tokens whose signature and claims jose has verified, by their exact text, until they
     * expire: a token is verified once (WebCrypto's HMAC is asynchronous and costs ~100 µs a
     * call), then only its key's liveness is looked up per request. Only an identical string
     * hits the cache, so a forged or altered token always goes through jose.
     */
    const verified = new Map<string, VerifiedClaims>()

    /** The actor of verified claims and their key's row, if that key is still live. */
    const liveActor = (claims: VerifiedClaims, row: TokenKeyRow | undefined): Actor | undefined => {
      if (
        row === undefined ||
        row.user_id !== claims.sub ||
        row.revoked_at !== null ||
        (row.expires_at !== null && row.expires_at <= new Date().toISOString())
      ) {
        return undefined
      }
      // The token's scopes, never more than its key holds now, admin only for admins.
      const held = parseScopes(row.scopes)
      const scopes = new Set<Scope>()
      for (const s of claims.scope) if (held.has(s)) scopes.add(s)
      if (!row.is_admin) scopes.delete("admin")
      return {
        userId: row.user_id,
        scopes,
        credential: {
          kind: "jwt",
          id: claims.jti,
          expiresAt: new Date(claims.exp * 1000).toISOString(),
          keyId: row.key_id
        }
      }
    }

    /** The actor of verified claims, if the key the token was made from is still live. */
    const withLiveKey = (claims: VerifiedClaims): Effect.Effect<Actor, Unauthorized | StoreError> =>
      Effect.flatMap(repo.tokenKey(claims.jti), (row) => {
        const actor = liveActor(claims, row)
        return actor === undefined ? Effect.fail(invalid) : Effect.succeed(actor)
      })

    return {
      kid,
      /** Signs a token for `source`; it expires in an hour, or with its key if that comes first. */
      issue: Effect.fn("AccessTokens.issue")(function* (source: TokenSource) {
        const now = Date.now()
        const iat = Math.floor(now / 1000)
        const keyLeft =
          source.keyExpiresAt === null
            ? ACCESS_TOKEN_TTL_SECONDS
            : Math.floor((Date.parse(source.keyExpiresAt) - now) / 1000)
        const expiresIn = Math.min(ACCESS_TOKEN_TTL_SECONDS, keyLeft)
        if (expiresIn <= 0) return yield* invalid
        const jti = randomBase62(22)
        const exp = iat + expiresIn
        yield* repo.pruneTokens(new Date(now).toISOString())
        yield* repo.insertToken(jti, source.keyId, new Date(exp * 1000).toISOString())
        const token = yield* Effect.promise(() =>
          new SignJWT({ scope: [...source.scopes] })
            .setProtectedHeader({ alg: ACCESS_TOKEN_ALGORITHM, typ: "JWT", kid })
            .setSubject(source.userId)
            .setIssuedAt(iat)
            .setExpirationTime(exp)
            .setJti(jti)
            .sign(key)
        )
        return { access_token: token, token_type: "Bearer", expires_in: expiresIn } satisfies AccessTokenResponse
      }),

      /**
       * The actor of a token verified before whose key is remembered and live, answered
       * synchronously; `undefined` for anything else (then {@link verify} decides).
       */
      verifyNow: (token: string): Actor | undefined => {
        const seen = verified.get(token)
        if (seen === undefined || seen.exp * 1000 <= Date.now()) return undefined
        return liveActor(seen, repo.cachedTokenKey(seen.jti))
      },

      /** The actor of a token, if its signature, claims and key all hold. */
      verify: (token: string): Effect.Effect<Actor, Unauthorized | StoreError> => {
        const seen = verified.get(token)
        if (seen !== undefined) {
          if (seen.exp * 1000 > Date.now()) return withLiveKey(seen)
          verified.delete(token)
        }
        if (!looksLikeJwt(token) || !signedHere(token)) return Effect.fail(invalid)
        return Effect.flatMap(
          Effect.tryPromise({
            try: () =>
              jwtVerify(token, key, {
                algorithms: [ACCESS_TOKEN_ALGORITHM],
                requiredClaims: ["sub", "iat", "exp", "jti"],
                maxTokenAge: ACCESS_TOKEN_TTL_SECONDS + LEEWAY_SECONDS,
                clockTolerance: LEEWAY_SECONDS
              }),
            catch: () => invalid
          }),
          ({ payload, protectedHeader }) => {
            const { sub, jti, exp, iat, scope } = payload
            if (
              protectedHeader.kid !== kid ||
              typeof sub !== "string" ||
              typeof jti !== "string" ||
              typeof exp !== "number" ||
              typeof iat !== "number" ||
              iat > Date.now() / 1000 + LEEWAY_SECONDS ||
              exp - iat > ACCESS_TOKEN_TTL_SECONDS ||
              !Array.isArray(scope) ||
              !scope.every((s) => typeof s === "string")
            ) {
              return Effect.fail(invalid)
            }
            const claims: VerifiedClaims = { sub, jti, exp, scope: parseScopes(scope.join(",")) }
            if (verified.size >= VERIFIED_CACHE_SIZE) {
              const oldest = verified.keys().next()
              if (oldest.done !== true) verified.delete(oldest.value)
            }
            verified.set(token, claims)
            return withLiveKey(claims)
          }
        )
      },

      /** Ends every token made from `keyId` (on rotation). */
      revokeKeyTokens: (keyId: string) => Effect.asVoid(repo.deleteKeyTokens(keyId))
    }
  })
}) {}
