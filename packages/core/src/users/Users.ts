/** Users and their API keys (the CLI's `users create` and `keys ...`, and the keys endpoints). */
import {
  type Actor,
  type ApiKey,
  ApiKeyCreate,
  type ApiKeyList,
  ApiKeyListParams,
  type ApiKeyWithSecret,
  BadRequest,
  Conflict,
  decoder,
  Forbidden,
  grantableScopes,
  hasScope,
  NotFound,
  newApiKeyId,
  newUserId,
  now,
  parseScopes,
  type Scope,
  seesAll,
  type User,
  UserCreate,
  UserId
} from "@taskwright/domain"
import { Effect, Schema } from "effect"
import { AuthRepo } from "../auth/AuthRepo.js"
import { hashPassword } from "../auth/Passwords.js"
import { authorizeOwned } from "../auth/Policy.js"
import { displayPrefix, hashSecret, newApiKeySecret } from "../auth/Secrets.js"
import type { StoreError } from "../store/Store.js"
import { KeyUsage } from "./KeyUsage.js"
import { type ApiKeyRow, type UserRow, UsersRepo } from "./UsersRepo.js"

/** A new user; decoded with {@link UserCreate}, so a bad email, an empty name or a short password is a 400. */
export type NewUser = typeof UserCreate.Encoded

/**
 * A new key for a user (the bootstrap admin's, the CLI's): decoded with {@link ApiKeyCreate} like
 * the keys endpoint's body, so a bad name, scope or expiry is the same 400 from every face.
 */
export interface NewApiKey {
  readonly userId: UserId
  readonly name: string
  readonly scopes: ReadonlyArray<Scope>
  /** Any ISO 8601 instant in the future (normalised to milliseconds, UTC), or null for never. */
  readonly expiresAt: string | null
}

const decodeKeyCreate = decoder(ApiKeyCreate, "body")
// The same body with the user named: a key made without a credential (the CLI, `tw.keys.create`).
const decodeKeyForUser = decoder(Schema.Struct({ ...ApiKeyCreate.fields, user_id: UserId }), "input")
const decodeUserCreate = decoder(UserCreate, "input")
const decodeKeyList = decoder(ApiKeyListParams, "query")

const alreadyRevoked = (id: string) =>
  new Conflict({ message: `api key ${id} is revoked`, details: { reason: "revoked" } })

export const toUser = (row: UserRow): User => ({ id: row.id, email: row.email, name: row.name })

export const toApiKey = (row: ApiKeyRow): ApiKey => ({
  id: row.id,
  name: row.name,
  prefix: row.prefix,
  scopes: [...parseScopes(row.scopes)],
  user_id: row.user_id,
  created_at: row.created_at,
  expires_at: row.expires_at,
  revoked_at: row.revoked_at,
  last_used_at: row.last_used_at
})

