/**
 * The engine logs through Effect's `Logger`, never to a stream of its own choosing, so a host
 * routes or silences it by providing its own logger. The server and the CLI install
 * {@link stderrLogger}; the test harness {@link silentLogger}.
 */
import { Cause, HashMap, Layer, Logger, LogLevel } from "effect"

const render = (message: unknown): string =>
  Array.isArray(message) ? message.map(render).join(" ") : typeof message === "string" ? message : String(message)

/** One line per entry on stderr: `[taskwright] WARN message key=value`, with the cause's first line. */
export const stderrLogger = Logger.make(({ logLevel, message, cause, annotations }) => {
  let line = `[taskwright] ${logLevel.label} ${render(message)}`
  for (const [key, value] of HashMap.toEntries(annotations)) line += ` ${key}=${String(value)}`
  if (!Cause.isEmpty(cause)) line += `: ${Cause.pretty(cause).split("\n")[0] ?? ""}`
  process.stderr.write(`${line}\n`)
})

/** Writes nothing. */
export const silentLogger = Logger.none

/** What a host hands the engine to log with. */
export type LogDestination = "stderr" | "silent" | Logger.Logger<unknown, void>

/** Replaces Effect's default logger with `destination`, from `minimum` up (default: info). */
export const loggerLayer = (destination: LogDestination, minimum: LogLevel.LogLevel = LogLevel.Info) =>
  Layer.merge(
    Logger.replace(
      Logger.defaultLogger,
      destination === "stderr" ? stderrLogger : destination === "silent" ? silentLogger : destination
    ),
    Logger.minimumLogLevel(minimum)
  )
