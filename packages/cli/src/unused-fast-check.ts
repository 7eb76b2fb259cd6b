/**
 * Stands in for `fast-check` in the bundle (see tsup.config.ts). Effect's Schema module imports it
 * for arbitraries (random values for property tests), which nothing in `taskwright` builds; yet its
 * module code ran at every start: 100 KB of the bundle to compile, about 12 ms of a start that
 * compiles and 5 MiB of memory. A Schema arbitrary asked for in the bundle fails on a missing
 * function, as it should: there is nothing to generate values with.
 */
export {}
