//! The pipeline file's reference (`docs/config.md`), written from the code
//! that parses the file: every table is a Rust type deserialized with
//! serde, so its keys are the type's fields (as serde renames them), their
//! descriptions the fields' doc comments, their defaults the serde
//! defaults. The sources are read with `syn`, not compiled in, so the
//! reference follows the code without the runtime depending on this tool.
//!
//! Sources and sinks are found the way the engine finds them: every type
//! with an `impl SourceConnector` (or `SinkConnector`) and its `KIND`, so
//! a new connector is documented as soon as it is registered.

mod model;
mod render;

use anyhow::{Context, Result};
use std::path::Path;

/// Where the reference is kept, from the workspace root.
pub const CONFIG_MD: &str = "docs/config.md";

/// The crates whose sources hold the pipeline file's types.
const SOURCES: &[&str] = &[
    "runtime/core/src",
    "runtime/host/src",
    "runtime/connectors/src",
    "runtime/engine/src/config",
];

/// The reference, generated from the sources under `root` (the workspace).
pub fn config_reference(root: &Path) -> Result<String> {
    let mut items = model::Items::default();
    for dir in SOURCES {
        items
            .read_dir(&root.join(dir))
            .with_context(|| format!("reading {dir}"))?;
    }
    render::reference(&items)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed reference is the generated one: a doc comment or a
    /// default changed without `cargo run -p weir-docgen` fails here.
    #[test]
    fn docs_config_md_is_generated_from_the_code() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let generated = config_reference(&root).expect("the reference is generated");
        let committed = std::fs::read_to_string(root.join(CONFIG_MD)).unwrap_or_default();
        assert!(
            committed == generated,
            "{CONFIG_MD} is not what the code says; regenerate it with \
             `cargo run -p weir-docgen` and commit the result"
        );
    }
}
