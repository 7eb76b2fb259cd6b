import { TaskwrightError } from "@taskwright/embedded"

/** The `TaskwrightError` a call rejects with; anything else (a success, another error) fails the test. */
export const rejection = async (promise: Promise<unknown>): Promise<TaskwrightError> => {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e
  )
  if (!(error instanceof TaskwrightError)) throw new Error(`expected a TaskwrightError, got ${String(error)}`)
  return error
}
