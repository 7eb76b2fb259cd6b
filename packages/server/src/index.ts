/** Taskwright's HTTP server. */

export * from "./EffectServer.js"
export * from "./FastServer.js"
export * from "./handlers/index.js"
export * from "./Server.js"
export * from "./version.js"
