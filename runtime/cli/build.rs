//! Builds the bundled Wasm operators (the demo's `fraud-rules`,
//! `fraud-velocity`, `fraud-windows` and `fraud-model`) so that `cargo
//! build` alone yields a working `weir demo`. (The tests build their own
//! guests when they first need them.) The guests are built by a nested cargo
//! into their own target directory (`target/guests`), which avoids the outer
//! build's lock ([`weir_guest_build`], which the tests use too).

use std::env;
use std::path::PathBuf;

const GUESTS: &[&str] = &[
    "fraud-rules",
    "fraud-velocity",
    "fraud-windows",
    "fraud-model",
];

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest
        .ancestors()
        .nth(2)
        .expect("runtime/cli sits two levels below the workspace root")
        .to_path_buf();
    // Cargo.toml: the `guest` profile and the workspace's dependencies.
    for watched in ["sdk", "wit", "operators", "Cargo.lock", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");
    let target = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_absolute() { t } else { root.join(t) })
        .unwrap_or_else(|| root.join("target"));
    let target = weir_guest_build::target_dir(&target);

    let dir =
        weir_guest_build::build(&root, &target, GUESTS, false).unwrap_or_else(|e| panic!("{e}"));
    println!("cargo:rustc-env=WEIR_GUEST_DIR={}", dir.display());
}
