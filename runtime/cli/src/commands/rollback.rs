//! `weir rollback`: back to the previously active version, or to one.

use super::TargetArgs;
use anyhow::Result;

/// The arguments of `weir rollback` (its help text is the command's).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    target: TargetArgs,
    /// The version to go back to.
    #[arg(long)]
    to: Option<u32>,
}

/// `weir rollback`.
pub fn run(args: Args) -> Result<()> {
    let v = args.target.target().rollback(args.to)?;
    println!(
        "rolled back: version {} is active from the next epoch",
        v.version.number
    );
    Ok(())
}
