/**
 * The tables of authentication beyond users and keys: sessions (found by the SHA-256 of their
 * token), the jti → key mapping of access tokens, and the `settings` row that keeps a generated
 * JWT secret. Each credential lookup is one indexed query that also answers what the check needs
 * of the user (admin or not).
 */
import type { ApiKeyId, UserId } from "@taskwright/domain"
import { Effect } from "effect"
import { StoreTag, statement } from "../store/Store.js"
import { makeCredentialCache } from "./CredentialCache.js"

export interface SessionRow {
  readonly id: string
  readonly user_id: UserId
  readonly created_at: string
  readonly expires_at: string
}

/** A session with what authentication needs of its user. */
export interface SessionCredentialRow extends SessionRow {
  readonly token_hash: string
  readonly is_admin: number | boolean
}

/** What a JWT's verification needs of the key it was made from. */
export interface TokenKeyRow {
  readonly key_id: ApiKeyId
  readonly user_id: UserId
  readonly scopes: string
  readonly expires_at: string | null
  readonly revoked_at: string | null
  readonly is_admin: number | boolean
}

const q = {
  insertSession: statement(
    "sessions.insert",
    "INSERT INTO sessions (id, user_id, token_hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?)"
  ),
  sessionByHash: statement<SessionCredentialRow>(
    "sessions.byHash",
    "SELECT s.id, s.user_id, s.token_hash, s.created_at, s.expires_at, u.is_admin FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.token_hash = ?"
  ),
  replaceSessionToken: statement(
    "sessions.replaceToken",
    "UPDATE sessions SET token_hash = ?, expires_at = ? WHERE id = ? AND token_hash = ?"
  ),
  deleteSession: statement("sessions.delete", "DELETE FROM sessions WHERE id = ?"),
  pruneSessions: statement("sessions.prune", "DELETE FROM sessions WHERE expires_at <= ?"),
  insertToken: statement("tokens.insert", "INSERT INTO access_tokens (jti, key_id, expires_at) VALUES (?, ?, ?)"),
  tokenKey: statement<TokenKeyRow>(
    "tokens.key",
    "SELECT k.id AS key_id, k.user_id, k.scopes, k.expires_at, k.revoked_at, u.is_admin FROM access_tokens t JOIN api_keys k ON k.id = t.key_id JOIN users u ON u.id = k.user_id WHERE t.jti = ?"
  ),
  deleteKeyTokens: statement("tokens.deleteOfKey", "DELETE FROM access_tokens WHERE key_id = ?"),
  pruneTokens: statement("tokens.prune", "DELETE FROM access_tokens WHERE expires_at <= ?"),
  setting: statement<{ value: string }>("settings.get", "SELECT value FROM settings WHERE key = ?"),
  initSetting: statement(
    "settings.init",
    "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING"
  )
}

export class AuthRepo extends Effect.Service<AuthRepo>()("@taskwright/core/AuthRepo", {
  effect: Effect.gen(function* () {
    const store = yield* StoreTag
    const sessions = makeCredentialCache<SessionCredentialRow>(store)
    // An access token's key, by the token's jti: forgotten with every credential change (a
    // revocation or rotation among them), so a token ends with its key at once.
    const tokenKeys = makeCredentialCache<TokenKeyRow>(store)
    return {
      insertSession: (row: SessionRow & { readonly token_hash: string }) =>
        store.run(q.insertSession, [row.id, row.user_id, row.token_hash, row.created_at, row.expires_at]),
      sessionByHash: (hash: string) => sessions.lookup(hash, store.get(q.sessionByHash, [hash])),
      /** The remembered session of a token's hash, if any: synchronous, for the request fast path. */
      cachedSession: sessions.cached,
      /** Swaps a session's token only if it still has `oldHash`: of two concurrent refreshes one wins. */
      replaceSessionToken: (id: string, oldHash: string, newHash: string, expiresAt: string) =>
        sessions.changing(store.run(q.replaceSessionToken, [newHash, expiresAt, id, oldHash])),
      deleteSession: (id: string) => sessions.changing(store.run(q.deleteSession, [id])),
      pruneSessions: (now: string) => store.run(q.pruneSessions, [now]),
      insertToken: (jti: string, keyId: string, expiresAt: string) => store.run(q.insertToken, [jti, keyId, expiresAt]),
      tokenKey: (jti: string) => tokenKeys.lookup(jti, store.get(q.tokenKey, [jti])),
      /** The remembered key of a token's jti, if any: synchronous, for the request fast path. */
      cachedTokenKey: tokenKeys.cached,
      deleteKeyTokens: (keyId: string) => tokenKeys.changing(store.run(q.deleteKeyTokens, [keyId])),
      pruneTokens: (now: string) => store.run(q.pruneTokens, [now]),
      /** The stored value of `key`, writing `initial` first if there is none (the first writer wins). */
      settingOrInit: (key: string, initial: () => string) =>
        Effect.flatMap(store.get(q.setting, [key]), (row) =>
          row !== undefined
            ? Effect.succeed(row.value)
            : store.run(q.initSetting, [key, initial()]).pipe(
                Effect.zipRight(store.get(q.setting, [key])),
                Effect.map((r) => r?.value ?? "")
              )
        )
    }
  })
}) {}
