/**
 * Units of work: the statements of one write, written once as a generator and run by the store in
 * one transaction (joining the caller's when there is one).
 *
 * A unit yields what it needs from the store (`yield* all(stmt, params)`), a typed failure that
 * ends it (`yield* fail(error)`: the transaction rolls back and the unit's Effect fails with it)
 * and what to do once it has committed (`yield* onCommit(hook)`). SQLite runs a unit from start to
 * end in one synchronous step, with no fiber step per statement: on the write path that bookkeeping
 * cost more than the statements themselves. PostgreSQL runs each statement as one round trip on
 * the transaction's connection. Business rules stay in the unit; nothing in it is dialect-specific.
 */
import { Effect, Exit } from "effect"
import { toStoreError } from "./errors.js"
import type { SqlParam, Statement, StoreError } from "./Store.js"

/** A statement for the store to run: `all` rows, the first row (`get`), or the rows changed (`run`). */
export interface Call {
  readonly _tag: "Call"
  readonly kind: "all" | "get" | "run"
  readonly stmt: Statement<unknown>
  readonly params: ReadonlyArray<SqlParam>
}

/** Ends the unit with `error`; nothing it wrote is kept. */
export interface Fail<E> {
  readonly _tag: "Fail"
  readonly error: E
}

/** Runs `hook` once the transaction has committed (never if it rolls back). */
export interface OnCommit {
  readonly _tag: "OnCommit"
  readonly hook: () => void
}

export type Step<E> = Call | Fail<E> | OnCommit

/** A unit of work answering `A`, or failing with `E`. */
export type Work<A, E = never> = Generator<Step<E>, A, unknown>

/** All rows of a query. */
export function* all<Row>(stmt: Statement<Row>, params: ReadonlyArray<SqlParam> = []): Work<ReadonlyArray<Row>> {
  return (yield { _tag: "Call", kind: "all", stmt, params }) as ReadonlyArray<Row>
}

/** The first row of a query, or `undefined`. */
export function* get<Row>(stmt: Statement<Row>, params: ReadonlyArray<SqlParam> = []): Work<Row | undefined> {
  return (yield { _tag: "Call", kind: "get", stmt, params }) as Row | undefined
}

/** Runs a write; the number of rows it changed. */
export function* run(stmt: Statement<unknown>, params: ReadonlyArray<SqlParam> = []): Work<number> {
  return (yield { _tag: "Call", kind: "run", stmt, params }) as number
}

/** Ends the unit with `error` (the transaction rolls back). */
export function* fail<E>(error: E): Work<never, E> {
  yield { _tag: "Fail", error }
  // The store never resumes a unit after a failure: it closes the generator.
  throw new Error("a unit of work was resumed after it failed")
}

/** Runs `hook` once the unit's transaction has committed. */
export function* onCommit(hook: () => void): Work<void> {
  yield { _tag: "OnCommit", hook }
}

/** How a store answers a {@link Call}: the answer, or a promise of it (PostgreSQL); throws or rejects with the driver's error. */
export type Execute = (call: Call) => unknown

/** How a unit ended: its result, a failure it yielded, a statement the driver refused, or a defect it threw. */
export type Outcome<A, E> =
  | { readonly _tag: "Done"; readonly value: A }
  | { readonly _tag: "Failed"; readonly error: E }
  | { readonly _tag: "StoreFailed"; readonly cause: unknown }
  | { readonly _tag: "Defect"; readonly defect: unknown }

const isPromise = (u: unknown): u is PromiseLike<unknown> =>
  typeof u === "object" && u !== null && typeof (u as { then?: unknown }).then === "function"

/**
 * Runs `work` to its end over `execute`, queueing its commit hooks in `hooks`. Synchronous as long
 * as `execute` answers synchronously (SQLite); from the first promise on (PostgreSQL), the outcome
 * is a promise.
 */
export const drive = <A, E>(
  work: Work<A, E>,
  execute: Execute,
  hooks: Array<() => void>
): Outcome<A, E> | Promise<Outcome<A, E>> => {
  const resume = (input: unknown): Outcome<A, E> | Promise<Outcome<A, E>> => {
    for (;;) {
      let step: IteratorResult<Step<E>, A>
      try {
        step = work.next(input)
      } catch (defect) {
        return { _tag: "Defect", defect }
      }
      if (step.done === true) return { _tag: "Done", value: step.value }
      const s = step.value
      if (s._tag === "Call") {
        let answer: unknown
        try {
          answer = execute(s)
        } catch (cause) {
          return stop(cause)
        }
        if (isPromise(answer)) return Promise.resolve(answer).then(resume, stop)
        input = answer
      } else if (s._tag === "OnCommit") {
        hooks.push(s.hook)
        input = undefined
      } else {
        work.return(undefined as never)
        return { _tag: "Failed", error: s.error }
      }
    }
  }
  const stop = (cause: unknown): Outcome<A, E> => {
    work.return(undefined as never)
    return { _tag: "StoreFailed", cause }
  }
  return resume(undefined)
}

/** An {@link Outcome} as the Exit of the unit's Effect. */
export const outcomeExit = <A, E>(outcome: Outcome<A, E>): Exit.Exit<A, E | StoreError> => {
  switch (outcome._tag) {
    case "Done":
      return Exit.succeed(outcome.value)
    case "Failed":
      return Exit.fail(outcome.error)
    case "StoreFailed":
      return Exit.fail(toStoreError(outcome.cause))
    case "Defect":
      return Exit.die(outcome.defect)
  }
}

/** An outcome, or a promise of one, as an Effect (no fiber step when it is already there). */
export const fromOutcome = <A, E>(outcome: Outcome<A, E> | Promise<Outcome<A, E>>): Effect.Effect<A, E | StoreError> =>
  outcome instanceof Promise ? Effect.flatten(Effect.promise(() => outcome.then(outcomeExit))) : outcomeExit(outcome)
