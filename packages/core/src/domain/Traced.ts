/**
 * `fn(name)` names a service method for tracing. With `TASKWRIGHT_TRACING=1` it is `Effect.fn(name)`
 * (a span per call and a captured call site); otherwise it is `Effect.fnUntraced`, because a traced
 * call costs about 15 µs — more than the queries of a typical request on the fast path.
 */
import { Effect } from "effect"

const tracing = typeof process !== "undefined" && process.env.TASKWRIGHT_TRACING === "1"

export const fn = (name: string): typeof Effect.fnUntraced => (tracing ? Effect.fn(name) : Effect.fnUntraced)
