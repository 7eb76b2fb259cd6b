/**
 * Test harness for Taskwright: `createHarness()` (an engine per test, `inject`, the typed client,
 * runs of the scripted agent), `startTestServer()` (a real server on a loopback port), fresh
 * PostgreSQL databases, git repositories and process checks.
 */

export { type QueryParam, type RequestOptions, sendTestRequest, type TestResponse } from "./Exchange.js"
export * from "./Harness.js"
export * from "./Postgres.js"
export * from "./Processes.js"
export * from "./Repos.js"
export * from "./ServerProcess.js"
export * from "./scripted-agent.js"
export * from "./TestServer.js"
