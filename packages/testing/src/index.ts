/** Test harness for Taskwright: a real server over an in-memory store, a fresh PostgreSQL database, or a file. */

export * from "./scripted-agent.js"
export * from "./TestServer.js"
