#!/usr/bin/env bash
# Builds the Python and JavaScript operators into target/guests/polyglot/
# with the toolchains scripts/install-polyglot.sh installs. Both are built
# against the plain `operator` world with every WASI import stubbed out or
# disabled, so they import nothing but weir:operator (no clocks, randomness,
# filesystem or network: replays stay deterministic). Skips a build whose
# inputs have not changed.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[build-polyglot] %s\n' "$*"; }
tools=target/tools
out=target/guests/polyglot
mkdir -p "$out"

stamp() { sha256sum "$@" | sha256sum | cut -c1-16; }

# Python: componentize-py snapshots the interpreter after importing the
# module; --stub-wasi replaces every WASI import with a trap.
py_in=$(stamp wit/operator.wit operators/fraud-rules-py/*.py "$tools/py.stamp")
if [ "$(cat "$out/fraud_rules_py.stamp" 2>/dev/null)" != "$py_in" ] || [ ! -f "$out/fraud_rules_py.wasm" ]; then
    log "fraud-rules-py"
    "$tools/py/bin/componentize-py" -d wit -w operator componentize --stub-wasi \
        -p operators/fraud-rules-py fraud_rules -o "$out/fraud_rules_py.wasm" >/dev/null
    echo "$py_in" >"$out/fraud_rules_py.stamp"
fi

# JavaScript: componentize-js (what `jco componentize` runs; jco 1.35's own
# front end fails to read WIT paths here) with every WASI feature disabled.
js_in=$(stamp wit/operator.wit operators/fraud-rules-js/*.js "$tools/js.stamp")
if [ "$(cat "$out/fraud_rules_js.stamp" 2>/dev/null)" != "$js_in" ] || [ ! -f "$out/fraud_rules_js.wasm" ]; then
    log "fraud-rules-js"
    "$tools/js/node_modules/.bin/componentize-js" operators/fraud-rules-js/fraud_rules.js \
        --wit wit/operator.wit --world-name operator \
        -d stdio random clocks http fetch-event -o "$out/fraud_rules_js.wasm" >/dev/null
    echo "$js_in" >"$out/fraud_rules_js.stamp"
fi
log "ok: $(ls -s --block-size=K "$out"/*.wasm | tr '\n' ' ')"
