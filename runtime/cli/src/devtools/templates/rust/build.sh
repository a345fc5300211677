#!/usr/bin/env bash
# Builds {{name}}.wasm (needs `rustup target add wasm32-wasip2`).
set -euo pipefail
cd "$(dirname "$0")"
cargo build --release --target wasm32-wasip2 --quiet
cp "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/{{crate}}.wasm" {{name}}.wasm
