#!/usr/bin/env bash
# Installs the independent Delta reader the Delta sink's tests read tables
# with: delta-rs's Python package `deltalake` from PyPI, pinned in
# tools/delta/requirements.txt, in a venv at target/tools/delta.
# Idempotent: left alone while the pins are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[install-delta-reader] %s\n' "$*"; }
tools=target/tools
mkdir -p "$tools"
if ! command -v python3 >/dev/null; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    log "apt-get install python3 python3-venv"
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv
fi
pin=$(sha256sum tools/delta/requirements.txt | cut -c1-16)
if [ "$(cat "$tools/delta.stamp" 2>/dev/null)" != "$pin" ]; then
    log "deltalake (Python venv in $tools/delta)"
    rm -rf "$tools/delta"
    python3 -m venv "$tools/delta"
    "$tools/delta/bin/pip" install -q --disable-pip-version-check -r tools/delta/requirements.txt
    echo "$pin" >"$tools/delta.stamp"
fi
log "ok: deltalake $("$tools/delta/bin/python" -c 'import deltalake; print(deltalake.__version__)')"
