/**
 * The `taskwright` command-line tool: serve, migrate, users and API keys. Every command works on
 * the configured store directly (`DATABASE_URL` / `--database`, `--data-dir`) and takes `--json`.
 */
import { Args, Command, Options } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import {
  allScopes,
  coreLayer,
  loggerLayer,
  type Scope,
  settingsFromEnv,
  TaskwrightConfig,
  type TaskwrightSettings,
  Users
} from "@taskwright/core"
import { migrate, StoreUnmigrated } from "@taskwright/core/internal"
import { serve, VERSION } from "@taskwright/server"
import { Cause, Console, Duration, Effect, Layer, Option, Redacted } from "effect"
import { releaseYoungGeneration } from "./youngGeneration.js"

const dataDir = Options.directory("data-dir").pipe(
  Options.withDescription("where the SQLite file, agents.json and worktrees live (default ./data)"),
  Options.optional
)
const database = Options.text("database").pipe(
  Options.withDescription("postgres://... for PostgreSQL; the embedded SQLite store otherwise"),
  Options.optional
)
const json = Options.boolean("json").pipe(Options.withDescription("machine-readable output"))
const storeOptions = { dataDir, database, json }

const settingsOf = (o: { readonly dataDir: Option.Option<string>; readonly database: Option.Option<string> }) =>
  settingsFromEnv(process.env, {
    dataDir: Option.getOrUndefined(o.dataDir),
    databaseUrl: Option.getOrUndefined(o.database)
  })

const withCore = <A, E>(settings: TaskwrightSettings, effect: Effect.Effect<A, E, Users>) =>
  effect.pipe(Effect.provide(coreLayer(settings)))

const print = (asJson: boolean, value: unknown, text: string) =>
  Console.log(asJson ? JSON.stringify(value, null, 2) : text)

