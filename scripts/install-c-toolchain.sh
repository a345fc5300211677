#!/usr/bin/env bash
# Installs what operators/big-spender-c needs (not part of CI: the two cargo
# installs take ~10 minutes on 2 cores): Debian's clang 14, lld, wasi-libc
# and the wasm32 compiler runtime, and wit-bindgen-cli + wasm-tools from
# crates.io at pinned versions. Idempotent.
set -euo pipefail
log() { printf '[install-c] %s\n' "$*"; }
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
need_apt=()
for pkg in clang lld wasi-libc libclang-rt-14-dev-wasm32; do
    [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ] || need_apt+=("$pkg")
done
if ((${#need_apt[@]})); then
    log "apt-get install ${need_apt[*]}"
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi
have() { command -v "$1" >/dev/null && "$1" --version | grep -q "$2"; }
have wit-bindgen 0.51.0 || { log "cargo install wit-bindgen-cli"; cargo install --locked wit-bindgen-cli@0.51.0; }
have wasm-tools 1.243.0 || { log "cargo install wasm-tools"; cargo install --locked wasm-tools@1.243.0; }
log "ok"
