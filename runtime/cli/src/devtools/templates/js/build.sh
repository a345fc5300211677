#!/usr/bin/env bash
# Builds {{name}}.wasm with componentize-js (npm install @bytecodealliance/componentize-js@0.23.0
# @bytecodealliance/preview2-shim@0.25.0), every WASI feature disabled: the
# operator imports nothing but weir:operator.
set -euo pipefail
cd "$(dirname "$0")"
"${COMPONENTIZE_JS:-componentize-js}" app.js --wit wit/operator.wit --world-name operator \
    -d stdio random clocks http fetch-event -o {{name}}.wasm >/dev/null
