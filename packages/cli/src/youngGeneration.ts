/**
 * V8's young generation while the command starts.
 *
 * Start-up allocates objects that live (the bundle's modules, the server's layers), and V8 grows
 * the young generation each time a collection finds many survivors: to two 16 MB semi-spaces by
 * the time a server has listened. An idle server kept them: V8 gives them back only when its
 * allocation history says the process is idle, which a full collection run by hand does not
 * change (tried: the server ran one six seconds after listening, and idle RSS stayed at 92 to 97
 * MiB; traced in docs/serving.md).
 *
 * So the entry (start.ts) holds the young generation near its starting size while the bundle
 * loads and the server starts, and `taskwright serve` lets it grow again once it listens: from
 * then on V8 sizes it for the load, as it would on its own. Measured on the bench's seed, six
 * warm starts each: idle RSS 74 MiB against 77 to 82 with the collection and 95 with neither;
 * start-up unchanged. Whoever starts Node with a semi-space flag of their own keeps it.
 */
import { setFlagsFromString } from "node:v8"

/** V8's own growth factor (`node --v8-options`), restored once the server listens. */
const DEFAULT_GROWTH_FACTOR = 2

/** Whether Node was started with a flag that sizes the young generation (then it is left alone). */
export const youngGenerationChosenByUser = (execArgv: ReadonlyArray<string>, nodeOptions: string): boolean =>
  [...execArgv, ...nodeOptions.split(/\s+/)].some((arg) => arg.includes("semi-space") || arg.includes("semi_space"))

const leftAlone = youngGenerationChosenByUser(process.execArgv, process.env.NODE_OPTIONS ?? "")

const growthFactor = (factor: number) => {
  if (!leftAlone) setFlagsFromString(`--semi-space-growth-factor=${factor}`)
}

/** Keeps the young generation at its current size: for start-up. */
export const holdYoungGeneration = (): void => growthFactor(1)

/** Lets the young generation grow with the load again. */
export const releaseYoungGeneration = (): void => growthFactor(DEFAULT_GROWTH_FACTOR)

/**
 * `f` run with the flags start-up ran with. V8 refuses a code cache made under other flags (it
 * hashes them), so a cache written after the server released the young generation would be
 * refused at every start. It releases the young generation after `f`: on a start slower than the
 * cache's two seconds that comes before the server listens, which costs memory, not correctness
 * (the entry and the bundle each hold a copy of this module, so neither can know the other's state).
 */
export const withStartupFlags = <A>(f: () => A): A => {
  holdYoungGeneration()
  try {
    return f()
  } finally {
    releaseYoungGeneration()
  }
}
