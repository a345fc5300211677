//! Builds the bundled Wasm operators (the demo's `fraud-rules`,
//! `fraud-velocity`, `fraud-windows` and `fraud-model`) so that `cargo
//! build` alone yields a working `weir demo`. (The tests build their own
//! guests when they first need them.) The guests are built by a nested cargo
//! into their own target directory (`target/guests`), which avoids the outer
//! build's lock.

use std::env;
use std::path::PathBuf;
use std::process::Command;

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
        .unwrap_or_else(|| root.join("target"))
        .join("guests");

    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args(["build", "--target", "wasm32-wasip2", "--profile", "guest"])
        .arg("--target-dir")
        .arg(&target);
    for guest in GUESTS {
        cmd.args(["-p", guest]);
    }
    // Do not leak the outer build's flags or wrappers (clippy, coverage) into
    // the guest build.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(var);
    }
    let output = cmd.output().expect("running cargo for the guest operators");
    if !output.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&output.stderr));
        panic!(
            "building the Wasm operators failed; is the target installed? \
             run `rustup target add wasm32-wasip2` (scripts/install.sh does)"
        );
    }
    let dir = target.join("wasm32-wasip2").join("guest");
    for guest in GUESTS {
        let file = dir.join(format!("{}.wasm", guest.replace('-', "_")));
        assert!(
            file.exists(),
            "guest build did not produce {}",
            file.display()
        );
    }
    println!("cargo:rustc-env=WEIR_GUEST_DIR={}", dir.display());
}
