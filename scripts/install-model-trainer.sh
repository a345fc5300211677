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
bash scripts/install-python-tool.sh model
log "ok: $("$tools/model/bin/python" -c 'import sklearn, skl2onnx; print("scikit-learn", sklearn.__version__, "skl2onnx", skl2onnx.__version__)')"
log "train: cargo build && $tools/model/bin/python tools/model/train.py"
