#!/usr/bin/env bash
# Installs s3s-fs, the S3-compatible server (Apache-2.0, from crates.io) the
# object-store checkpoint tests run against: a real S3 HTTP API with
# signature checks and conditional writes, keeping objects as files.
# Idempotent: an s3s-fs that already reports this version is kept.
set -euo pipefail
VERSION=0.14.1 # 0.15 and later need Rust 1.96
if command -v s3s-fs >/dev/null && s3s-fs --version 2>/dev/null | grep -q "$VERSION"; then
    exit 0
fi
echo "[install] cargo install s3s-fs $VERSION; takes a few minutes once"
cargo install s3s-fs --version "$VERSION" --locked --features binary --force
