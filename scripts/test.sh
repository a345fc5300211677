#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this script):
# installs what is missing, checks formatting and lints, runs every test —
# the service tests too (those marked `#[ignore = "needs …"]`, which a
# plain `cargo test` leaves out): here a missing service fails its test, it
# is never skipped.
#
# On a fresh machine most of the time is compiling, on two cores. So:
# - lints and tests come from one compile: clippy-driver compiles the
#   workspace's own crates for the test build (what `cargo clippy` runs,
#   with code generation), so no dependency is compiled twice;
# - what only the service tests need (tansu and s3s-fs, built from
#   crates.io; Chromium; delta-rs's reader; the Python and JavaScript
#   operator components) and the fuzz targets are installed and built in
#   the background at a low CPU priority, using what the workspace's
#   compile and then the tests leave idle. Each is waited for where it is
#   needed.
#
# Ends with one line of each phase's time (`[test.sh] phases: …`), also
# when a phase fails, for the closing notes' CI breakdown; a background
# job's log is in target/ci-logs/ and is printed if it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
# The workspace's crates without incremental compilation: a fresh clone has
# no incremental state to reuse, and saving it cost the cold build a third
# more CPU on those crates (and a gigabyte of target/). A later run after an
# edit recompiles the edited crates whole.
export CARGO_INCREMENTAL=0

started=$SECONDS
phases=()
logs=target/ci-logs
mkdir -p "$logs"
clock() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
# cpu_minutes: the CPU time (user + system) of the calling shell's finished
# children, in minutes, from the `times` builtin's second line.
cpu_minutes() {
    # Not `times | …`: a pipeline's subshell has no finished children.
    local file="$logs/.times-$BASHPID"
    times >"$file"
    sed -n 2p "$file" | awk '{
        total = 0
        for (i = 1; i <= 2; i++) { split($i, t, "m"); sub("s", "", t[2]); total += t[1] * 60 + t[2] }
        printf "%.1f", total / 60 }'
    rm -f "$file"
}
# phase NAME COMMAND...: runs COMMAND in the foreground, noting its time
# and the CPU it took (on two cores a phase's wall time hides how much of
# the machine it used).
phase() {
    local name=$1 from=$SECONDS
    shift
    (
        "$@"
        cpu_minutes >"$logs/$name.cpu"
    )
    phases+=("$name $(clock $((SECONDS - from))) ($(cat "$logs/$name.cpu") CPU-min)")
}
# background NAME NICENESS COMMAND...: starts COMMAND at a low CPU priority
# (niceness 15 gets ~3% of a core the foreground wants, 19 ~1.5%), its
# output in target/ci-logs/NAME.log, its time in NAME.time. Each job is its
# own process group (set -m), so that an early exit stops all of it.
set -m
declare -A background_pids=()
background() {
    local name=$1 niceness=$2
    shift 2
    rm -f "$logs/$name.time"
    (
        from=$SECONDS
        nice -n "$niceness" "$@" >"$logs/$name.log" 2>&1
        cpu_minutes >"$logs/$name.cpu"
        echo $((SECONDS - from)) >"$logs/$name.time"
    ) &
    background_pids[$name]=$!
}
# await NAME: waits for a background job; its failure fails the script.
await() {
    local name=$1 from=$SECONDS
    if ! wait "${background_pids[$name]}"; then
        tail -60 "$logs/$name.log"
        echo "[test.sh] $name failed (log: $logs/$name.log)"
        exit 1
    fi
    unset "background_pids[$name]"
    phases+=("$name $(clock "$(cat "$logs/$name.time")") ($(cat "$logs/$name.cpu") CPU-min) in the background (waited $(clock $((SECONDS - from))))")
}
report() {
    local IFS=,
    for pid in "${background_pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
    echo "[test.sh] phases: ${phases[*]:-none}; total $(clock $((SECONDS - started)))"
}
trap report EXIT

phase install bash scripts/install.sh
# Chromium, delta-rs's reader, tansu, s3s-fs and the Python and JavaScript
# operator components (each kept while its sources are unchanged).
background services 15 bash scripts/prepare-service-tests.sh
# The fuzz targets, needed last, get what is left after that.
background fuzz-build 19 bash scripts/fuzz.sh --build-only
phase fmt cargo fmt --all --check
# `cargo run --release -p weir-cli` and a release build of the workspace
# (or `cargo bench`) must compile each dependency alike, so that one serves
# the other (runtime/workspace-hack).
phase check-features bash scripts/check-features.sh

# `cargo clippy` is `cargo check` with clippy-driver as the workspace
# wrapper; here the wrapper compiles for the tests, and the lints are
# denied as `cargo clippy --workspace --all-targets -- -D warnings` would.
# Set as config, not environment, so that no `cargo` a test runs inherits it.
clippy_driver=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
wrapper="build.rustc-workspace-wrapper='$clippy_driver'"
selection=(--workspace --locked)
# The guest operators are built by runtime/cli/build.rs into target/guests
# (the test-only guests there too, the first time a test needs one).
# --timings: target/cargo-timings/cargo-timing.html shows which crates the
# cold build's minutes went to.
phase build+clippy cargo --config "$wrapper" test "${selection[@]}" --all-targets --no-run --timings
# cargo-nextest (on the machine's image; scripts/install.sh installs it
# where missing) runs every test binary's tests side by side, two at a time,
# each in its own process; rustdoc runs the doc tests, which nextest does
# not. First the tests a plain
# `cargo test` runs, while the services are still being prepared; under
# WEIR_TEST_HERMETIC a test that reaches for a service fails (it must be
# marked `#[ignore = "needs …"]`).
nextest=(cargo nextest run --config "$wrapper" "${selection[@]}" --no-fail-fast)
phase tests env WEIR_TEST_HERMETIC=1 "${nextest[@]}"
phase doctests env WEIR_TEST_HERMETIC=1 cargo --config "$wrapper" test "${selection[@]}" --doc
# The API docs, broken intra-doc links and HTML as errors. Off by default:
# `cargo doc` checks every dependency once more (rustdoc needs metadata of
# a `cargo check`, which the test build does not leave), measured at 17
# CPU-minutes (9 minutes on two cores) on a fresh machine, which would push
# the cold test run past its 30 minutes; WEIR_TEST_DOCS=1 turns it on (and
# a machine that has run it once pays ~15 s).
if [[ ${WEIR_TEST_DOCS:-0} == 1 ]]; then
    phase docs env RUSTDOCFLAGS="-D warnings" cargo doc --no-deps "${selection[@]}"
fi
# Then the ignored ones, every one of which needs a service: here a missing
# service fails. (cluster::group_member_process is not a test: it is the
# body of a child process that tests of its module start.) Four at a time
# on two cores: these mostly wait on their servers, timeouts and child
# processes (measured warm: 128 s instead of 177 s for two at a time, for
# 4% more CPU); .config/nextest.toml starts the slowest first.
await services
# Every fuzz target for a bounded time from the checked-in corpus, beside
# the service tests: they mostly wait, and the fuzzers (CPU-bound for a
# fixed time) take, at niceness 19, the CPU the tests leave. After them,
# the fuzzers added a minute to every run.
await fuzz-build
background fuzz 19 bash scripts/fuzz.sh "${WEIR_FUZZ_SECONDS:-30}"
phase service-tests "${nextest[@]}" --test-threads 4 --run-ignored only -E 'not test(=cluster::group_member_process)'
await fuzz
