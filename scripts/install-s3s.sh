#!/usr/bin/env bash
# Installs s3s-fs, the S3-compatible server (Apache-2.0, from crates.io) the
# object-store checkpoint tests run against: a real S3 HTTP API with
# signature checks and conditional writes, keeping objects as files.
#
# Built from the crates.io sources of 0.14.1 with one fix of ours
# (scripts/s3s-fs-0.14.1-atomic-conditional-put.patch): 0.14.1 checks
# If-Match / If-None-Match and then writes, with nothing between the two, so
# two conditional writes of one key can both succeed, and a read can return
# an object's old bytes with its new ETag. S3 makes both atomic, and the
# cluster's shared registry (docs/cluster.md) rests on that: the worker
# tests saw one of two concurrent uploads vanish. The patch holds one lock
# from the check to the saved ETag, and across a read's file and ETag.
#
# Idempotent: an s3s-fs built from this version and this patch is kept.
set -euo pipefail
cd "$(dirname "$0")"
VERSION=0.14.1 # 0.15 and later need Rust 1.96
PATCH="$PWD/s3s-fs-$VERSION-atomic-conditional-put.patch"
BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
MARK="${CARGO_HOME:-$HOME/.cargo}/.weir-s3s-fs-$VERSION-$(sha256sum "$PATCH" | cut -c1-12)"
if command -v s3s-fs >/dev/null && [ -f "$MARK" ]; then
    exit 0
fi
echo "[install] s3s-fs $VERSION from crates.io with $(basename "$PATCH"); takes a few minutes once"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
curl -sSfL --retry 3 "https://static.crates.io/crates/s3s-fs/s3s-fs-$VERSION.crate" | tar xz -C "$work"
patch -d "$work/s3s-fs-$VERSION" -p1 --quiet <"$PATCH"
# The crate's own Cargo.lock pins every dependency. A test server is built
# at opt-level 0, in the target directory it may share with tansu's build
# (WEIR_SERVICES_TARGET_DIR, see scripts/install-tansu.sh).
target_dir=${WEIR_SERVICES_TARGET_DIR:-$work/target}
(cd "$work/s3s-fs-$VERSION" &&
    CARGO_TARGET_DIR="$target_dir" CARGO_PROFILE_RELEASE_OPT_LEVEL=0 \
        cargo build --release --locked --features binary --bin s3s-fs)
mkdir -p "$BIN"
install -m 755 "$target_dir/release/s3s-fs" "$BIN/s3s-fs"
rm -f "${CARGO_HOME:-$HOME/.cargo}"/.weir-s3s-fs-*
touch "$MARK"
