//! `weir versions`: the operator versions of a running pipeline.

use super::{utc_seconds, TargetArgs};
use anyhow::Result;
use weir_engine::versions::registry::Origin;
use weir_engine::versions::Listed;

/// The arguments of `weir versions` (its help text is the command's).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    target: TargetArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `weir versions`.
pub fn run(args: Args) -> Result<()> {
    print_versions(&args.target.target().versions()?, args.json)
}

/// The versions as a table, or JSON.
fn print_versions(list: &[Listed], json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(list)?);
        return Ok(());
    }
    println!(
        "{:>7}  {:<8}  {:<19}  {:<19}  {:>9}  {:<24}  label",
        "version", "state", "component", "config", "size", "registered (UTC)"
    );
    for listed in list {
        let v = &listed.version;
        let state = if listed.active {
            "ACTIVE"
        } else if listed.shadow {
            "shadow"
        } else {
            ""
        };
        let when = utc_seconds(v.registered_ms);
        let origin = match &v.origin {
            Origin::File { path } => format!("file {}", path.display()),
            Origin::Watch { .. } => "watch".to_string(),
            Origin::Upload { .. } => "upload".to_string(),
        };
        println!(
            "{:>7}  {:<8}  {:<19}  {:<19}  {:>9}  {:<24}  {} ({origin})",
            v.number,
            state,
            v.digest.short(),
            v.config_digest.short(),
            v.size,
            when,
            v.label.as_deref().unwrap_or("")
        );
    }
    Ok(())
}