export class Users extends Effect.Service<Users>()("@taskwright/core/Users", {
  effect: Effect.gen(function* () {
    const repo = yield* UsersRepo
    const authRepo = yield* AuthRepo
    const usage = yield* KeyUsage

    const findUser = (id: string) =>
      Effect.flatMap(repo.userById(id), (row) => (row ? Effect.succeed(row) : Effect.fail(NotFound.of("user", id))))

    /**
     * Stores a key for `userId` from a decoded body, carrying `scopes`, never more than its user
     * may have. The secret is in this answer only.
     */
    const insertKey = Effect.fn("Users.insertKey")(function* (userId: string, input: ApiKeyCreate) {
      const expiresAt = input.expires_at ?? null
      if (expiresAt !== null && expiresAt <= now()) {
        return yield* BadRequest.field("expires_at", "must be in the future")
      }
      const user = yield* findUser(userId)
      const allowed = grantableScopes(Boolean(user.is_admin))
      const denied = input.scopes.filter((s) => !allowed.includes(s))
      if (denied.length > 0) return yield* BadRequest.field("scopes", `the user may not hold ${denied.join(", ")}`)
      const secret = newApiKeySecret()
      const row: ApiKeyRow & { secret_hash: string } = {
        id: newApiKeyId(),
        user_id: user.id,
        name: input.name,
        prefix: displayPrefix(secret),
        scopes: [...new Set(input.scopes)].join(","),
        created_at: now(),
        expires_at: expiresAt,
        revoked_at: null,
        last_used_at: null,
        secret_hash: hashSecret(secret)
      }
      yield* repo.insertKey(row)
      return { ...toApiKey(row), secret } satisfies ApiKeyWithSecret
    })

    /**
     * A key for the user named by the body's `user_id`, with no credential to bound its scopes
     * (the CLI, the in-process API's `tw.keys.create`): the keys endpoint's body, decoded and
     * refused the same way.
     */
    const createKeyFor = Effect.fn("Users.createKeyFor")(function* (body: unknown) {
      const input = yield* decodeKeyForUser(body)
      return yield* insertKey(input.user_id, input)
    })

    /** {@link createKeyFor} with the fields typed. */
    const createKey = (input: NewApiKey) =>
      createKeyFor({ user_id: input.userId, name: input.name, scopes: input.scopes, expires_at: input.expiresAt })

    /**
     * Revokes at once: the next request with the key, or with a token made from it, is refused.
     * The revocation is one conditional write, so of concurrent revokes exactly one succeeds.
     */
    const revokeKey = Effect.fn("Users.revokeKey")(function* (id: string) {
      const row = yield* repo.keyById(id)
      if (row === undefined) return yield* NotFound.of("api key", id)
      if (row.revoked_at !== null) return yield* alreadyRevoked(id)
      const at = now()
      const revoked = yield* repo.transaction(
        Effect.gen(function* () {
          if ((yield* repo.revokeKey(id, at)) === 0) return false
          yield* authRepo.deleteKeyTokens(id)
          return true
        })
      )
      if (!revoked) return yield* alreadyRevoked(id)
      return toApiKey({ ...row, revoked_at: at })
    })

    /**
     * A new secret for the same key id and scopes; the old secret and the tokens made from it stop
     * working at once. The new secret is answered only if it was stored on a key that is still
     * live (a revoke that won the race makes this a 409), so an answered secret always works.
     */
    const rotateKey = Effect.fn("Users.rotateKey")(function* (id: string) {
      const row = yield* repo.keyById(id)
      if (row === undefined) return yield* NotFound.of("api key", id)
      if (row.revoked_at !== null) return yield* alreadyRevoked(id)
      const secret = newApiKeySecret()
      const rotated = yield* repo.transaction(
        Effect.gen(function* () {
          if ((yield* repo.replaceSecret(id, hashSecret(secret), displayPrefix(secret))) === 0) return false
          yield* authRepo.deleteKeyTokens(id)
          return true
        })
      )
      if (!rotated) return yield* alreadyRevoked(id)
      return { ...toApiKey({ ...row, prefix: displayPrefix(secret) }), secret } satisfies ApiKeyWithSecret
    })

    /** The key if the actor may see it: 404 when missing, 403 when another user's (unless admin). */
    const loadKeyAs = (actor: Actor, id: string) =>
      Effect.flatMap(repo.keyById(id), (row) =>
        authorizeOwned(actor, "api key", id, row === undefined ? undefined : { ...row, owner_id: row.user_id })
      )

    /**
     * The key if the actor may change it: 404 when missing, 403 when another user's (unless
     * admin), and 403 when the key carries a scope the actor's credential lacks, so no credential
     * can take over a stronger key by rotating it (or lock its holder out by revoking it).
     */
    const loadKeyToChange = (actor: Actor, id: string, verb: "rotate" | "revoke") =>
      Effect.flatMap(loadKeyAs(actor, id), (row) => {
        const beyond = [...parseScopes(row.scopes)].filter((s) => !hasScope(actor, s))
        return beyond.length === 0
          ? Effect.succeed(row)
          : Effect.fail(
              new Forbidden({
                message: `this credential cannot ${verb} a key carrying ${beyond.join(", ")}: it lacks ${beyond.length === 1 ? "that scope" : "those scopes"}`,
                details: { reason: "scope_escalation", scopes: beyond }
              })
            )
      })

    return {
      findUser,
      findByEmail: (email: string) =>
        Effect.flatMap(repo.userByEmail(email), (row) =>
          row
            ? Effect.succeed(row)
            : Effect.fail(new NotFound({ message: `no user with email ${email}`, details: { resource: "user" } }))
        ),
      countUsers: repo.countUsers,
      create: Effect.fn("Users.create")(function* (user: NewUser) {
        const input = yield* decodeUserCreate(user)
        const row: UserRow = {
          id: newUserId(),
          email: input.email,
          name: input.name,
          password_hash: input.password === null ? null : yield* hashPassword(input.password),
          is_admin: input.admin,
          created_at: now()
        }
        yield* repo.insertUser(row).pipe(
          Effect.catchIf(
            (e: StoreError) => e.kind === "unique",
            () => new Conflict({ message: `a user with email ${input.email} exists`, details: { field: "email" } })
          )
        )
        return { ...toUser(row), admin: input.admin }
      }),
      createKey,
      createKeyFor,
      listKeys: (userId: string | null) => Effect.map(repo.keys(userId), (rows) => rows.map(toApiKey)),
      findKey: (id: string) =>
        Effect.flatMap(repo.keyById(id), (row) =>
          row ? Effect.succeed(row) : Effect.fail(NotFound.of("api key", id))
        ),
      revokeKey,
      rotateKey,

      // The same operations for an authenticated caller (the keys endpoints): own keys with any
      // valid credential, other users' keys with `admin` (403), a missing key 404.

      /** Creates a key for the caller, or (admin) for `user_id`, with no scope the caller's credential lacks. */
      createKeyAs: Effect.fn("Users.createKeyAs")(function* (actor: Actor, body: unknown) {
        const input = yield* decodeKeyCreate(body)
        const userId = input.user_id ?? actor.userId
        if (userId !== actor.userId && !seesAll(actor)) {
          return yield* new Forbidden({
            message: "creating a key for another user needs the admin scope",
            details: { required_scope: "admin" }
          })
        }
        const beyond = input.scopes.filter((s) => !hasScope(actor, s))
        if (beyond.length > 0) {
          return yield* new Forbidden({
            message: `this credential cannot grant ${beyond.join(", ")}`,
            details: { reason: "scope_escalation", scopes: beyond }
          })
        }
        return yield* insertKey(userId, input)
      }),
      listKeysAs: Effect.fn("Users.listKeysAs")(function* (actor: Actor, query: unknown) {
        const params = yield* decodeKeyList(query)
        const userId = params.user_id ?? actor.userId
        if (userId !== actor.userId && !seesAll(actor)) {
          return yield* new Forbidden({
            message: "listing another user's keys needs the admin scope",
            details: { required_scope: "admin" }
          })
        }
        const [rows, total] = yield* repo.keysPage(userId, params.limit, params.offset)
        return { keys: rows.map(toApiKey), total, limit: params.limit, offset: params.offset } satisfies ApiKeyList
      }),
      rotateKeyAs: Effect.fn("Users.rotateKeyAs")(function* (actor: Actor, id: string) {
        yield* loadKeyToChange(actor, id, "rotate")
        return yield* rotateKey(id)
      }),
      revokeKeyAs: Effect.fn("Users.revokeKeyAs")(function* (actor: Actor, id: string) {
        yield* loadKeyToChange(actor, id, "revoke")
        return yield* revokeKey(id)
      }),
      usageAs: Effect.fn("Users.usageAs")(function* (actor: Actor, id: string) {
        yield* loadKeyAs(actor, id)
        return yield* usage.report(id)
      }),
      /** Usage of a key (the CLI). */
      usage: Effect.fn("Users.usage")(function* (id: string) {
        const row = yield* repo.keyById(id)
        if (row === undefined) return yield* NotFound.of("api key", id)
        return yield* usage.report(id)
      })
    }
  })
}) {}
