/**
 * Forged access tokens are refused before jose: a token whose signature is not this secret's
 * HS256 one fails at once, synchronously (no WebCrypto call, no store read), which is all a flood
 * of forged tokens costs. A token carrying the secret's signature still goes through jose and
 * the store (the server's `auth-tokens` tests cover every claim and every forgery over HTTP).
 */
import { createHmac } from "node:crypto"
import { Unauthorized } from "@taskwright/domain"
import { Cause, Effect, Exit, Layer, ManagedRuntime, Option } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { AccessTokens } from "../../src/auth/AccessTokens.js"
import { AuthRepo } from "../../src/auth/AuthRepo.js"
import { settingsFromEnv, TaskwrightConfig } from "../../src/Config.js"
import { StoreLive } from "../../src/Core.js"

const SECRET = "an access-token secret of at least thirty-two bytes"

const runtime = ManagedRuntime.make(
  AccessTokens.Default.pipe(
    Layer.provide(AuthRepo.Default),
    Layer.provide(StoreLive),
    Layer.provide(
      TaskwrightConfig.layer(settingsFromEnv({ TASKWRIGHT_JWT_SECRET: SECRET }, { databaseUrl: ":memory:" }))
    )
  )
)

const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")
const sign = (input: string, secret: string) => createHmac("sha256", secret).update(input).digest("base64url")

describe("access tokens", () => {
  afterAll(() => runtime.dispose())

  it("refuses a token not signed with the secret synchronously; one signed with it goes on to jose", async () => {
    const tokens = await runtime.runPromise(AccessTokens)
    const now = Math.floor(Date.now() / 1000)
    const header = b64url({ alg: "HS256", typ: "JWT", kid: tokens.kid })
    const payload = b64url({ sub: "usr_AAAAAAAAAAAAAAAA", iat: now, exp: now + 600, jti: "j", scope: ["admin"] })
    const input = `${header}.${payload}`
    const signed = `${input}.${sign(input, SECRET)}`
    const forged = {
      "another secret": `${input}.${sign(input, `${SECRET}!`)}`,
      "a signature of another length": `${input}.${createHmac("sha512", SECRET).update(input).digest("base64url")}`,
      "the secret's signature of another payload": `${header}.${b64url({ sub: "x" })}.${sign(input, SECRET)}`
    }
    for (const [name, token] of Object.entries(forged)) {
      const exit = Effect.runSyncExit(tokens.verify(token))
      expect(Exit.isFailure(exit), name).toBe(true)
      if (Exit.isFailure(exit))
        expect(Option.getOrUndefined(Cause.failureOption(exit.cause)), name).toBeInstanceOf(Unauthorized)
    }
    // The secret's own signature is not decided here: jose (asynchronous) and the store decide,
    // and this token's jti was never issued.
    const sync = Effect.runSyncExit(tokens.verify(signed))
    expect(Exit.isFailure(sync) && Cause.isDie(sync.cause)).toBe(true)
    await expect(runtime.runPromise(tokens.verify(signed))).rejects.toThrow("invalid or expired credential")
  })
})
