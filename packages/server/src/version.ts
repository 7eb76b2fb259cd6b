import pkg from "../package.json" with { type: "json" }

/** The server package's version: OpenAPI `info.version` and the `X-Taskwright-Version` header. */
export const VERSION: string = pkg.version
