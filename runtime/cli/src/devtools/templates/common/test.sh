#!/usr/bin/env bash
# Builds the operator and runs it through the Weir host over sample.jsonl;
# fails unless the output is exactly expected.jsonl.
set -euo pipefail
cd "$(dirname "$0")"
bash build.sh
"${WEIR:-weir}" operator test {{name}}.wasm --input sample.jsonl --config config.json --expect expected.jsonl
