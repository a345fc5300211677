#!/usr/bin/env bash
# Installs the Python tool NAME the tests use, pinned in
# tools/NAME/requirements.txt, in a venv at target/tools/NAME (and python3
# with venv first, where it is missing). Idempotent: left alone while the
# pin is unchanged.
#
#     bash scripts/install-python-tool.sh NAME
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: install-python-tool.sh NAME}
log() { printf '[install-python-tool] %s\n' "$*"; }
tools=target/tools
mkdir -p "$tools"
if ! command -v python3 >/dev/null || ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    log "apt-get install python3 python3-venv"
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv
fi
pin=$(sha256sum "tools/$name/requirements.txt" | cut -c1-16)
if [ "$(cat "$tools/$name.stamp" 2>/dev/null)" != "$pin" ]; then
    log "$name (Python venv in $tools/$name)"
    rm -rf "${tools:?}/$name"
    python3 -m venv "$tools/$name"
    "$tools/$name/bin/pip" install -q --disable-pip-version-check -r "tools/$name/requirements.txt"
    echo "$pin" >"$tools/$name.stamp"
fi
