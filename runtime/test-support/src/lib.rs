//! Helpers shared by Weir's integration tests (`tests/all`) and benchmarks
//! (`runtime/cli/benches`), so that both start the same real services the
//! same way: a Kafka-protocol broker ([`broker`]), PostgreSQL ([`pg`]), an
//! S3-compatible server ([`s3`]) and headless Chromium ([`browser`]), each
//! on 127.0.0.1 and stopped when dropped; `weir run --worker` processes
//! ([`worker`]); and the guest components ([`guests`]).
//!
//! A test that needs a service or a toolchain the repo's scripts install is
//! marked `#[ignore = "needs …"]`, so that a plain `cargo test` passes with
//! nothing installed; `scripts/test.sh` runs those too, and there a helper
//! whose service is missing fails its test, naming the script that
//! installs it. Each such helper calls [`needs`] first.

use std::path::{Path, PathBuf};

/// What `scripts/test.sh` sets while it runs the tests that are not
/// ignored, before the services are ready.
pub const HERMETIC_ENV: &str = "WEIR_TEST_HERMETIC";

/// Called by every helper that uses something the repo's scripts install
/// (`what`: "tansu", "PostgreSQL", …). In a run under [`HERMETIC_ENV`] it
/// fails the test: a test reaching it must be marked
/// `#[ignore = "needs <what>"]`, or a plain `cargo test` would fail on a
/// machine without it (or pass only where it happens to be installed).
pub fn needs(what: &str) {
    if std::env::var_os(HERMETIC_ENV).is_some() {
        panic!(
            "this test needs {what}, which a plain `cargo test` does not have: \
             mark it #[ignore = \"needs {what}\"] (scripts/test.sh runs the ignored \
             tests once the services are ready)"
        );
    }
}

/// Runs `tools/<tool>/write.py` with `args` under the Python of the tool's
/// venv (`target/tools/<tool>`, which `install` installs); its stdout. A
/// missing venv or a failed run fails the test with what to run or what
/// the tool said.
pub(crate) fn run_writer(tool: &str, install: &str, args: &[String]) -> Vec<u8> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join(format!("target/tools/{tool}/bin/python"));
    assert!(
        python.exists(),
        "{} is missing: run {install}",
        python.display()
    );
    let script = format!("tools/{tool}/write.py");
    let out = std::process::Command::new(python)
        .arg(root.join(&script))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {script}: {e}"));
    assert!(
        out.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

pub mod avro;
pub mod broker;
pub mod browser;
pub mod guests;
pub mod pg;
pub mod protobuf;
pub mod registry;
pub mod s3;
pub mod tls;
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
