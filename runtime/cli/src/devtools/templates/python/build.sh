#!/usr/bin/env bash
# Builds {{name}}.wasm with componentize-py 0.25.1 (the one Weir's
# scripts/install-polyglot.sh installs), through Weir's scripts/componentize-py,
# which makes the same sources give the same bytes, so the same operator
# version, on every build (set COMPONENTIZE_PY to use another). Every WASI
# import is stubbed: the operator imports nothing but weir:operator. It
# builds from a copy in target/py, so nothing is written next to the sources.
set -euo pipefail
cd "$(dirname "$0")"
COMPONENTIZE_PY="${COMPONENTIZE_PY:-{{componentize_py}}}"
rm -rf target/py && mkdir -p target/py
cp -r ./*.py weir target/py/
"$COMPONENTIZE_PY" -d wit -w timer-operator componentize --stub-wasi -p target/py app -o {{name}}.wasm >/dev/null
