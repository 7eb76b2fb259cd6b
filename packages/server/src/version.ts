/** The server package's version: OpenAPI `info.version` and the `X-Taskwright-Version` header. */
export const VERSION = "0.1.0"
