//! `cargo run -p weir-docgen`: writes `docs/config.md` from the code
//! (`--check` only says whether the committed file is current).

use anyhow::{bail, Context, Result};
use std::path::Path;
use weir_docgen::{config_reference, CONFIG_MD};

fn main() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let generated = config_reference(&root)?;
    let path = root.join(CONFIG_MD);
    let check = std::env::args().skip(1).any(|a| a == "--check");
    if check {
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if committed != generated {
            bail!("{CONFIG_MD} is stale; run `cargo run -p weir-docgen`");
        }
        println!("{CONFIG_MD} is current");
        return Ok(());
    }
    std::fs::write(&path, generated).with_context(|| format!("writing {}", path.display()))?;
    println!("wrote {CONFIG_MD}");
    Ok(())
}
