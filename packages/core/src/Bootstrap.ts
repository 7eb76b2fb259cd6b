/**
 * First start on an empty store: create an admin user and an admin API key, and write the key
 * to `<data dir>/admin-key.txt` (mode 0600). Only the key's hash is stored.
 */
import { mkdir, writeFile } from "node:fs/promises"
import { join } from "node:path"
import { Effect, Option } from "effect"
import { TaskwrightConfig } from "./Config.js"
import { Users } from "./users/Users.js"

export interface BootstrapResult {
  readonly created: boolean
  readonly keyFile: Option.Option<string>
}

export const ensureAdmin = Effect.gen(function* () {
  const users = yield* Users
  const config = yield* TaskwrightConfig
  if ((yield* users.countUsers) > 0) return { created: false, keyFile: Option.none() } satisfies BootstrapResult
  const admin = yield* users.create({ email: "admin@localhost", name: "Administrator", password: null, admin: true })
  const key = yield* users.createKey({
    userId: admin.id,
    name: "bootstrap admin key",
    scopes: ["admin"],
    expiresAt: null
  })
  const keyFile = join(config.dataDir, "admin-key.txt")
  yield* Effect.promise(async () => {
    await mkdir(config.dataDir, { recursive: true })
    await writeFile(keyFile, `${key.secret}\n`, { mode: 0o600 })
  })
  return { created: true, keyFile: Option.some(keyFile) } satisfies BootstrapResult
})
