//! The Python SDK (`sdk/python/weir`), through `weir operator test` as a
//! user runs it: an exception says its type, message and line, once;
//! `print()` lands in the host log, tagged; and Python builds are
//! reproducible (`scripts/componentize-py`). The operator is
//! `tests/guests/sdk-checks-py`, built by `scripts/build-polyglot.sh`.

use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCE: &str = include_str!("../../tests/guests/sdk-checks-py/sdk_checks.py");

/// The line of `sdk_checks.py` marked `# raises: {what}`.
fn line_of(what: &str) -> usize {
    let marker = format!("# raises: {what}");
    SOURCE
        .lines()
        .position(|l| l.contains(&marker))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("no `{marker}` in sdk_checks.py"))
}

/// `weir operator test` of sdk-checks with `config`, over three payments:
/// (success, stdout and stderr together).
fn operator_test(dir: &Path, config: &str) -> (bool, String) {
    let input = dir.join("in.jsonl");
    std::fs::write(
        &input,
        weir_connectors::generator::payments::json_lines(1, 0, 3),
    )
    .unwrap();
    let config_file = dir.join("config.json");
    std::fs::write(&config_file, config).unwrap();
    let component: PathBuf = crate::polyglot::polyglot("sdk_checks_py.wasm");
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["operator", "test"])
        .arg(&component)
        .arg("--input")
        .arg(&input)
        .arg("--config")
        .arg(&config_file)
        .env("WEIR_LOG", "info")
        .env("WEIR_CACHE_DIR", crate::polyglot::polyglot_cache())
        .output()
        .unwrap();
    (out.status.success(), crate::common::output_text(&out))
}

