#!/usr/bin/env bash
# Installs what tools/model/train.py needs to train the fraud model again:
# scikit-learn, skl2onnx and onnx from PyPI, pinned in
# tools/model/requirements.txt, in a venv at target/tools/model. Not needed
# to run or test Weir: the trained model is committed
# (operators/fraud-model/model/). Idempotent: left alone while the pins are
# unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[install-model-trainer] %s\n' "$*"; }
tools=target/tools
mkdir -p "$tools"
if ! command -v python3 >/dev/null; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    log "apt-get install python3 python3-venv"
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv
fi
pin=$(sha256sum tools/model/requirements.txt | cut -c1-16)
if [ "$(cat "$tools/model.stamp" 2>/dev/null)" != "$pin" ]; then
    log "scikit-learn, skl2onnx (Python venv in $tools/model)"
    rm -rf "$tools/model"
    python3 -m venv "$tools/model"
    "$tools/model/bin/pip" install -q --disable-pip-version-check -r tools/model/requirements.txt
    echo "$pin" >"$tools/model.stamp"
fi
log "ok: $("$tools/model/bin/python" -c 'import sklearn, skl2onnx; print("scikit-learn", sklearn.__version__, "skl2onnx", skl2onnx.__version__)')"
log "train: cargo build && $tools/model/bin/python tools/model/train.py"
