#!/usr/bin/env node
// The `taskwright` command. npm links a package's bin only if its file exists when it installs, and
// in a fresh checkout dist/ does not exist until `npm run build`: this small committed file does,
// so `npx taskwright` works right after `npm install && npm run build`.
import "../dist/main.js"
