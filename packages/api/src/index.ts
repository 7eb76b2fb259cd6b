/** Taskwright's HTTP contract. */
export * from "./Api.js"
export * from "./Errors.js"
export * from "./Handlers.js"
export * from "./Security.js"
