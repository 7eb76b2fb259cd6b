import type { ApiKeyId, UserId } from "@taskwright/domain"
import { Effect } from "effect"
import { makeCredentialCache } from "../auth/CredentialCache.js"
import { StoreTag, statement } from "../store/Store.js"

export interface UserRow {
  readonly id: UserId
  readonly email: string
  readonly name: string
  readonly password_hash: string | null
  readonly is_admin: number | boolean
  readonly created_at: string
}

export interface ApiKeyRow {
  readonly id: ApiKeyId
  readonly user_id: UserId
  readonly name: string
  readonly prefix: string
  readonly scopes: string
  readonly created_at: string
  readonly expires_at: string | null
  readonly revoked_at: string | null
  readonly last_used_at: string | null
}

/** The usage totals kept on a key's row. */
export interface KeyUsageRow {
  readonly total_requests: number | string
  readonly last_used_at: string | null
  readonly last_used_ip: string | null
}

/** What authentication needs of a key, in one indexed lookup. */
export interface KeyCredentialRow {
  readonly id: ApiKeyId
  readonly user_id: UserId
  readonly secret_hash: string
  readonly scopes: string
  readonly expires_at: string | null
  readonly revoked_at: string | null
  readonly is_admin: number | boolean
}

const userColumns = "id, email, name, password_hash, is_admin, created_at"
const keyColumns = "id, user_id, name, prefix, scopes, created_at, expires_at, revoked_at, last_used_at"
const q = {
  insertUser: statement(
    "users.insert",
    "INSERT INTO users (id, email, email_lower, name, password_hash, is_admin, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
  ),
  userById: statement<UserRow>("users.byId", `SELECT ${userColumns} FROM users WHERE id = ?`),
  userByEmail: statement<UserRow>("users.byEmail", `SELECT ${userColumns} FROM users WHERE email_lower = ?`),
  countUsers: statement<{ total: number }>("users.count", "SELECT COUNT(*) AS total FROM users"),
  insertKey: statement(
    "keys.insert",
    "INSERT INTO api_keys (id, user_id, name, secret_hash, prefix, scopes, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
  ),
  keyById: statement<ApiKeyRow>("keys.byId", `SELECT ${keyColumns} FROM api_keys WHERE id = ?`),
  keysOfUser: statement<ApiKeyRow>(
    "keys.ofUser",
    `SELECT ${keyColumns} FROM api_keys WHERE user_id = ? ORDER BY created_at, id`
  ),
  allKeys: statement<ApiKeyRow>("keys.all", `SELECT ${keyColumns} FROM api_keys ORDER BY created_at, id`),
  credential: statement<KeyCredentialRow>(
    "keys.credential",
    "SELECT k.id, k.user_id, k.secret_hash, k.scopes, k.expires_at, k.revoked_at, u.is_admin FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.secret_hash = ?"
  ),
  keysOfUserPage: statement<ApiKeyRow>(
    "keys.ofUserPage",
    `SELECT ${keyColumns} FROM api_keys WHERE user_id = ? ORDER BY created_at, id LIMIT ? OFFSET ?`
  ),
  countKeysOfUser: statement<{ total: number }>(
    "keys.countOfUser",
    "SELECT COUNT(*) AS total FROM api_keys WHERE user_id = ?"
  ),
  usageTotals: statement<KeyUsageRow>(
    "keys.usageTotals",
    "SELECT total_requests, last_used_at, last_used_ip FROM api_keys WHERE id = ?"
  ),
  usageDays: statement<{ day: string; count: number | string }>(
    "keys.usageDays",
    "SELECT day, count FROM api_key_usage WHERE key_id = ? AND day >= ? ORDER BY day"
  ),
  addUsage: statement(
    "keys.addUsage",
    `UPDATE api_keys SET total_requests = total_requests + ?,
       last_used_ip = CASE WHEN last_used_at IS NULL OR last_used_at <= ? THEN ? ELSE last_used_ip END,
       last_used_at = CASE WHEN last_used_at IS NULL OR last_used_at <= ? THEN ? ELSE last_used_at END
     WHERE id = ?`
  ),
  addUsageDay: statement(
    "keys.addUsageDay",
    `INSERT INTO api_key_usage (key_id, day, count) SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM api_keys WHERE id = ?)
     ON CONFLICT (key_id, day) DO UPDATE SET count = api_key_usage.count + excluded.count`
  ),
  revoke: statement("keys.revoke", "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL"),
  replaceSecret: statement(
    "keys.replaceSecret",
    "UPDATE api_keys SET secret_hash = ?, prefix = ? WHERE id = ? AND revoked_at IS NULL"
  )
}

export class UsersRepo extends Effect.Service<UsersRepo>()("@taskwright/core/UsersRepo", {
  effect: Effect.gen(function* () {
    const store = yield* StoreTag

    const credentials = makeCredentialCache<KeyCredentialRow>(store)

    return {
      transaction: store.transaction,
      insertUser: (row: UserRow) =>
        store.run(q.insertUser, [
          row.id,
          row.email,
          row.email.toLowerCase(),
          row.name,
          row.password_hash,
          row.is_admin ? 1 : 0,
          row.created_at,
          row.created_at
        ]),
      userById: (id: string) => store.get(q.userById, [id]),
      userByEmail: (email: string) => store.get(q.userByEmail, [email.toLowerCase()]),
      countUsers: Effect.map(store.get(q.countUsers), (r) => Number(r?.total ?? 0)),
      insertKey: (row: ApiKeyRow & { readonly secret_hash: string }) =>
        store.run(q.insertKey, [
          row.id,
          row.user_id,
          row.name,
          row.secret_hash,
          row.prefix,
          row.scopes,
          row.created_at,
          row.expires_at
        ]),
      keyById: (id: string) => store.get(q.keyById, [id]),
      keys: (userId: string | null) => (userId === null ? store.all(q.allKeys) : store.all(q.keysOfUser, [userId])),
      keysPage: (userId: string, limit: number, offset: number) =>
        Effect.zip(
          store.all(q.keysOfUserPage, [userId, limit, offset]),
          Effect.map(store.get(q.countKeysOfUser, [userId]), (r) => Number(r?.total ?? 0))
        ),
      /** The remembered credential row of a key's hash, if any: synchronous, for the request fast path. */
      cachedCredential: credentials.cached,
      credentialByHash: (hash: string) => credentials.lookup(hash, store.get(q.credential, [hash])),
      usageTotals: (id: string) => store.get(q.usageTotals, [id]),
      usageDays: (id: string, since: string) => store.all(q.usageDays, [id, since]),
      /** Adds a batch of requests to a key's totals; the last use moves only forward. */
      addUsage: (id: string, requests: number, lastUsedAt: string, lastUsedIp: string) =>
        store.run(q.addUsage, [requests, lastUsedAt, lastUsedIp, lastUsedAt, lastUsedAt, id]),
      addUsageDay: (id: string, day: string, requests: number) => store.run(q.addUsageDay, [id, day, requests, id]),
      revokeKey: (id: string, at: string) => credentials.changing(store.run(q.revoke, [at, id])),
      replaceSecret: (id: string, hash: string, prefix: string) =>
        credentials.changing(store.run(q.replaceSecret, [hash, prefix, id]))
    }
  })
}) {}
