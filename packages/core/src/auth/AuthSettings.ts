/**
 * The settings of authentication and rate limiting, read from `TASKWRIGHT_*` variables. They
 * are parsed leniently here and checked where they are used: a JWT secret that is too short
 * makes the token service (and so the server) refuse to start.
 */
import { Option } from "effect"

/** Where rate-limit counters live: this process's memory, or the store (shared by every process on it). */
export type RateLimitStoreKind = "memory" | "database"

export interface AuthSettings {
  /** The service's public origin (`https://tasks.example.com`): decides the cookie's `Secure` flag and the accepted `Origin`. */
  readonly publicUrl: Option.Option<string>
  /** The HMAC secret of access tokens (UTF-8, at least 32 bytes); generated once and kept in the store when absent. */
  readonly jwtSecret: Option.Option<string>
  /** How many reverse-proxy hops to trust in `X-Forwarded-For` / `X-Forwarded-Proto`; 0 trusts none. */
  readonly trustProxy: number
  /** Requests per minute per credential (an API key and its access tokens share one budget; a session counts per user). */
  readonly authenticatedPerMinute: number
  /** Requests per minute per client address without a valid credential. */
  readonly anonymousPerMinute: number
  /** Login attempts per account per {@link loginWindowMinutes}, whatever the address. */
  readonly loginAttempts: number
  readonly loginWindowMinutes: number
  /** Default: the store when it is PostgreSQL (several processes share it), memory for SQLite. */
  readonly rateLimitStore: Option.Option<RateLimitStoreKind>
}

export const defaultAuthSettings: AuthSettings = {
  publicUrl: Option.none(),
  jwtSecret: Option.none(),
  trustProxy: 0,
  authenticatedPerMinute: 1000,
  anonymousPerMinute: 10,
  loginAttempts: 10,
  loginWindowMinutes: 15,
  rateLimitStore: Option.none()
}

const text = (value: string | undefined): Option.Option<string> =>
  value === undefined || value === "" ? Option.none() : Option.some(value)

const positive = (value: string | undefined, fallback: number): number => {
  if (value === undefined || value.trim() === "") return fallback
  const n = Number(value)
  return Number.isInteger(n) && n > 0 ? n : fallback
}

/** `TASKWRIGHT_TRUST_PROXY`: `true`/`yes`/`1` trusts one hop, a number that many, anything else none. */
const hops = (value: string | undefined): number => {
  if (value === undefined) return 0
  const v = value.trim().toLowerCase()
  if (v === "true" || v === "yes" || v === "on") return 1
  const n = Number(v)
  return Number.isInteger(n) && n > 0 ? n : 0
}

/** Auth settings from `TASKWRIGHT_PUBLIC_URL`, `TASKWRIGHT_JWT_SECRET`, `TASKWRIGHT_TRUST_PROXY`, `TASKWRIGHT_RATE_LIMIT_*`, `TASKWRIGHT_LOGIN_*`. */
export const authSettingsFromEnv = (env: Record<string, string | undefined>): AuthSettings => {
  const store = env.TASKWRIGHT_RATE_LIMIT_STORE?.trim().toLowerCase()
  return {
    publicUrl: Option.map(text(env.TASKWRIGHT_PUBLIC_URL?.trim()), (u) => u.replace(/\/+$/, "")),
    // The secret is taken exactly as given: its UTF-8 bytes are the HMAC key.
    jwtSecret: text(env.TASKWRIGHT_JWT_SECRET),
    trustProxy: hops(env.TASKWRIGHT_TRUST_PROXY),
    authenticatedPerMinute: positive(env.TASKWRIGHT_RATE_LIMIT, defaultAuthSettings.authenticatedPerMinute),
    anonymousPerMinute: positive(env.TASKWRIGHT_RATE_LIMIT_ANONYMOUS, defaultAuthSettings.anonymousPerMinute),
    loginAttempts: positive(env.TASKWRIGHT_LOGIN_ATTEMPTS, defaultAuthSettings.loginAttempts),
    loginWindowMinutes: positive(env.TASKWRIGHT_LOGIN_WINDOW_MINUTES, defaultAuthSettings.loginWindowMinutes),
    rateLimitStore:
      store === "memory" ? Option.some("memory") : store === "database" ? Option.some("database") : Option.none()
  }
}

/** The origin a browser shows for this service, when configured (`https://host[:port]`). */
export const publicOrigin = (settings: AuthSettings): Option.Option<string> =>
  Option.flatMap(settings.publicUrl, (u) => {
    try {
      return Option.some(new URL(u).origin)
    } catch {
      return Option.none()
    }
  })
