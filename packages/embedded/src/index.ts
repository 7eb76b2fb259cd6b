/** Taskwright in your own process: one engine, typed Promise operations, HTTP handlers and the Effect face. */
export { TaskwrightError } from "@taskwright/core"
export * from "./Options.js"
export * from "./Taskwright.js"
