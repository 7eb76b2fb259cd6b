#!/usr/bin/env bash
# Installs Debian's Chromium for the web board's browser tests (packages/web/test), which drive it
# with playwright-core at /usr/bin/chromium: Playwright's own browser download cannot work here.
# Idempotent; needs root (CI containers run as root).
set -euo pipefail

if [ ! -x /usr/bin/chromium ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium >/dev/null
fi

echo "chromium: $(/usr/bin/chromium --version 2>/dev/null | head -n 1)"
