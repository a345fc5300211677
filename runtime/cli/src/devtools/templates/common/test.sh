#!/usr/bin/env bash
# Builds the operator and runs it through the Weir host over sample.jsonl;
# fails unless the output is exactly expected.jsonl. Runs the `weir` that
# created this project (set WEIR to use another; else `weir` on PATH).
# The build's own output goes to build.log, shown only if the build fails.
set -euo pipefail
cd "$(dirname "$0")"
WEIR="${WEIR:-{{weir}}}"
if [ ! -x "$WEIR" ] && ! command -v "$WEIR" >/dev/null 2>&1; then
    if command -v weir >/dev/null 2>&1; then
        WEIR=weir
    else
        echo "test.sh: cannot find weir (looked for $WEIR, then weir on PATH); set WEIR=/path/to/weir" >&2
        exit 127
    fi
fi
if ! bash build.sh >build.log 2>&1; then
    cat build.log >&2
    echo "test.sh: the build failed (output above, also in build.log)" >&2
    exit 1
fi
"$WEIR" operator test {{name}}.wasm --input sample.jsonl --config config.json --expect expected.jsonl
