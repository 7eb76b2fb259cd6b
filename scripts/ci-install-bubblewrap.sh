#!/usr/bin/env bash
# Installs bubblewrap (bwrap), which sandboxes every agent run (packages/core/src/runs/Sandbox.ts),
# and checks that it can make the namespaces a run needs: without it, the service refuses runs
# (503) and the run suites fail. Idempotent; installing needs root (CI containers run as root).
set -euo pipefail

if ! command -v bwrap >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq bubblewrap >/dev/null
fi

# The same namespaces and mounts every run gets (the service's own probe tries exactly these).
if ! bwrap --unshare-user-try --cap-drop ALL --die-with-parent --new-session --unshare-pid --unshare-ipc \
  --unshare-uts --unshare-cgroup-try --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp -- true; then
  echo "bwrap is installed but cannot make a sandbox here: the kernel or the container must allow" >&2
  echo "(unprivileged) user namespaces and mounts; see docs/security.md" >&2
  exit 1
fi
echo "bubblewrap: $(bwrap --version)"
