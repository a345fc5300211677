#!/usr/bin/env bash
# Installs the independent Avro writer the Avro tests write their input
# with: fastavro from PyPI, pinned in tools/avro/requirements.txt, in a
# venv at target/tools/avro. Idempotent: left alone while the pin is
# unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-python-tool.sh avro
printf '[install-avro-writer] ok: fastavro %s\n' \
    "$(target/tools/avro/bin/python -c 'import fastavro; print(fastavro.__version__)')"
