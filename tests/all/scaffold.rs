//! `weir operator new` makes projects that build and pass their own test
//! (`test.sh`: build, then `weir operator test` against the expected
//! output) in Rust, Python and JavaScript. The Python and JavaScript
//! toolchains are the pinned ones `scripts/install-polyglot.sh` installs.

use std::path::{Path, PathBuf};
use std::process::Command;

fn target() -> PathBuf {
    Path::new(weir_cli::GUEST_DIR).join("../../..")
}

fn tool(rel: &str) -> PathBuf {
    weir_test_support::needs("componentize-py/js");
    let path = target().join("tools").join(rel);
    assert!(
        path.exists(),
        "{} is missing: run `bash scripts/install-polyglot.sh` (scripts/test.sh does)",
        path.display()
    );
    path
}

/// `PATH` without any directory holding a componentize-py or -js.
fn path_without_toolchains() -> std::ffi::OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let kept = std::env::split_paths(&path).filter(|dir| {
        !dir.join("componentize-py").exists() && !dir.join("componentize-js").exists()
    });
    std::env::join_paths(kept).unwrap()
}

/// Runs the project's test.sh; returns (success, output). No `WEIR`, no
/// `COMPONENTIZE_PY` / `COMPONENTIZE_JS` and none of them on PATH, as in a
/// fresh shell after the README's first command: the project must find the
/// weir that created it and the pinned toolchains `scripts/install.sh`
/// installed.
fn test_sh(project: &Path) -> (bool, String) {
    tool("py/bin/componentize-py");
    tool("js/node_modules/.bin/componentize-js");
    let out = Command::new("bash")
        .arg(project.join("test.sh"))
        .env_remove("WEIR")
        .env_remove("COMPONENTIZE_PY")
        .env_remove("COMPONENTIZE_JS")
        .env("PATH", path_without_toolchains())
        // Shared with other runs, so dependencies are built once.
        .env("CARGO_TARGET_DIR", target().join("scaffold"))
        .env("WEIR_CACHE_DIR", crate::polyglot::polyglot_cache())
        .env("WEIR_LOG", "warn")
        .output()
        .unwrap();
    (out.status.success(), crate::common::output_text(&out))
}

/// The project's build.sh, run again, writes the same component bytes.
fn assert_a_second_build_is_the_same(project: &Path, name: &str) {
    let component = project.join(format!("{name}.wasm"));
    let first = std::fs::read(&component).unwrap();
    let out = Command::new("bash")
        .arg(project.join("build.sh"))
        .env_remove("COMPONENTIZE_PY")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::common::output_text(&out));
    assert!(
        std::fs::read(&component).unwrap() == first,
        "a second build of the {name} scaffold gave other bytes"
    );
}

#[test]
#[ignore = "needs componentize-py/js"]
fn scaffolds_in_every_language_build_and_pass_their_own_test() {
    let dir = tempfile::tempdir().unwrap();
    for lang in ["rust", "python", "js"] {
        let name = format!("big-{lang}");
        let project = dir.path().join(&name);
        let out = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["operator", "new", "--lang", lang, &name, "--dir"])
            .arg(&project)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let helpers: &[&str] = match lang {
            "python" => &[
                "weir_window.py",
                "weir_lookup.py",
                "weir_columns.py",
                "weir_artifacts.py",
                "weir_outputs.py",
            ],
            "js" => &[
                "weir_window.js",
                "weir_lookup.js",
                "weir_columns.js",
                "weir_artifacts.js",
                "weir_outputs.js",
            ],
            _ => &[],
        };
        for helper in helpers {
            assert!(
                project.join(helper).exists(),
                "{lang} scaffold lacks {helper}"
            );
        }
        let (ok, text) = test_sh(&project);
        assert!(ok, "{lang} scaffold failed its test:\n{text}");
        assert!(text.contains("output as expected"), "{text}");
        if lang == "python" {
            assert_a_second_build_is_the_same(&project, &name);
        }
        assert!(
            project.join("build.log").exists() && !text.contains("Compiling"),
            "the build's output goes to build.log: {text}"
        );
        // The check can fail: the built component against a wrong expectation
        // (run directly: the compiled component is in the cache by now).
        std::fs::write(
            project.join("wrong.jsonl"),
            "{\"txn_id\":\"t-2\",\"amount\":1.0}\n",
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_weir"))
            .current_dir(&project)
            .args([
                "operator",
                "test",
                &format!("{name}.wasm"),
                "--input",
                "sample.jsonl",
            ])
            .args(["--config", "config.json", "--expect", "wrong.jsonl"])
            .env("WEIR_CACHE_DIR", crate::polyglot::polyglot_cache())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && text.contains("differs at row 1"),
            "{lang}: {text}"
        );
    }
}
