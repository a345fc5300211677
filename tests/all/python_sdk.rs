//! The Python SDK (`sdk/python/weir`), through `weir operator test` as a
//! user runs it: an exception says its type, message and line, once;
//! `print()` lands in the host log, tagged. The operator is
//! `operators/sdk-checks-py`, built by `scripts/build-polyglot.sh`.

use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCE: &str = include_str!("../../operators/sdk-checks-py/sdk_checks.py");

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
    std::fs::write(&input, weir_cli::demo::generator::json_lines(1, 0, 3)).unwrap();
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
