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
# The targets are built by cargo with the flags cargo-fuzz 0.13 passes
# (libFuzzer's coverage counters and comparison tracing, `--cfg fuzzing`,
# debug assertions, one codegen unit) and run directly, so the test command
# needs no cargo-fuzz (installing it cost a fresh machine 1.4 CPU-minutes);
# `cargo fuzz` itself works on tests/fuzz as usual.
#
# WEIR_FUZZ_OPT_LEVEL (default 0) is the targets' opt-level. The test
# command's short runs are a regression check from the corpus: at
# opt-level 0 the cold build takes 2.4 CPU-minutes instead of 5.3 at 1,
# and each target runs fewer inputs a second (json_decoder ~550). Long
# campaigns optimise, and may add AddressSanitizer (WEIR_FUZZ_SANITIZER,
# default none: the fuzzed code has no unsafe of its own, so a panic, an
# overflow or an out-of-bounds index fails a run alike) for the unsafe code
# of dependencies:
#   WEIR_FUZZ_OPT_LEVEL=3 WEIR_FUZZ_SANITIZER=address bash scripts/fuzz.sh 3600
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(json_decoder wal_entry guest_output upload_form)
# The sanitizer and coverage flags are unstable; the machine's one
# toolchain is stable, whose compiler accepts them with RUSTC_BOOTSTRAP.
export RUSTC_BOOTSTRAP=1
triple=$(rustc -vV | sed -n 's/^host: //p')
flags=(
  -Cpasses=sancov-module
  -Cllvm-args=-sanitizer-coverage-level=4
  -Cllvm-args=-sanitizer-coverage-inline-8bit-counters
  -Cllvm-args=-sanitizer-coverage-pc-table
  -Cllvm-args=-sanitizer-coverage-trace-compares
  -Cllvm-args=-sanitizer-coverage-stack-depth
  -Cllvm-args=-simplifycfg-branch-fold-threshold=0
  --cfg fuzzing
  -Cdebug-assertions
  -Ccodegen-units=1
)
sanitizer=${WEIR_FUZZ_SANITIZER:-none}
[ "$sanitizer" = none ] || flags+=("-Zsanitizer=$sanitizer")
# --target: the flags then reach the targets, not the build scripts.
RUSTFLAGS="${flags[*]} ${RUSTFLAGS:-}" \
  CARGO_PROFILE_RELEASE_OPT_LEVEL="${WEIR_FUZZ_OPT_LEVEL:-0}" \
  cargo build --quiet --manifest-path tests/fuzz/Cargo.toml --release --target "$triple" \
  --config 'profile.release.debug="line-tables-only"' --bins
[ "${1:-}" = "--build-only" ] && exit 0
bin=tests/fuzz/target/$triple/release
seconds=${1:-${WEIR_FUZZ_SECONDS:-30}}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# fuzz TARGET: one target's run, its libFuzzer output in $scratch/TARGET.log.
fuzz() {
  local target=$1
  mkdir -p "$scratch/$target" "tests/fuzz/artifacts/$target"
  "$bin/$target" "$scratch/$target" "tests/fuzz/corpus/$target" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="tests/fuzz/artifacts/$target/" \
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
