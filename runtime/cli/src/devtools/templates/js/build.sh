#!/usr/bin/env bash
# Builds {{name}}.wasm with componentize-js (npm install @bytecodealliance/componentize-js@0.23.0
# @bytecodealliance/preview2-shim@0.25.0; Weir's scripts/install-polyglot.sh
# installs them, set COMPONENTIZE_JS to use another), every WASI feature disabled: the
# operator imports nothing but weir:operator.
set -euo pipefail
cd "$(dirname "$0")"
"${COMPONENTIZE_JS:-{{componentize_js}}}" app.js --wit wit/operator.wit --world-name operator \
    -d stdio random clocks http fetch-event -o {{name}}.wasm >/dev/null
