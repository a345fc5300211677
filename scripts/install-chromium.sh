#!/usr/bin/env bash
# Debian's Chromium, for the dashboard's browser test (tests/all/observe.rs)
# and for regenerating docs/dashboard.png. Idempotent.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
echo "[install] apt-get install chromium fonts-liberation" >&2
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-liberation
