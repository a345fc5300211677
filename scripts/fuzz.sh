#!/usr/bin/env bash
# Runs every fuzz target (tests/fuzz) for a bounded time, starting from the
# checked-in corpus (tests/fuzz/corpus/<target>); what a run discovers goes
# to a scratch directory, not into the repository. A crash fails the script
# and leaves the input in tests/fuzz/artifacts/<target>/.
#   bash scripts/fuzz.sh [SECONDS]     default 30 s per target (WEIR_FUZZ_SECONDS)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-${WEIR_FUZZ_SECONDS:-30}}
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked --version 0.13.2
fi
# cargo fuzz builds with -Z flags (sanitizer, coverage); the machine's one
# toolchain is stable, whose compiler accepts them with RUSTC_BOOTSTRAP.
export RUSTC_BOOTSTRAP=1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for target in json_decoder wal_entry guest_output upload_form; do
  mkdir -p "$scratch/$target"
  echo "fuzz: $target for ${seconds}s"
  log="$scratch/$target.log"
  if ! cargo fuzz run --fuzz-dir tests/fuzz "$target" \
      "$scratch/$target" "tests/fuzz/corpus/$target" \
      -- -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
    tail -60 "$log"
    echo "fuzz: $target FAILED (the input is in tests/fuzz/artifacts/$target/)"
    exit 1
  fi
  grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "$log" | sed 's/^/  /'
done
