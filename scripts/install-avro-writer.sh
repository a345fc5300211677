#!/usr/bin/env bash
# Installs the independent Avro writer the Avro tests write their input
# with: fastavro from PyPI, pinned in tools/avro/requirements.txt, in a
# venv at target/tools/avro. Idempotent: left alone while the pin is
# unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[install-avro-writer] %s\n' "$*"; }
tools=target/tools
mkdir -p "$tools"
if ! command -v python3 >/dev/null; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    log "apt-get install python3 python3-venv"
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv
fi
pin=$(sha256sum tools/avro/requirements.txt | cut -c1-16)
if [ "$(cat "$tools/avro.stamp" 2>/dev/null)" != "$pin" ]; then
    log "fastavro (Python venv in $tools/avro)"
    rm -rf "$tools/avro"
    python3 -m venv "$tools/avro"
    "$tools/avro/bin/pip" install -q --disable-pip-version-check -r tools/avro/requirements.txt
    echo "$pin" >"$tools/avro.stamp"
fi
log "ok: fastavro $("$tools/avro/bin/python" -c 'import fastavro; print(fastavro.__version__)')"
