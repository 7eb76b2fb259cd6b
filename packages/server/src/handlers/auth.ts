import { sessionOnlyMessage, VerifyParams } from "@taskwright/api"
import {
  Auth,
  allScopes,
  BadRequest,
  decoder,
  Forbidden,
  hasScope,
  NotFound,
  type Scope,
  Sessions,
  Unauthorized,
  Users
} from "@taskwright/core"
import { sessionTokenFromCookie } from "@taskwright/core/internal"
import { Effect } from "effect"
import type { Handlers } from "../http/Handler.js"

/** Answers that carry a credential are never cached (RFC 6749 §5.1). */
const noStore = (request: { setHeader(name: string, value: string): void }) => {
  request.setHeader("cache-control", "no-store")
  request.setHeader("pragma", "no-cache")
}

const decodeVerify = decoder(VerifyParams, "query")

const userGone = new Unauthorized({ message: "invalid or expired credential", details: {} })

/** A Bearer credential where a browser session is needed: the refusal names the header, as a field. */
const sessionOnly = (what: "logout" | "refresh") => {
  const message = sessionOnlyMessage(what)
  return new BadRequest({
    message,
    details: { reason: "not_a_session", fields: [{ path: "authorization", message }] }
  })
}

/** The scopes a credential holds, `admin` spelled out as every scope it implies. */
const effectiveScopes = (scopes: ReadonlySet<Scope>): ReadonlyArray<Scope> =>
  scopes.has("admin") ? allScopes : allScopes.filter((s) => scopes.has(s))

export const authHandlers: Handlers<Auth | Sessions | Users>["auth"] = {
  login: ({ payload, request }) =>
    Effect.flatMap(Sessions, (sessions) =>
      Effect.map(sessions.login(payload, request), (answer) => {
        noStore(request)
        request.setHeader("set-cookie", sessions.cookie(answer.session.token, request))
        return answer
      })
    ),
  logout: ({ actor, request }) =>
    actor.credential.kind !== "session"
      ? Effect.fail(sessionOnly("logout"))
      : Effect.flatMap(Sessions, (sessions) =>
          Effect.map(sessions.logout(actor), () => {
            request.setHeader("set-cookie", sessions.expiredCookie(request))
            return { success: true as const }
          })
        ),
  refresh: ({ actor, request }) => {
    const current = sessionTokenFromCookie(request.header("cookie"))
    if (actor.credential.kind !== "session" || current === undefined) return Effect.fail(sessionOnly("refresh"))
    return Effect.flatMap(Sessions, (sessions) =>
      Effect.map(sessions.refresh(actor, current), (session) => {
        noStore(request)
        request.setHeader("set-cookie", sessions.cookie(session.token, request))
        return { session }
      })
    )
  },
  token: ({ payload, request }) =>
    Effect.flatMap(Auth, (auth) =>
      Effect.map(auth.issueToken(payload), (answer) => {
        noStore(request)
        return answer
      })
    ),
  me: ({ actor }) =>
    Effect.flatMap(Users, (users) =>
      Effect.map(
        users.findUser(actor.userId).pipe(Effect.catchTag("NotFound", () => Effect.fail(userGone))),
        (user) => ({
          user: { id: user.id, email: user.email, name: user.name },
          scopes: allScopes.filter((s) => actor.scopes.has(s)),
          credential: {
            kind: actor.credential.kind,
            id: actor.credential.id,
            expires_at: actor.credential.expiresAt,
            ...(actor.credential.keyId === undefined || actor.credential.kind === "api_key"
              ? {}
              : { key_id: actor.credential.keyId })
          }
        })
      )
    ),
  verify: ({ actor, urlParams, request }) =>
    Effect.flatMap(decodeVerify(urlParams), ({ scope: wanted }) => {
      if (wanted !== undefined && !(allScopes.includes(wanted as Scope) && hasScope(actor, wanted as Scope))) {
        return Effect.fail(
          new Forbidden({
            message: `this credential lacks the ${wanted} scope`,
            details: { required_scope: wanted }
          })
        )
      }
      const scopes = effectiveScopes(actor.scopes)
      request.setHeader("x-user-id", actor.userId)
      request.setHeader("x-scopes", scopes.join(","))
      request.setHeader("cache-control", "no-store")
      return Effect.succeed({ user_id: actor.userId, scopes })
    }),
  oauth: ({ path }) =>
    Effect.fail(
      new NotFound({
        message: `sign-in with ${path.provider} is not configured`,
        details: { resource: "oauth provider", id: path.provider }
      })
    )
}
