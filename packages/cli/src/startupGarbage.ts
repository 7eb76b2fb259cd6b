/**
 * Gives start-up's memory back once the server is up.
 *
 * Start-up allocates tens of megabytes that are garbage once the server listens, and it grows
 * V8's young generation to its 16 MB maximum on the way. V8 gives the young generation back at a
 * full collection only when the last five seconds allocated little (`ReduceNewSpaceSize`), and
 * its memory reducer, which would do the same later, waits eight seconds after a full collection
 * and then again for as long as start-up's burst still shows in its allocation rate. So an idle
 * server held 100 MiB or more until about 17 s after start, where it needs about 75.
 *
 * The serving process runs one full collection itself, once, six seconds after it listens: about
 * 20 ms of the main thread, at a time nothing is asked of it on a normal start, and late enough
 * that the collection usually gives the young generation back (committed heap 56 MB to 24 MB in
 * three of four traced starts; one a second after listening never did, and it put the memory
 * reducer off by eight seconds). After that V8 works as it would on its own. A host application
 * embedding the server keeps its own memory policy: only the `taskwright serve` process does this.
 */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { Duration, Effect } from "effect"

/** Start-up's allocation is then more than five seconds old, and the first requests and the sandbox probe (0.5 s after listening) are done. */
export const STARTUP_SETTLE = Duration.seconds(6)

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
