//! The guest components tests run. The bundled operators are built by the
//! `weir-cli` build script; the guests only tests and benches run
//! (`tests/guests`, the benches' baselines) are built here, once per test
//! run, the same way ([`weir_guest_build`]) into the same directory, so
//! `cargo build` never pays for them.

use std::path::{Path, PathBuf};
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
        if let Err(e) = weir_guest_build::build(&root, target, TEST_GUESTS, true) {
            panic!("{e}");
        }
    });
}
