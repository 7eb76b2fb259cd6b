/**
 * First start on an empty store: create an admin user (`admin@localhost`, no password) and an
 * admin API key. Only the key's hash is stored; the secret is answered once, to the host, and
 * written to `<data dir>/admin-key.txt` (mode 0600) when the host asks for the file (the server
 * does, so an operator can read it; an embedding host or a test takes it from the answer).
 */
import { mkdir, writeFile } from "node:fs/promises"
import { join } from "node:path"
import { Effect, Option, Redacted } from "effect"
import { TaskwrightConfig } from "./Config.js"
import { Users } from "./users/Users.js"

export interface BootstrapResult {
  /** True when this start created the admin (the store was empty). */
  readonly created: boolean
  /** The admin's API key, on the start that created it. */
  readonly adminKey: Option.Option<Redacted.Redacted<string>>
  /** Where the key was written, when it was. */
  readonly keyFile: Option.Option<string>
}

export const ensureAdmin = (options: { readonly writeKeyFile: boolean }) =>
  Effect.gen(function* () {
    const users = yield* Users
    const config = yield* TaskwrightConfig
    if ((yield* users.countUsers) > 0) {
      return { created: false, adminKey: Option.none(), keyFile: Option.none() } satisfies BootstrapResult
    }
    const admin = yield* users.create({ email: "admin@localhost", name: "Administrator", password: null, admin: true })
    const key = yield* users.createKey({
      userId: admin.id,
      name: "bootstrap admin key",
      scopes: ["admin"],
      expiresAt: null
    })
    const adminKey = Option.some(Redacted.make(key.secret))
    if (!options.writeKeyFile) return { created: true, adminKey, keyFile: Option.none() } satisfies BootstrapResult
    const keyFile = join(config.dataDir, "admin-key.txt")
    yield* Effect.promise(async () => {
      await mkdir(config.dataDir, { recursive: true })
      await writeFile(keyFile, `${key.secret}\n`, { mode: 0o600 })
    })
    return { created: true, adminKey, keyFile: Option.some(keyFile) } satisfies BootstrapResult
  })
