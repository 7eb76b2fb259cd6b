#!/usr/bin/env bash
# Installs wrk, the bench's load generator (bench/lib/loadgen.mjs): written in C, it leaves the
# two cores to the servers, where autocannon (the fallback) takes most of one and flattens the
# ratios. Idempotent; installing needs root. Without root the bench falls back to autocannon and
# says so in its report.
set -euo pipefail

if ! command -v wrk >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq wrk >/dev/null
  else
    echo "wrk is not installed and this is not root: the bench will use autocannon" >&2
  fi
fi
