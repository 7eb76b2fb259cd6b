#!/usr/bin/env bash
# Installs nginx (the light build: it has auth_request) for packages/server/test/nginx.test.ts,
# which runs a real nginx with auth_request -> /api/auth/verify in front of a small upstream.
# Idempotent; needs root (CI containers run as root). The test starts its own nginx on a free
# loopback port with its own config and prefix; the distribution's service is not needed.
set -euo pipefail

if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq nginx-light >/dev/null
fi

nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
"$nginx_bin" -V 2>&1 | grep -q -- "--with-http_auth_request_module" || {
  echo "nginx lacks the auth_request module" >&2
  exit 1
}
echo "nginx: $("$nginx_bin" -v 2>&1)"