const serveCommand = Command.make(
  "serve",
  {
    ...storeOptions,
    port: Options.integer("port").pipe(Options.withDefault(Number(process.env.PORT ?? 3000))),
    host: Options.text("host").pipe(Options.withDefault("127.0.0.1")),
    tlsCert: Options.file("tls-cert").pipe(
      Options.withDescription("PEM certificate (chain): serve HTTPS directly, with --tls-key"),
      Options.optional
    ),
    tlsKey: Options.file("tls-key").pipe(Options.withDescription("PEM private key of --tls-cert"), Options.optional)
  },
  (o) =>
    Effect.gen(function* () {
      const settings = settingsOf(o)
      if (Option.isSome(o.tlsCert) !== Option.isSome(o.tlsKey)) {
        return yield* Effect.fail(new Error("--tls-cert and --tls-key go together"))
      }
      const tls = Option.all({ certFile: o.tlsCert, keyFile: o.tlsKey })
      const running = yield* Effect.acquireRelease(
        Effect.promise(() =>
          serve(settings, {
            port: o.port,
            host: o.host,
            tracing: process.env.TASKWRIGHT_TRACING === "1",
            ...(Option.isSome(tls) ? { tls: tls.value } : {})
          })
        ),
        (s) => Effect.promise(() => s.close())
      )
      yield* Effect.sync(releaseYoungGeneration)
      const keyFile = Option.getOrUndefined(running.adminKeyFile)
      yield* print(
        o.json,
        { url: running.url, version: VERSION, admin_key_file: keyFile ?? null },
        `Taskwright ${VERSION} listening on ${running.url}` +
          (keyFile === undefined ? "" : `\nFirst start: admin API key written to ${keyFile} (mode 0600)`)
      )
      return yield* Effect.never
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("start the HTTP server"))

const migrateCommand = Command.make("migrate", storeOptions, (o) =>
  Effect.gen(function* () {
    const applied = yield* migrate.pipe(
      Effect.provide(StoreUnmigrated.pipe(Layer.provide(TaskwrightConfig.layer(settingsOf(o)))))
    )
    yield* print(
      o.json,
      { applied },
      applied.length === 0 ? "Schema up to date." : `Applied ${applied.length} migration(s).`
    )
  })
).pipe(Command.withDescription("bring the store's schema up to date"))

const usersCreate = Command.make(
  "create",
  {
    ...storeOptions,
    email: Options.text("email"),
    name: Options.text("name"),
    password: Options.redacted("password").pipe(Options.optional),
    admin: Options.boolean("admin")
  },
  (o) =>
    withCore(
      settingsOf(o),
      Effect.gen(function* () {
        const users = yield* Users
        const user = yield* users.create({
          email: o.email,
          name: o.name,
          password: Option.match(o.password, { onNone: () => null, onSome: Redacted.value }),
          admin: o.admin
        })
        yield* print(o.json, user, `Created user ${user.id} <${user.email}>${user.admin ? " (admin)" : ""}`)
      })
    )
).pipe(Command.withDescription("create a user"))

const parseScopeList = (text: string): ReadonlyArray<Scope> | string => {
  const parts = text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")
  const unknown = parts.filter((s) => !(allScopes as ReadonlyArray<string>).includes(s))
  return unknown.length > 0 ? `unknown scope(s): ${unknown.join(", ")}` : (parts as ReadonlyArray<Scope>)
}

const parseExpiry = (text: string): string | null => {
  const m = /^([1-9][0-9]{0,4})([dh])$/.exec(text)
  if (m === null) return null
  const n = Number(m[1])
  return new Date(Date.now() + Duration.toMillis(m[2] === "d" ? Duration.days(n) : Duration.hours(n))).toISOString()
}

const keysCreate = Command.make(
  "create",
  {
    ...storeOptions,
    user: Options.text("user").pipe(Options.withDescription("the user's email")),
    name: Options.text("name"),
    scopes: Options.text("scopes").pipe(Options.withDescription(`comma-separated: ${allScopes.join(",")}`)),
    expires: Options.text("expires").pipe(Options.withDescription("lifetime like 90d or 12h"), Options.optional)
  },
  (o) =>
    withCore(
      settingsOf(o),
      Effect.gen(function* () {
        const scopes = parseScopeList(o.scopes)
        if (typeof scopes === "string") return yield* Effect.fail(new Error(scopes))
        const expiresAt = Option.match(o.expires, { onNone: () => null, onSome: parseExpiry })
        if (Option.isSome(o.expires) && expiresAt === null)
          return yield* Effect.fail(new Error("--expires takes a lifetime like 90d or 12h"))
        const users = yield* Users
        const user = yield* users.findByEmail(o.user)
        const key = yield* users.createKey({ userId: user.id, name: o.name, scopes, expiresAt })
        yield* print(
          o.json,
          key,
          `Created API key ${key.id} (${key.scopes.join(",")})${key.expires_at === null ? "" : `, expires ${key.expires_at}`}\n` +
            `Secret (shown once, store it now):\n${key.secret}`
        )
      })
    )
).pipe(Command.withDescription("create an API key; prints the secret once"))

const keysList = Command.make("list", { ...storeOptions, user: Options.text("user").pipe(Options.optional) }, (o) =>
  withCore(
    settingsOf(o),
    Effect.gen(function* () {
      const users = yield* Users
      const owner = yield* Option.match(o.user, {
        onNone: () => Effect.succeed(null),
        onSome: (email) => Effect.map(users.findByEmail(email), (u) => u.id)
      })
      const keys = yield* users.listKeys(owner)
      yield* print(
        o.json,
        { keys },
        keys.length === 0
          ? "No keys."
          : keys
              .map(
                (k) =>
                  `${k.id}  ${k.prefix}…  ${k.name}  [${k.scopes.join(",")}]${k.revoked_at === null ? "" : "  revoked"}`
              )
              .join("\n")
      )
    })
  )
).pipe(Command.withDescription("list API keys (never their secrets)"))

const keyId = Args.text({ name: "KEY_ID" })

const keysRotate = Command.make("rotate", { ...storeOptions, keyId }, (o) =>
  withCore(
    settingsOf(o),
    Effect.gen(function* () {
      const key = yield* (yield* Users).rotateKey(o.keyId)
      yield* print(
        o.json,
        key,
        `Rotated ${key.id}; the old secret no longer works.\nNew secret (shown once):\n${key.secret}`
      )
    })
  )
).pipe(Command.withDescription("replace a key's secret; the old one stops working at once"))

const keysRevoke = Command.make("revoke", { ...storeOptions, keyId }, (o) =>
  withCore(
    settingsOf(o),
    Effect.gen(function* () {
      const key = yield* (yield* Users).revokeKey(o.keyId)
      yield* print(o.json, key, `Revoked ${key.id}.`)
    })
  )
).pipe(Command.withDescription("revoke a key"))

const keysUsage = Command.make("usage", { ...storeOptions, keyId }, (o) =>
  withCore(
    settingsOf(o),
    Effect.gen(function* () {
      const usage = yield* (yield* Users).usage(o.keyId)
      yield* print(
        o.json,
        usage,
        [
          `${o.keyId}: ${usage.total_requests} request(s)`,
          `last used: ${usage.last_used_at === null ? "never" : `${usage.last_used_at} from ${usage.last_used_ip ?? "?"}`}`,
          ...usage.by_day.map((d) => `  ${d.date}  ${d.count}`)
        ].join("\n")
      )
    })
  )
).pipe(Command.withDescription("requests made with a key: total, last use, per day (90 days)"))

const keys = Command.make("keys").pipe(
  Command.withDescription("manage API keys"),
  Command.withSubcommands([keysCreate, keysList, keysRotate, keysRevoke, keysUsage])
)
const users = Command.make("users").pipe(
  Command.withDescription("manage users"),
  Command.withSubcommands([usersCreate])
)

const root = Command.make("taskwright").pipe(Command.withSubcommands([serveCommand, migrateCommand, users, keys]))

const cli = Command.run(root, { name: "taskwright", version: VERSION })

/** Expected failures (a taken email, an unknown key, a bad flag value) print one line, not a stack. */
const reportFailure = (error: unknown) =>
  Effect.gen(function* () {
    const message =
      typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error)
    const json = process.argv.includes("--json")
    yield* Console.error(json ? JSON.stringify({ error: { message } }) : `taskwright: ${message}`)
    process.exitCode = 1
  })

// Every command logs to stderr through one logger, the engine's logs included: stdout carries only
// the command's output, so `--json` output stays JSON. A defect is logged there too, not by runMain
// (its logger writes to stdout).
cli(process.argv).pipe(
  Effect.catchAll(reportFailure),
  Effect.tapErrorCause((cause) => (Cause.isInterruptedOnly(cause) ? Effect.void : Effect.logError(cause))),
  Effect.provide(Layer.merge(NodeContext.layer, loggerLayer("stderr"))),
  NodeRuntime.runMain({ disableErrorReporting: true, disablePrettyLogger: true })
)
