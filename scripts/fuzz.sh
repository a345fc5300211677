#!/usr/bin/env bash
# Runs every fuzz target (tests/fuzz) for a bounded time, starting from the
# checked-in corpus (tests/fuzz/corpus/<target>); what a run discovers goes
# to a scratch directory, not into the repository. A crash fails the script
# and leaves the input in tests/fuzz/artifacts/<target>/.
#   bash scripts/fuzz.sh [SECONDS]     default 30 s per target (WEIR_FUZZ_SECONDS)
#   bash scripts/fuzz.sh --build-only  builds the targets (scripts/test.sh does
#                                      this in the background) and stops
# libFuzzer runs on one core: two targets run at a time, each for SECONDS.
#
# WEIR_FUZZ_SANITIZER (default none) is cargo fuzz's --sanitizer. The
# fuzzed code has no unsafe of its own, so the test command's short runs go
# without AddressSanitizer: a panic, an overflow or an out-of-bounds index
# fails them alike, the build takes a third less CPU and each input runs
# faster. Long campaigns can add it for the unsafe code of dependencies:
#   WEIR_FUZZ_SANITIZER=address bash scripts/fuzz.sh 3600
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(json_decoder wal_entry guest_output upload_form)
if ! cargo fuzz --version >/dev/null 2>&1; then
  # A build tool: it need not be optimised, and builds faster at opt-level 0.
  CARGO_PROFILE_RELEASE_OPT_LEVEL=0 cargo install cargo-fuzz --locked --version 0.13.2
fi
# cargo fuzz builds with -Z flags (sanitizer, coverage); the machine's one
# toolchain is stable, whose compiler accepts them with RUSTC_BOOTSTRAP.
export RUSTC_BOOTSTRAP=1
# The same flags for the build and the run, or the run builds again.
common=(--fuzz-dir tests/fuzz --sanitizer "${WEIR_FUZZ_SANITIZER:-none}")
if [ "${1:-}" = "--build-only" ]; then
  exec cargo fuzz build "${common[@]}"
fi
seconds=${1:-${WEIR_FUZZ_SECONDS:-30}}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# fuzz TARGET: one target's run, its libFuzzer output in $scratch/TARGET.log.
fuzz() {
  local target=$1
  mkdir -p "$scratch/$target"
  cargo fuzz run "${common[@]}" "$target" \
    "$scratch/$target" "tests/fuzz/corpus/$target" \
    -- -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
    >"$scratch/$target.log" 2>&1
}
# report TARGET STATUS: its figures, or its log's end and the failure.
report() {
  local target=$1 status=$2 log="$scratch/$1.log"
  if [ "$status" -ne 0 ]; then
    tail -60 "$log"
    echo "fuzz: $target FAILED (the input is in tests/fuzz/artifacts/$target/)"
    return 1
  fi
  echo "fuzz: $target for ${seconds}s"
  grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "$log" | sed 's/^/  /'
}

failed=0
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  pair=("${targets[@]:i:2}")
  pids=()
  for target in "${pair[@]}"; do
    fuzz "$target" &
    pids+=($!)
  done
  for j in "${!pair[@]}"; do
    status=0
    wait "${pids[j]}" || status=$?
    report "${pair[j]}" "$status" || failed=1
  done
done
exit "$failed"
