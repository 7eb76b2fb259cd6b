import { defineConfig } from "tsup"
import { copyViewer } from "../../scripts/copy-viewer.mjs"
import { libraryBuild } from "../../tsup.shared.js"

// The API reference viewer travels as a file in dist/viewer/, copied from its package at build time.
export default defineConfig({ ...libraryBuild, onSuccess: async () => copyViewer("dist") })
