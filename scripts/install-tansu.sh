#!/usr/bin/env bash
# Installs tansu, the Kafka-compatible broker the Kafka tests run against
# (Apache-2.0, from crates.io), with in-memory and SQLite storage. Idempotent:
# a tansu that already reports this version is kept.
set -euo pipefail
VERSION=0.6.0
if command -v tansu >/dev/null && tansu --version 2>/dev/null | grep -q "$VERSION" \
    && [ -f "${CARGO_HOME:-$HOME/.cargo}/.weir-tansu-features" ]; then
    exit 0
fi
echo "[install] cargo install tansu $VERSION (dynostore, libsql); takes ~15 minutes once"
cargo install tansu --version "$VERSION" --locked --features dynostore,libsql --force
touch "${CARGO_HOME:-$HOME/.cargo}/.weir-tansu-features"
