#!/usr/bin/env bash
# Installs what building and testing Weir needs on a fresh Debian machine with
# rustup. Idempotent: anything already present is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[install] %s\n' "$*"; }

# Debian packages: a C toolchain for -sys crates (librdkafka is built from
# the rdkafka crate's bundled sources), RocksDB (Debian's 7.8 library, linked
# instead of compiling the crate's bundled C++: see .cargo/config.toml) and
# libclang for its generated bindings, zlib, kcat for poking at Kafka by
# hand, and the PostgreSQL server binaries (initdb, pg_ctl) the PostgreSQL
# sink tests start their own throwaway clusters with.
need_apt=()
for pkg in build-essential pkg-config zlib1g-dev libclang-dev librocksdb-dev kcat postgresql; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
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

# Operators in Python and JavaScript: the pinned componentize-py and
# componentize-js, which `weir operator new --lang python|js` projects and
# scripts/build-polyglot.sh build with (into target/tools/).
bash scripts/install-polyglot.sh
log "ok"
