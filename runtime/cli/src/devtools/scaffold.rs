//! `weir operator new --lang rust|python|js NAME`: a buildable operator
//! project with a sample, its expected output and a `test.sh` that builds
//! the component and runs it through the Weir host (`weir operator test`).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The languages a scaffold can be made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

const WIT: &str = include_str!("../../../../wit/operator.wit");

/// (path in the project, template)
fn files(lang: Lang) -> Vec<(&'static str, &'static str)> {
    let mut files = vec![
        (
            "sample.jsonl",
            include_str!("templates/common/sample.jsonl"),
        ),
        (
            "expected.jsonl",
            include_str!("templates/common/expected.jsonl"),
        ),
        ("config.json", include_str!("templates/common/config.json")),
        ("test.sh", include_str!("templates/common/test.sh")),
        ("README.md", include_str!("templates/common/README.md")),
        // Build output (target/, the .wasm, build.log) stays out of version control.
        (".gitignore", include_str!("templates/common/gitignore")),
    ];
    files.extend(match lang {
        Lang::Rust => vec![
            ("Cargo.toml", include_str!("templates/rust/Cargo.toml")),
            ("src/lib.rs", include_str!("templates/rust/lib.rs")),
            ("build.sh", include_str!("templates/rust/build.sh")),
        ],
        Lang::Python => vec![
            ("app.py", include_str!("templates/python/app.py")),
            ("build.sh", include_str!("templates/python/build.sh")),
            ("wit/operator.wit", WIT),
            // The Python SDK (the `weir` package), importable from app.py.
            (
                "weir/__init__.py",
                include_str!("../../../../sdk/python/weir/__init__.py"),
            ),
            (
                "weir/columns.py",
                include_str!("../../../../sdk/python/weir/columns.py"),
            ),
            (
                "weir/log.py",
                include_str!("../../../../sdk/python/weir/log.py"),
            ),
            (
                "weir/operator.py",
                include_str!("../../../../sdk/python/weir/operator.py"),
            ),
            (
                "weir/output.py",
                include_str!("../../../../sdk/python/weir/output.py"),
            ),
            (
                "weir/state.py",
                include_str!("../../../../sdk/python/weir/state.py"),
            ),
            (
                "weir/values.py",
                include_str!("../../../../sdk/python/weir/values.py"),
            ),
            // The helper modules beside the package: windows, lookups
            // (which need the column helpers), artifacts, named outputs.
            (
                "weir_window.py",
                include_str!("../../../../sdk/python/weir_window.py"),
            ),
            (
                "weir_columns.py",
                include_str!("../../../../sdk/python/weir_columns.py"),
            ),
            (
                "weir_lookup.py",
                include_str!("../../../../sdk/python/weir_lookup.py"),
            ),
            (
                "weir_artifacts.py",
                include_str!("../../../../sdk/python/weir_artifacts.py"),
            ),
            (
                "weir_outputs.py",
                include_str!("../../../../sdk/python/weir_outputs.py"),
            ),
        ],
        Lang::Js => vec![
            ("app.js", include_str!("templates/js/app.js")),
            ("build.sh", include_str!("templates/js/build.sh")),
            ("wit/operator.wit", WIT),
            // The JavaScript SDK's modules, importable from app.js.
            (
                "weir_columns.js",
                include_str!("../../../../sdk/js/weir_columns.js"),
            ),
            (
                "weir_types.js",
                include_str!("../../../../sdk/js/weir_types.js"),
            ),
            (
                "weir_window.js",
                include_str!("../../../../sdk/js/weir_window.js"),
            ),
            (
                "weir_lookup.js",
                include_str!("../../../../sdk/js/weir_lookup.js"),
            ),
            (
                "weir_artifacts.js",
                include_str!("../../../../sdk/js/weir_artifacts.js"),
            ),
            (
                "weir_outputs.js",
                include_str!("../../../../sdk/js/weir_outputs.js"),
            ),
        ],
    });
    files
}

/// A pinned polyglot tool of the repository this `weir` was built from
/// (`REL` from its root: `scripts/componentize-py`, the reproducible
/// wrapper, or what `scripts/install-polyglot.sh` put under `target/tools`),
/// so a project's build.sh needs no environment variable; else the tool's
/// name, for a copy on PATH.
fn pinned_tool(rel: &str) -> String {
    let installed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    match installed.canonicalize() {
        Ok(path) => path.display().to_string(),
        Err(_) => Path::new(rel)
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
    }
}

/// The SDK this `weir` was built with, for Rust scaffolds.
pub fn default_sdk() -> Option<PathBuf> {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../sdk")
        .canonicalize()
        .ok()
}

/// Writes the project `name` for `lang` into `dir` (which must not exist or
/// be empty). `sdk` is the `weir-sdk` directory a Rust project depends on.
/// Returns the files written.
pub fn scaffold(dir: &Path, name: &str, lang: Lang, sdk: Option<&Path>) -> Result<Vec<PathBuf>> {
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !valid {
        bail!("`{name}` is not a valid operator name: use lowercase letters, digits, - and _, starting with a letter");
    }
    if dir.exists()
        && std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .next()
            .is_some()
    {
        bail!("{} exists and is not empty", dir.display());
    }
    let sdk = match (lang, sdk) {
        (Lang::Rust, Some(p)) => p
            .canonicalize()
            .with_context(|| format!("--sdk {}", p.display()))?,
        (Lang::Rust, None) => default_sdk().context(
            "cannot find weir-sdk next to this weir build; pass --sdk PATH (the sdk/ directory \
             of the Weir repository)",
        )?,
        _ => PathBuf::new(),
    };
    let lang_name = match lang {
        Lang::Rust => "Rust",
        Lang::Python => "Python, componentize-py",
        Lang::Js => "JavaScript, componentize-js",
    };
    // `test.sh` runs the weir that made the project: the README builds it
    // with `cargo run`, so it is not on PATH.
    let weir = std::env::current_exe()
        .ok()
        .and_then(|p| p.canonicalize().ok())
        .map_or_else(|| "weir".to_string(), |p| p.display().to_string());
    let mut written = Vec::new();
    for (rel, template) in files(lang) {
        let text = template
            .replace("{{weir}}", &weir)
            .replace(
                "{{componentize_py}}",
                &pinned_tool("scripts/componentize-py"),
            )
            .replace(
                "{{componentize_js}}",
                &pinned_tool("target/tools/js/node_modules/.bin/componentize-js"),
            )
            .replace("{{name}}", name)
            .replace("{{crate}}", &name.replace('-', "_"))
            .replace("{{lang}}", lang_name)
            .replace("{{sdk}}", &sdk.display().to_string());
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_non_empty_directories_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = scaffold(&dir.path().join("x"), "Bad Name", Lang::Js, None).unwrap_err();
        assert!(format!("{err}").contains("not a valid operator name"));
        let files = scaffold(&dir.path().join("ok"), "big-spender", Lang::Python, None).unwrap();
        assert!(files.iter().any(|f| f.ends_with("wit/operator.wit")));
        let test = std::fs::read_to_string(dir.path().join("ok/test.sh")).unwrap();
        assert!(test.contains("big-spender.wasm"), "{test}");
        assert!(!test.contains("{{"), "every placeholder filled: {test}");
        assert!(dir.path().join("ok/.gitignore").exists());
        let err = scaffold(&dir.path().join("ok"), "again", Lang::Js, None).unwrap_err();
        assert!(format!("{err}").contains("not empty"));
    }
}
