/** Renders the OpenAPI document `doc` as the Markdown of docs/api.md. */
export declare const renderReference: (doc: Record<string, unknown>) => string
/** Where the page is kept: docs/api.md. */
export declare const REFERENCE_FILE: string
