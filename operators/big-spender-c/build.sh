#!/usr/bin/env bash
# Builds big_spender_c.wasm from C: bindings from `wit-bindgen c`, compiled
# by clang for wasm32-wasi (Debian's clang 14 and wasi-libc) as a reactor
# module, wrapped into a component by `wasm-tools component new`. The module
# calls no WASI function, so no preview-1 adapter is needed and the
# component imports nothing but weir:operator. Tools:
# scripts/install-c-toolchain.sh.
set -euo pipefail
cd "$(dirname "$0")"
out=${OUT_DIR:-build}
mkdir -p "$out"
wit-bindgen c ../../wit --world operator --out-dir "$out" >/dev/null
clang --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor -O2 -Wall -Werror \
    -I "$out" -o "$out/core.wasm" app.c "$out/operator.c" "$out/operator_component_type.o"
wasm-tools component new "$out/core.wasm" -o big_spender_c.wasm
