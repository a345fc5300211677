#!/usr/bin/env bash
# Installs the pinned toolchains for operators written in Python and
# JavaScript into target/tools/ (tools/polyglot/ pins them): componentize-py
# in a Python venv, componentize-js with npm ci. Idempotent: a toolchain whose
# pin has not changed since it was installed is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[install-polyglot] %s\n' "$*"; }
tools=target/tools
mkdir -p "$tools"

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
need_apt=()
python3 -c "import ensurepip, venv" >/dev/null 2>&1 || need_apt+=(python3 python3-venv)
command -v npm >/dev/null || need_apt+=(nodejs npm)
if ((${#need_apt[@]})); then
    log "apt-get install ${need_apt[*]}"
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi

stamp() { sha256sum "$@" | sha256sum | cut -c1-16; }

py_pin=$(stamp tools/polyglot/requirements.txt)
if [ "$(cat "$tools/py.stamp" 2>/dev/null)" != "$py_pin" ]; then
    log "componentize-py (Python venv in $tools/py)"
    rm -rf "$tools/py"
    python3 -m venv "$tools/py"
    "$tools/py/bin/pip" install -q --disable-pip-version-check -r tools/polyglot/requirements.txt
    echo "$py_pin" >"$tools/py.stamp"
fi

js_pin=$(stamp tools/polyglot/package.json tools/polyglot/package-lock.json)
if [ "$(cat "$tools/js.stamp" 2>/dev/null)" != "$js_pin" ]; then
    log "componentize-js (npm ci in $tools/js)"
    rm -rf "$tools/js"
    mkdir -p "$tools/js"
    cp tools/polyglot/package.json tools/polyglot/package-lock.json "$tools/js/"
    (cd "$tools/js" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$js_pin" >"$tools/js.stamp"
fi
# The reproducible Python build's preload (scripts/componentize-py), built
# here so that building an operator never writes into this checkout.
world=scripts/reproducible/fixed_world.c
if [ "$(uname -sm)" = "Linux x86_64" ] && { [ ! -f "$tools/fixed_world.so" ] || [ "$world" -nt "$tools/fixed_world.so" ]; }; then
    log "fixed_world.so (the reproducible build's preload)"
    cc -O2 -shared -fPIC -o "$tools/fixed_world.so.$$" "$world"
    mv -f "$tools/fixed_world.so.$$" "$tools/fixed_world.so"
fi
log "ok: $("$tools/py/bin/componentize-py" --version), componentize-js $("$tools/js/node_modules/.bin/componentize-js" --version)"
