/**
 * Gives start-up's memory back once the server is up.
 *
 * Start-up allocates tens of megabytes that are garbage once the server listens, and it grows
 * V8's young generation to its 16 MB maximum on the way. V8 returns such memory to the system
 * only from its memory reducer, which it starts after a full collection. Since the code cache
 * (start.ts), start-up allocates too little to need one, so an idle server kept all of it:
 * 96 MiB resident where the same server after one full collection settles at 74 MiB.
 *
 * So the serving process runs that one full collection itself, once, a second after it listens:
 * about 20 ms of the main thread, at a time nothing is asked of it on a normal start. After
 * that V8 works as it would on its own. A host application embedding the server keeps its own
 * memory policy: only the `taskwright serve` process does this.
 */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { Duration, Effect } from "effect"

/** Long enough for the first requests and the sandbox probe (0.5 s after listening) to be done. */
export const STARTUP_SETTLE = Duration.seconds(1)

/**
 * One full collection. `gc` exists only in contexts made while `--expose-gc` is set, so it is
 * set for one new context and unset again: no other code sees a `gc` it did not ask for.
 */
export const collectStartupGarbage: Effect.Effect<void> = Effect.sync(() => {
  setFlagsFromString("--expose-gc")
  let gc: unknown
  try {
    gc = runInNewContext("gc")
  } finally {
    setFlagsFromString("--no-expose-gc")
  }
  if (typeof gc === "function") gc()
})
