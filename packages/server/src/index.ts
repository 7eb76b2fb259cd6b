/** Taskwright's HTTP server. */

export * from "./Documents.js"
export * from "./EffectServer.js"
export * from "./FastServer.js"
export * from "./handlers/index.js"
export type { DispatchServices, Document, HttpExchange, SiteHandler } from "./http/Dispatcher.js"
export type { AnyHandler, Handler, HandlerInput, Handlers, RequestContext } from "./http/Handler.js"
export { type ContractRoute, contractRoutes, type Route } from "./http/Routes.js"
export * from "./Server.js"
export * from "./version.js"
export * from "./WebHandler.js"
