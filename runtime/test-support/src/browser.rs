//! Headless Chromium for the tests that check what the dashboard shows.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Debian's Chromium (installed by `scripts/install-chromium.sh`).
pub fn chromium() -> PathBuf {
    crate::needs("Chromium");
    let path = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        path.exists(),
        "{} not found: run `bash scripts/install-chromium.sh` (or set CHROMIUM)",
        path.display()
    );
    path
}

/// Loads `url` in headless Chromium, lets its scripts run for a few
/// seconds of virtual time, and returns the DOM (or, with `screenshot`,
/// also writes a PNG of the page).
pub fn render(url: &str, screenshot: Option<&Path>) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(chromium());
    // As the machine's probe does: no sandbox (CI runs as root), and none of
    // the background connections a closed network refuses.
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--window-size=1280,1000",
        "--virtual-time-budget=4000",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()));
    match screenshot {
        Some(png) => cmd.arg(format!("--screenshot={}", png.display())),
        None => cmd.arg("--dump-dom"),
    };
    let out = cmd.arg(url).output().unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
