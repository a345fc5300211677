#!/usr/bin/env bash
# Installs what building and testing Weir needs on a fresh Debian machine with
# rustup. Idempotent: anything already present is left as it is.
#   bash scripts/install.sh               what the demo, `weir operator new`
#                                         and the tests need
#   bash scripts/install.sh --build-only  only what compiling needs: enough
#                                         for `cargo build` and for a plain
#                                         `cargo test --workspace`, which
#                                         leaves out the service tests
# The services only those tests use are installed by
# scripts/prepare-service-tests.sh (scripts/test.sh runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=false
case "${1:-}" in
    "") ;;
    --build-only) build_only=true ;;
    *) echo "usage: bash scripts/install.sh [--build-only]" >&2; exit 2 ;;
esac

log() { printf '[install] %s\n' "$*"; }

# Debian packages: a C toolchain for -sys crates (librdkafka is built from
# the rdkafka crate's bundled sources, with Debian's OpenSSL for TLS and
# SASL/SCRAM), RocksDB (Debian's 7.8 library, linked instead of compiling
# the crate's bundled C++: see .cargo/config.toml) and libclang for its
# generated bindings, zlib; for the tests, kcat for poking at Kafka by hand,
# the PostgreSQL server binaries (initdb, pg_ctl) the PostgreSQL sink tests
# start their own throwaway clusters with, and stunnel, the TLS endpoint the
# Kafka TLS tests put in front of the test broker.
packages=(build-essential pkg-config zlib1g-dev libssl-dev libclang-dev librocksdb-dev)
$build_only || packages+=(kcat postgresql stunnel4)
need_apt=()
for pkg in "${packages[@]}"; do
    # Installed, not merely known (a removed package keeps its config files
    # and dpkg -s still answers for it).
    [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ] ||
        need_apt+=("$pkg")
done
if ((${#need_apt[@]})); then
    log "apt-get install ${need_apt[*]}"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    if [[ " ${need_apt[*]} " == *" postgresql "* ]]; then
        # The tests run their own clusters on 127.0.0.1; do not let the
        # package create (and start) a system-wide one on port 5432.
        $SUDO mkdir -p /etc/postgresql-common/createcluster.d
        echo "create_main_cluster = false" |
            $SUDO tee /etc/postgresql-common/createcluster.d/weir-no-main-cluster.conf >/dev/null
    fi
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi

# Rust: the toolchain comes from rustup; operators are built for wasm32-wasip2.
command -v cargo >/dev/null || { echo "cargo not found: install Rust with rustup first" >&2; exit 1; }
if ! rustup target list --installed | grep -qx wasm32-wasip2; then
    log "rustup target add wasm32-wasip2"
    rustup target add wasm32-wasip2
fi
rustup component list --installed | grep -q '^clippy' || rustup component add clippy
rustup component list --installed | grep -q '^rustfmt' || rustup component add rustfmt

# cargo-nextest runs the test suite (scripts/test.sh); the machine's image
# has it, elsewhere it is built once.
if ! $build_only && ! cargo nextest --version >/dev/null 2>&1; then
    log "cargo install cargo-nextest"
    cargo install cargo-nextest --locked --version 0.9.143
fi

# Operators in Python and JavaScript: the pinned componentize-py and
# componentize-js, which `weir operator new --lang python|js` projects and
# scripts/build-polyglot.sh build with (into target/tools/).
$build_only || bash scripts/install-polyglot.sh
log "ok"
