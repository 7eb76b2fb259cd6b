/**
 * Taskwright's domain: the resources and requests as schemas, their identifiers, the errors every
 * face answers, scopes, events and the validation that turns a bad input into a 400 in words.
 * Pure: no driver, no Node built-in, usable in a browser.
 */
export * from "./Actor.js"
export * from "./AgentConfig.js"
export * from "./Auth.js"
export * from "./Bounds.js"
export * from "./Errors.js"
export * from "./Event.js"
export * from "./Ids.js"
export * from "./Label.js"
export * from "./Paging.js"
export * from "./Project.js"
export * from "./Review.js"
export * from "./Run.js"
export * from "./Scopes.js"
export * from "./Task.js"
export * from "./TaskwrightError.js"
export * from "./Timestamp.js"
export * from "./User.js"
export * from "./Validation.js"
