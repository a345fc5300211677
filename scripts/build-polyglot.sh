#!/usr/bin/env bash
# Builds the Python and JavaScript operators into target/guests/polyglot/
# with the toolchains scripts/install-polyglot.sh installs, each with its
# language's SDK modules (sdk/python, sdk/js). Every WASI import is stubbed
# out or disabled, so they import nothing but weir:operator (no clocks,
# randomness, filesystem or network: replays stay deterministic). Skips a
# build whose inputs have not changed.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[build-polyglot] %s\n' "$*"; }
tools=target/tools
out=target/guests/polyglot
mkdir -p "$out"

stamp() { sha256sum "$@" | sha256sum | cut -c1-16; }

# py NAME DIR MODULE WORLD [MORE_DIRS...]: componentize-py snapshots the interpreter after
# importing the module; --stub-wasi replaces every WASI import with a trap.
# It builds from a copy of the sources (with the Python SDK, sdk/python), so
# nothing is written next to the sources, through scripts/componentize-py,
# which makes the bytes the same on every build.
py() {
    local name=$1 dir=$2 module=$3 world=$4
    shift 4
    local in src=$out/src-$name d
    local sources=("$dir"/*.py)
    for d in "$@"; do sources+=("$d"/*.py); done
    in=$(stamp wit/operator.wit "${sources[@]}" sdk/python/*.py sdk/python/weir/*.py "$tools/py.stamp" \
        scripts/componentize-py scripts/reproducible/fixed_world.c)
    if [ "$(cat "$out/$name.stamp" 2>/dev/null)" != "$in" ] || [ ! -f "$out/$name.wasm" ]; then
        log "$name"
        rm -rf "$src" && mkdir -p "$src"
        cp "${sources[@]}" sdk/python/*.py "$src/"
        mkdir "$src/weir" && cp sdk/python/weir/*.py "$src/weir/"
        scripts/componentize-py -d wit -w "$world" componentize --stub-wasi \
            -p "$src" "$module" -o "$out/$name.wasm" >/dev/null
        echo "$in" >"$out/$name.stamp"
    fi
}

# js NAME FILE WORLD: componentize-js (what `jco componentize` runs; jco
# 1.35's own front end fails to read WIT paths here) with every WASI feature
# disabled. The operator imports the SDK as `./weir_*.js`, so it is built
# from a copy next to them.
js() {
    local name=$1 file=$2 world=$3
    local in src=$out/src-$name
    in=$(stamp wit/operator.wit "$file" sdk/js/*.js "$tools/js.stamp")
    if [ "$(cat "$out/$name.stamp" 2>/dev/null)" != "$in" ] || [ ! -f "$out/$name.wasm" ]; then
        log "$name"
        rm -rf "$src" && mkdir -p "$src"
        cp sdk/js/*.js "$file" "$src/"
        "$tools/js/node_modules/.bin/componentize-js" "$src/$(basename "$file")" \
            --wit wit/operator.wit --world-name "$world" \
            -d stdio random clocks http fetch-event -o "$out/$name.wasm" >/dev/null
        echo "$in" >"$out/$name.stamp"
    fi
}

py fraud_rules_py operators/fraud-rules-py fraud_rules operator
py fraud_velocity_py operators/fraud-velocity-py fraud_velocity operator operators/fraud-rules-py
js fraud_rules_js operators/fraud-rules-js/fraud_rules.js operator
# The window tests' guests: the SDKs' windows and timers.
py window_kinds_py operators/window-kinds-py window_kinds timer-operator
js window_kinds_js operators/window-kinds-js/window_kinds.js timer-operator
# The lookup tests' guests: the SDKs' reference-table helpers.
py card_home_py operators/card-home-py card_home operator
js card_home_js operators/card-home-js/card_home.js operator
# Every column type through each SDK's values (with the Rust types-check).
py types_check_py tests/guests/types-check-py types_check operator
js types_check_js tests/guests/types-check-js/types_check.js operator
# The Python SDK's tests: exceptions and print().
py sdk_checks_py tests/guests/sdk-checks-py sdk_checks operator
log "ok: $(ls -s --block-size=K "$out"/*.wasm | tr '\n' ' ')"
