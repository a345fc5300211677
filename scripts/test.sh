#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this script):
# installs what is missing, checks formatting and lints, runs every test.
# Ends with one line of each phase's time (`[test.sh] phases: …`), also
# when a phase fails, for the closing notes' CI breakdown.
set -euo pipefail
cd "$(dirname "$0")/.."

phases=()
started=$SECONDS
# phase NAME COMMAND...: runs COMMAND, noting how long it took.
phase() {
    local name=$1 from=$SECONDS
    shift
    "$@"
    phases+=("$name $(clock $((SECONDS - from)))")
}
clock() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
report() {
    local IFS=,
    echo "[test.sh] phases: ${phases[*]:-none}; total $(clock $((SECONDS - started)))"
}
trap report EXIT

phase install bash scripts/install.sh
# The Kafka tests start their own tansu brokers on 127.0.0.1 and stop them.
phase tansu bash scripts/install-tansu.sh
# The object-store checkpoint tests start their own s3s-fs servers likewise.
phase s3s-fs bash scripts/install-s3s.sh
# The Delta sink's tests read every table with delta-rs's Python reader.
phase delta-reader bash scripts/install-delta-reader.sh
# Python and JavaScript operators: components into target/guests/polyglot,
# built with the pinned componentize-py / componentize-js that install.sh
# put into target/tools.
phase polyglot bash scripts/build-polyglot.sh
# Headless Chromium for the dashboard's browser test.
phase chromium bash scripts/install-chromium.sh
# One target dir for everything; the guest operators are built by
# runtime/cli/build.rs into target/guests and reused (the tests build the
# test-only guests there too, the first time they need one).
phase fmt cargo fmt --all --check
phase clippy cargo clippy --workspace --all-targets --locked -- -D warnings
phase test-build cargo test --workspace --locked --no-run
phase tests cargo test --workspace --locked
# Every fuzz target for a bounded time from the checked-in corpus.
phase fuzz bash scripts/fuzz.sh "${WEIR_FUZZ_SECONDS:-30}"
