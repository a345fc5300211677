#!/usr/bin/env bash
# Builds {{name}}.wasm with componentize-py (pip install componentize-py==0.25.1),
# with every WASI import stubbed: the operator imports nothing but weir:operator.
set -euo pipefail
cd "$(dirname "$0")"
"${COMPONENTIZE_PY:-componentize-py}" -d wit -w operator componentize --stub-wasi app -o {{name}}.wasm >/dev/null
