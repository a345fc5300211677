//! `weir promote`: the shadow version becomes the active one.

use super::TargetArgs;
use anyhow::Result;

/// The arguments of `weir promote` (its help text is the command's).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    target: TargetArgs,
}

/// `weir promote`.
pub fn run(args: Args) -> Result<()> {
    let v = args.target.target().promote()?;
    println!(
        "promoted: version {} is active from the next epoch",
        v.version.number
    );
    Ok(())
}