#[test]
#[ignore = "needs componentize-py/js"]
fn a_python_exception_is_reported_with_its_type_message_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "init",
            format!(
                "KeyError: 'no such setting' (at sdk_checks.py:{} in __init__)",
                line_of("init")
            ),
        ),
        (
            "process",
            format!(
                "ZeroDivisionError: division by zero (at sdk_checks.py:{} in process)",
                line_of("process")
            ),
        ),
        // Raised inside the standard library: where, and the operator's
        // line that called it.
        (
            "library",
            format!("from sdk_checks.py:{} in process)", line_of("library")),
        ),
    ];
    for (fail, expected) in cases {
        let (ok, text) = operator_test(dir.path(), &format!(r#"{{"fail": "{fail}"}}"#));
        assert!(!ok, "{fail}: the test should fail\n{text}");
        assert_eq!(
            text.matches(&expected).count(),
            1,
            "{fail}: {expected}\n{text}"
        );
        assert!(
            !text.contains("Traceback") && !text.contains("wasm backtrace"),
            "{text}"
        );
        assert!(!text.contains("golden"), "no golden file was given: {text}");
    }
    let (_, text) = operator_test(dir.path(), r#"{"fail": "library"}"#);
    assert!(
        text.contains("JSONDecodeError: Expecting property name"),
        "{text}"
    );
}

#[test]
#[ignore = "needs componentize-py/js"]
fn print_in_a_python_operator_goes_to_the_host_log() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, text) = operator_test(dir.path(), r#"{"print": true}"#);
    assert!(ok, "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("hello from Python: epoch 0, 3 rows, first t-"))
        .unwrap_or_else(|| panic!("print() is not in the log:\n{text}"));
    assert!(
        line.contains("INFO") && line.contains("epoch=0") && line.contains("operator=sha256:"),
        "{line}"
    );
    assert!(text.contains("3 rows in, 3 rows out"), "{text}");
}

/// `scripts/componentize-py` (the reproducible build) of module `module`
/// in `src` into `out`, as `scripts/build-polyglot.sh` builds it.
fn componentize(src: &Path, module: &str, out: &Path) -> std::process::Output {
    weir_test_support::needs("componentize-py/js");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    Command::new(root.join("scripts/componentize-py"))
        .current_dir(&root)
        .args([
            "-d",
            "wit",
            "-w",
            "operator",
            "componentize",
            "--stub-wasi",
            "-p",
        ])
        .arg(src)
        .arg(module)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap()
}

/// Copies every `*.py` of `from` into `to`.
fn copy_python(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "py") {
            std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
}

/// sdk-checks built again, now, from a fresh copy in another directory
/// (other file times, inodes, paths), gives the bytes, so the digest, of
/// the build `scripts/build-polyglot.sh` made earlier.
#[test]
#[ignore = "needs componentize-py/js"]
fn two_builds_of_the_same_python_source_have_the_same_digest() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("a copy");
    copy_python(&root.join("tests/guests/sdk-checks-py"), &src);
    copy_python(&root.join("sdk/python"), &src);
    copy_python(&root.join("sdk/python/weir"), &src.join("weir"));
    let out = dir.path().join("again.wasm");
    let run = componentize(&src, "sdk_checks", &out);
    assert!(run.status.success(), "{}", crate::common::output_text(&run));
    let digest = |path: &Path| weir_core::Digest::of(&std::fs::read(path).unwrap());
    assert_eq!(
        digest(&out),
        digest(&crate::polyglot::polyglot("sdk_checks_py.wasm")),
        "two builds of tests/guests/sdk-checks-py differ"
    );
}

/// An error raised while the operator's modules are imported for the
/// build (after `import weir`, which sends stderr to the host log, a stub
/// at build time) shows as itself: here a missing module, by name.
#[test]
#[ignore = "needs componentize-py/js"]
fn an_import_error_at_build_time_shows_as_itself() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    copy_python(&root.join("sdk/python"), &src);
    copy_python(&root.join("sdk/python/weir"), &src.join("weir"));
    let body =
        std::fs::read_to_string(root.join("tests/guests/sdk-checks-py/sdk_checks.py")).unwrap();
    std::fs::write(
        src.join("sdk_checks.py"),
        format!("import weir\nimport fraud_rules_that_are_not_there\n{body}"),
    )
    .unwrap();
    let run = componentize(&src, "sdk_checks", &dir.path().join("broken.wasm"));
    let text = crate::common::output_text(&run);
    assert!(!run.status.success(), "{text}");
    assert!(
        text.contains("No module named 'fraud_rules_that_are_not_there'"),
        "{text}"
    );
    assert!(!text.contains("called trapping stub"), "{text}");
}

/// The reproducible build compiles its preload into the user's cache when
/// the checkout has none (`scripts/install-polyglot.sh` builds one there),
/// never into the checkout, which may not be the user's to write.
#[test]
#[ignore = "needs componentize-py/js"]
fn the_reproducible_build_writes_nothing_into_the_checkout() {
    weir_test_support::needs("componentize-py/js");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    let checkout = dir.path().join("checkout");
    let reproducible = checkout.join("scripts/reproducible");
    std::fs::create_dir_all(&reproducible).unwrap();
    for file in [
        "scripts/componentize-py",
        "scripts/reproducible/fixed_world.c",
    ] {
        std::fs::copy(root.join(file), checkout.join(file)).unwrap();
    }
    let tools = checkout.join("target/tools");
    std::fs::create_dir_all(&tools).unwrap();
    std::os::unix::fs::symlink(root.join("target/tools/py"), tools.join("py")).unwrap();
    let cache = dir.path().join("cache");
    let run = Command::new("bash")
        .arg(checkout.join("scripts/componentize-py"))
        .arg("--version")
        .env("XDG_CACHE_HOME", &cache)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", crate::common::output_text(&run));
    let written: Vec<_> = std::fs::read_dir(&tools)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        written,
        vec![std::ffi::OsString::from("py")],
        "the checkout was written"
    );
    let cached = std::fs::read_dir(cache.join("weir")).unwrap().count();
    assert_eq!(cached, 1, "the preload is built in the cache");
}
