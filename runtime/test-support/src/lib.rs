//! Helpers shared by Weir's integration tests (`tests/all`) and benchmarks
//! (`runtime/cli/benches`), so that both start the same real services the
//! same way: a Kafka-protocol broker ([`broker`]), PostgreSQL ([`pg`]), an
//! S3-compatible server ([`s3`]) and headless Chromium ([`browser`]), each
//! on 127.0.0.1 and stopped when dropped; `weir run --worker` processes
//! ([`worker`]); and the guest components ([`guests`]).
//!
//! A helper whose service is not installed panics naming the script that
//! installs it: the tests that need one run only with the `service-tests`
//! feature of `weir-cli`, which `scripts/test.sh` turns on.

use std::path::PathBuf;

pub mod broker;
pub mod browser;
pub mod guests;
pub mod pg;
pub mod s3;
pub mod worker;

/// The `weir` binary cargo built beside the running test or benchmark
/// (`<target>/<profile>/weir`; the test's own executable is in
/// `<target>/<profile>/deps`). `CARGO_BIN_EXE_weir` names the same file but
/// is set only while compiling `weir-cli`'s own tests and benches.
pub fn weir_exe() -> PathBuf {
    let exe = std::env::current_exe().expect("the running test's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("a test executable sits in <target>/<profile>/deps");
    let weir = profile_dir.join("weir");
    assert!(
        weir.exists(),
        "{} not found: it is built with weir-cli's tests and benches",
        weir.display()
    );
    weir
}
