/** Users and their API keys (the CLI's `users create` and `keys ...`, and the keys endpoints). */
import { Effect } from "effect"
import { hashPassword } from "../auth/Passwords.js"
import { grantableScopes, parseScopes, type Scope } from "../auth/Scopes.js"
import { displayPrefix, hashSecret, newApiKeySecret } from "../auth/Secrets.js"
import { BadRequest, Conflict, NotFound } from "../domain/Errors.js"
import { newApiKeyId, newUserId, type UserId } from "../domain/Ids.js"
import { now } from "../domain/Timestamp.js"
import type { StoreError } from "../store/Store.js"
import type { ApiKey, ApiKeyWithSecret, User } from "./User.js"
import { type ApiKeyRow, type UserRow, UsersRepo } from "./UsersRepo.js"

export interface NewUser {
  readonly email: string
  readonly name: string
  readonly password: string | null
  readonly admin: boolean
}

export interface NewApiKey {
  readonly userId: UserId
  readonly name: string
  readonly scopes: ReadonlyArray<Scope>
  readonly expiresAt: string | null
}

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

    const findUser = (id: string) =>
      Effect.flatMap(repo.userById(id), (row) => (row ? Effect.succeed(row) : Effect.fail(NotFound.of("user", id))))

    return {
      findUser,
      findByEmail: (email: string) =>
        Effect.flatMap(repo.userByEmail(email), (row) =>
          row
            ? Effect.succeed(row)
            : Effect.fail(new NotFound({ message: `no user with email ${email}`, details: { resource: "user" } }))
        ),
      countUsers: repo.countUsers,
      create: Effect.fn("Users.create")(function* (input: NewUser) {
        if (input.password !== null && input.password.length < 8) {
          return yield* BadRequest.field("password", "password must be at least 8 characters")
        }
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
      /** Creates a key carrying `scopes`, never more than its user may have. The secret is in this answer only. */
      createKey: Effect.fn("Users.createKey")(function* (input: NewApiKey) {
        const user = yield* findUser(input.userId)
        const allowed = grantableScopes(Boolean(user.is_admin))
        const denied = input.scopes.filter((s) => !allowed.includes(s))
        if (denied.length > 0) return yield* BadRequest.field("scopes", `the user may not hold ${denied.join(", ")}`)
        if (input.scopes.length === 0) return yield* BadRequest.field("scopes", "choose at least one scope")
        const secret = newApiKeySecret()
        const row: ApiKeyRow & { secret_hash: string } = {
          id: newApiKeyId(),
          user_id: user.id,
          name: input.name,
          prefix: displayPrefix(secret),
          scopes: [...new Set(input.scopes)].join(","),
          created_at: now(),
          expires_at: input.expiresAt,
          revoked_at: null,
          last_used_at: null,
          secret_hash: hashSecret(secret)
        }
        yield* repo.insertKey(row)
        return { ...toApiKey(row), secret } satisfies ApiKeyWithSecret
      }),
      listKeys: (userId: string | null) => Effect.map(repo.keys(userId), (rows) => rows.map(toApiKey)),
      findKey: (id: string) =>
        Effect.flatMap(repo.keyById(id), (row) =>
          row ? Effect.succeed(row) : Effect.fail(NotFound.of("api key", id))
        ),
      /** Revokes at once: the next request with the key is refused. */
      revokeKey: Effect.fn("Users.revokeKey")(function* (id: string) {
        const row = yield* repo.keyById(id)
        if (row === undefined) return yield* NotFound.of("api key", id)
        if (row.revoked_at !== null)
          return yield* new Conflict({ message: `api key ${id} is already revoked`, details: {} })
        const at = now()
        yield* repo.revokeKey(id, at)
        return toApiKey({ ...row, revoked_at: at })
      }),
      /** A new secret for the same key id and scopes; the old secret stops working at once. */
      rotateKey: Effect.fn("Users.rotateKey")(function* (id: string) {
        const row = yield* repo.keyById(id)
        if (row === undefined) return yield* NotFound.of("api key", id)
        if (row.revoked_at !== null) return yield* new Conflict({ message: `api key ${id} is revoked`, details: {} })
        const secret = newApiKeySecret()
        yield* repo.replaceSecret(id, hashSecret(secret), displayPrefix(secret))
        return { ...toApiKey({ ...row, prefix: displayPrefix(secret) }), secret } satisfies ApiKeyWithSecret
      })
    }
  })
}) {}
