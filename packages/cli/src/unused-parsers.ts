/**
 * Stands in for `yaml`, `toml` and `ini` in the bundle (see tsup.config.ts). @effect/cli can read
 * an option's value from such a file; no option of `taskwright` does, and the three parsers were a
 * tenth of the bundle that every start compiles.
 */
export const parse = (): never => {
  throw new Error("taskwright reads no YAML, TOML or INI option files")
}
