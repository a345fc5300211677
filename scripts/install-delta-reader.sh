#!/usr/bin/env bash
# Installs the independent Delta reader the Delta sink's tests read tables
# with: delta-rs's Python package `deltalake` from PyPI, pinned in
# tools/delta/requirements.txt, in a venv at target/tools/delta.
# Idempotent: left alone while the pins are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-python-tool.sh delta
printf '[install-delta-reader] ok: deltalake %s\n' \
    "$(target/tools/delta/bin/python -c 'import deltalake; print(deltalake.__version__)')"
