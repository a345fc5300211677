#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this script):
# installs what is missing, checks formatting and lints, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# The Kafka tests start their own tansu brokers on 127.0.0.1 and stop them.
bash scripts/install-tansu.sh
# The object-store checkpoint tests start their own s3s-fs servers likewise.
bash scripts/install-s3s.sh
# The Delta sink's tests read every table with delta-rs's Python reader.
bash scripts/install-delta-reader.sh
# Python and JavaScript operators: components into target/guests/polyglot,
# built with the pinned componentize-py / componentize-js that install.sh
# put into target/tools.
bash scripts/build-polyglot.sh
# Headless Chromium for the dashboard's browser test.
bash scripts/install-chromium.sh
# One target dir for everything; the guest operators are built by
# runtime/cli/build.rs into target/guests and reused (the tests build the
# test-only guests there too, the first time they need one).
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
# Every fuzz target for a bounded time from the checked-in corpus.
bash scripts/fuzz.sh "${WEIR_FUZZ_SECONDS:-30}"
