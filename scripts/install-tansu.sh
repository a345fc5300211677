#!/usr/bin/env bash
# Installs tansu, the Kafka-compatible broker the Kafka tests run against
# (Apache-2.0, from crates.io), with in-memory and SQLite storage, built from
# the crates.io sources of 0.6.0 with one fix of ours to its group
# coordinator (scripts/tansu-0.6.0-group-expiry.patch): in 0.6.0 a member
# that dies without LeaveGroup is dropped from the group but the group never
# rebalances, so its partitions are never assigned again. Workers' failover
# (docs/cluster.md) rests on that rebalance. Upstream fixed the same
# area after 0.6.0 in a release that needs a newer Rust than this project's.
#
# Idempotent: a tansu built from this version and this patch is kept.
set -euo pipefail
cd "$(dirname "$0")"
VERSION=0.6.0
PATCH="$PWD/tansu-$VERSION-group-expiry.patch"
BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
MARK="${CARGO_HOME:-$HOME/.cargo}/.weir-tansu-$VERSION-$(sha256sum "$PATCH" | cut -c1-12)"
if command -v tansu >/dev/null && [ -f "$MARK" ]; then
    exit 0
fi
echo "[install] tansu $VERSION from crates.io with $(basename "$PATCH"); takes ~5 minutes once"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for crate in tansu tansu-broker; do
    curl -sSfL --retry 3 "https://static.crates.io/crates/$crate/$crate-$VERSION.crate" |
        tar xz -C "$work"
done
patch -d "$work/tansu-broker-$VERSION" -p1 --quiet <"$PATCH"
cat >>"$work/tansu-$VERSION/Cargo.toml" <<EOF

[patch.crates-io]
tansu-broker = { path = "../tansu-broker-$VERSION" }
EOF
# The crate's own Cargo.lock pins every other dependency, as --locked would;
# only the patched tansu-broker's entry changes. A test broker is built at
# opt-level 0: 4.4 minutes and 7 CPU minutes here, against 9 and 16.5 at
# opt-level 1 and ~15 at the release profile's 3; the tests' loads are a
# few thousand records a second. WEIR_SERVICES_TARGET_DIR, when set, is a
# target directory shared with scripts/install-s3s.sh (same profile), so
# that the crates both lock at one version are compiled once.
target_dir=${WEIR_SERVICES_TARGET_DIR:-$work/target}
(cd "$work/tansu-$VERSION" &&
    CARGO_TARGET_DIR="$target_dir" CARGO_PROFILE_RELEASE_OPT_LEVEL=0 \
        cargo build --release --features dynostore,libsql)
mkdir -p "$BIN"
install -m 755 "$target_dir/release/tansu" "$BIN/tansu"
rm -f "${CARGO_HOME:-$HOME/.cargo}"/.weir-tansu-*
touch "$MARK"
