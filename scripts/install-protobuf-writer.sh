#!/usr/bin/env bash
# Installs the independent Protobuf compiler and encoder the Protobuf tests
# write their input with: protoc (grpcio-tools) and Google's protobuf
# runtime from PyPI, pinned in tools/protobuf/requirements.txt, in a venv at
# target/tools/protobuf. Idempotent: left alone while the pin is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-python-tool.sh protobuf
printf '[install-protobuf-writer] ok: protobuf %s\n' \
    "$(target/tools/protobuf/bin/python -c 'import google.protobuf as p; print(p.__version__)')"
