//! The guest components tests run. The two bundled operators are built by
//! the `weir-cli` build script; the test-only guests (hostile and broken
//! operators) are built here, once per test run, by the same nested cargo
//! into the same directory, so `cargo build` never pays for them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Guests only the tests and benches use.
const TEST_GUESTS: &[&str] = &[
    "sandbox-tests",
    "sandbox-escape",
    "wrong-world",
    "fraud-windows-by-hand",
    "window-kinds",
    "card-home",
    "types-check",
    "basic-types-only",
    "decimal-sum",
    "amount-rule",
    "passthrough",
];

/// The directory the bundled guests were built into.
pub fn guest_dir() -> &'static Path {
    Path::new(weir_cli::GUEST_DIR)
}

/// The component `name` (e.g. `fraud_rules`, `sandbox_tests`), built first
/// if it is a test-only guest.
pub fn guest(name: &str) -> PathBuf {
    if TEST_GUESTS.iter().any(|g| g.replace('-', "_") == name) {
        build_test_guests();
    }
    guest_dir().join(format!("{name}.wasm"))
}

fn build_test_guests() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        // GUEST_DIR is <target>/guests/wasm32-wasip2/guest.
        let target = guest_dir().ancestors().nth(2).expect("guest target dir");
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(&root)
            .args([
                "build",
                "--quiet",
                "--target",
                "wasm32-wasip2",
                "--profile",
                "guest",
            ])
            .arg("--target-dir")
            .arg(target);
        for g in TEST_GUESTS {
            cmd.args(["-p", g]);
        }
        for var in [
            "RUSTFLAGS",
            "CARGO_ENCODED_RUSTFLAGS",
            "RUSTC_WRAPPER",
            "RUSTC_WORKSPACE_WRAPPER",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_TARGET",
        ] {
            cmd.env_remove(var);
        }
        let status = cmd.status().expect("running cargo for the test guests");
        assert!(status.success(), "building the test guests failed");
    });
}
