//! The one way Weir's guest operators are built. The bundled operators
//! (built by `weir-cli`'s build script, so that `cargo build` alone gives a
//! working `weir demo`) and the guests only tests and benches run (built
//! the first time a test needs one) go through the same nested cargo, into
//! the same directory: `wasm32-wasip2`, the workspace's `guest` profile, a
//! target directory of their own so the outer build's lock is not needed.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Variables of the outer build that must not reach the guest build: its
/// flags and wrappers (clippy, coverage) and its target.
const OUTER_BUILD: &[&str] = &[
    "CARGO_ENCODED_RUSTFLAGS",
    "RUSTFLAGS",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
];

/// Where the guests of the workspace at `root` are built when the outer
/// build's target directory is `target` (`<target>/guests`).
pub fn target_dir(target: &Path) -> PathBuf {
    target.join("guests")
}

/// Where the components of a guest build in `target_dir` land.
pub fn component_dir(target_dir: &Path) -> PathBuf {
    target_dir.join("wasm32-wasip2").join("guest")
}

/// Builds the guest crates `packages` of the workspace at `root` into
/// `target_dir`; returns the directory holding their `.wasm` components.
/// `quiet` keeps cargo's progress off the terminal.
pub fn build(
    root: &Path,
    target_dir: &Path,
    packages: &[&str],
    quiet: bool,
) -> Result<PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .args(["build", "--target", "wasm32-wasip2", "--profile", "guest"])
        .arg("--target-dir")
        .arg(target_dir);
    if quiet {
        cmd.arg("--quiet");
    }
    for package in packages {
        cmd.args(["-p", package]);
    }
    for var in OUTER_BUILD {
        cmd.env_remove(var);
    }
    let output = cmd
        .output()
        .map_err(|e| format!("running cargo for the guest operators: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "building the guest operators failed; is the target installed? run `rustup \
             target add wasm32-wasip2` (scripts/install.sh does)\n{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let dir = component_dir(target_dir);
    for package in packages {
        let file = dir.join(format!("{}.wasm", package.replace('-', "_")));
        if !file.exists() {
            return Err(format!(
                "the guest build did not produce {}",
                file.display()
            ));
        }
    }
    Ok(dir)
}
