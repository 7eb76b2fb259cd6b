/**
 * Property tests (fast-check): random credentials, and valid ones changed in any one way (a
 * character replaced, dropped, inserted or swapped, case flipped, truncated, extended), never
 * authenticate, as API keys, session cookies or access tokens. Thousands of cases go straight
 * to the server's authentication service; a few hundred go through HTTP as well.
 */
import { Auth } from "@taskwright/core"
import { startTestServer, type TestServer, testStores } from "@taskwright/testing"
import { Effect, Either } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { accessToken, cookie, createPasswordUser, login } from "./auth-helpers.js"

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
const BASE64URL = `${BASE62}-_`

/** `valid` changed in exactly one way; never equal to it. */
const mutation = (valid: string, alphabet: string) =>
  fc
    .oneof(
      // replace one character
      fc
        .tuple(fc.nat({ max: valid.length - 1 }), fc.constantFrom(...alphabet))
        .map(([i, c]) => valid.slice(0, i) + c + valid.slice(i + 1)),
      // drop one
      fc.nat({ max: valid.length - 1 }).map((i) => valid.slice(0, i) + valid.slice(i + 1)),
      // insert one
      fc
        .tuple(fc.nat({ max: valid.length }), fc.constantFrom(...alphabet))
        .map(([i, c]) => valid.slice(0, i) + c + valid.slice(i)),
      // swap two neighbours
      fc.nat({ max: valid.length - 2 }).map((i) => valid.slice(0, i) + valid[i + 1] + valid[i] + valid.slice(i + 2)),
      // flip the case of one letter
      fc.nat({ max: valid.length - 1 }).map((i) => {
        const c = valid[i] ?? ""
        const flipped = c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()
        return valid.slice(0, i) + flipped + valid.slice(i + 1)
      }),
      // truncate or extend
      fc.nat({ max: valid.length - 1 }).map((n) => valid.slice(0, n)),
      fc.string({ unit: fc.constantFrom(...alphabet), minLength: 1, maxLength: 8 }).map((tail) => valid + tail)
    )
    .filter((x) => x !== valid)

/** Strings that are not credentials at all: anything, and things shaped like ours. */
const randomCredential = fc.oneof(
  fc.string(),
  fc.string({ unit: "binary", maxLength: 200 }),
  fc.string({ unit: fc.constantFrom(...BASE62), minLength: 49, maxLength: 49 }).map((s) => `twk_${s}`),
  fc.string({ unit: fc.constantFrom(...BASE64URL), minLength: 43, maxLength: 43 }),
  fc
    .tuple(
      fc.string({ unit: fc.constantFrom(...BASE64URL), minLength: 2, maxLength: 60 }),
      fc.string({ unit: fc.constantFrom(...BASE64URL), minLength: 2, maxLength: 200 }),
      fc.string({ unit: fc.constantFrom(...BASE64URL), minLength: 0, maxLength: 60 })
    )
    .map((parts) => parts.join("."))
)

describe.each(testStores())("credentials that must never authenticate, on %s", (store) => {
  let s: TestServer
  let key: string
  let session: string
  let token: string

  beforeAll(async () => {
    s = await startTestServer({
      store,
      env: { TASKWRIGHT_RATE_LIMIT_ANONYMOUS: "1000000", TASKWRIGHT_RATE_LIMIT: "1000000" }
    })
    key = (await s.createUser()).key
    session = await login(s, await createPasswordUser(s))
    token = await accessToken(s, key)
  })
  afterAll(async () => {
    await s.close()
  })

  /** True when the server's authentication accepts these request credentials. */
  const accepts = (authorization: string | undefined, cookieHeader: string | undefined) =>
    s.server.run(
      Effect.flatMap(Auth, (auth) =>
        Effect.map(Effect.either(auth.authenticateRequest({ authorization, cookie: cookieHeader })), Either.isRight)
      )
    )

  it("the genuine credentials do authenticate (the properties below are not vacuous)", async () => {
    expect(await accepts(`Bearer ${key}`, undefined)).toBe(true)
    expect(await accepts(undefined, `service_session=${session}`)).toBe(true)
    expect(await accepts(`Bearer ${token}`, undefined)).toBe(true)
  })

  const runs = store === "postgres" ? 600 : 1500

  it("random strings never authenticate as a Bearer credential or a cookie", async () => {
    await fc.assert(
      fc.asyncProperty(randomCredential, async (x) => {
        expect(await accepts(`Bearer ${x}`, undefined)).toBe(false)
        expect(await accepts(undefined, `service_session=${x}`)).toBe(false)
      }),
      { numRuns: runs }
    )
  })

  it("a mutated API key never authenticates", async () => {
    await fc.assert(
      fc.asyncProperty(mutation(key, BASE62), async (x) => {
        expect(await accepts(`Bearer ${x}`, undefined)).toBe(false)
      }),
      { numRuns: runs }
    )
  })

  it("a mutated session token never authenticates", async () => {
    await fc.assert(
      fc.asyncProperty(mutation(session, BASE64URL), async (x) => {
        expect(await accepts(undefined, `service_session=${x}`)).toBe(false)
      }),
      { numRuns: runs }
    )
  })

  it("a mutated access token never authenticates", async () => {
    await fc.assert(
      fc.asyncProperty(mutation(token, `${BASE64URL}.`), async (x) => {
        expect(await accepts(`Bearer ${x}`, undefined)).toBe(false)
      }),
      { numRuns: runs }
    )
  })

  it("every other last character of a token's signature fails (no non-canonical base64url)", async () => {
    const head = token.slice(0, -1)
    for (const c of BASE64URL) {
      if (`${head}${c}` === token) continue
      expect(await accepts(`Bearer ${head}${c}`, undefined), c).toBe(false)
    }
  })

  it("a credential of one kind never passes as another (key as cookie, token as cookie, session as Bearer)", async () => {
    expect(await accepts(undefined, `service_session=${key}`)).toBe(false)
    expect(await accepts(undefined, `service_session=${token}`)).toBe(false)
    expect(await accepts(`Bearer ${session}`, undefined)).toBe(false)
  })

  it("through HTTP too: mutated keys, cookies and tokens get 401", async () => {
    const anyMutation = fc.oneof(
      mutation(key, BASE62).map((x) => ({ authorization: `Bearer ${x}` })),
      mutation(session, BASE64URL).map((x) => cookie(x)),
      mutation(token, `${BASE64URL}.`).map((x) => ({ authorization: `Bearer ${x}` })),
      randomCredential.filter((x) => /^[\x21-\x7e]*$/.test(x)).map((x) => ({ authorization: `Bearer ${x}` }))
    )
    await fc.assert(
      fc.asyncProperty(anyMutation, async (headers) => {
        const r = await s.request("GET", "/api/tasks", { headers })
        expect(r.status).toBe(401)
        expect((r.body as { error: { code: string } }).error.code).toBe("UNAUTHORIZED")
      }),
      { numRuns: store === "postgres" ? 150 : 300 }
    )
  })
})
