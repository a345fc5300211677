//! `weir activate`: a registered version runs from the next epoch.

use super::TargetArgs;
use anyhow::Result;

/// The arguments of `weir activate` (its help text is the command's).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    target: TargetArgs,
    /// Version number (see `weir versions`).
    #[arg(value_name = "VERSION")]
    number: u32,
}

/// `weir activate`.
pub fn run(args: Args) -> Result<()> {
    args.target.target().activate(args.number)?;
    println!("version {} is active from the next epoch", args.number);
    Ok(())
}
