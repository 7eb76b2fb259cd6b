/** Waiting in core's tests for what another thread or process does. */

/** Resolves once `check()` holds (or resolves true), looking every 10 ms; rejects, naming `what`, after `ms`. */
export const until = async (
  check: () => boolean | Promise<boolean>,
  ms = 10_000,
  what = "the condition"
): Promise<void> => {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`waited ${ms} ms for ${what}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}
