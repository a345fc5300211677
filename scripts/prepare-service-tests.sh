#!/usr/bin/env bash
# Installs and builds what only the service tests need (the tests marked
# `#[ignore = "needs …"]`, which scripts/test.sh runs too): Chromium, delta-rs's Python
# reader, fastavro and Google's protobuf (an Avro writer and a Protobuf
# compiler and encoder independent of the libraries Weir reads with),
# the tansu and s3s-fs servers built from crates.io, and the Python
# and JavaScript operator components (with the componentize-py/-js that
# scripts/install.sh installed). Idempotent, like each script it calls;
# scripts/test.sh runs it in the background while the workspace compiles.
set -euo pipefail
cd "$(dirname "$0")"
# tansu and s3s-fs share one target directory: what both lock at one
# version is compiled once.
if [ -z "${WEIR_SERVICES_TARGET_DIR:-}" ]; then
    WEIR_SERVICES_TARGET_DIR=$(mktemp -d)
    export WEIR_SERVICES_TARGET_DIR
    trap 'rm -rf "$WEIR_SERVICES_TARGET_DIR"' EXIT
fi
# step NAME SCRIPT: runs one install, logging its wall and CPU seconds
# (scripts/test.sh's log of this job shows where its time went).
step() {
    local from=$SECONDS
    (
        bash "$2"
        local file="$WEIR_SERVICES_TARGET_DIR/.times-$BASHPID"
        times >"$file"
        echo "[prepare-service-tests] $1: $((SECONDS - from)) s, CPU (user, system) $(sed -n 2p "$file")"
    )
}
# The network-bound installs (one after another: Chromium's apt and a
# venv's python3-venv must not race for dpkg's lock) beside the CPU-bound
# builds, so that the downloads are off the builds' path.
(
    step chromium install-chromium.sh
    step delta-reader install-delta-reader.sh
    step avro-writer install-avro-writer.sh
    step protobuf-writer install-protobuf-writer.sh
) &
downloads=$!
step tansu install-tansu.sh
step s3s-fs install-s3s.sh
step polyglot build-polyglot.sh
if ! wait "$downloads"; then
    echo "[prepare-service-tests] an install failed (its lines are above)" >&2
    exit 1
fi
