//! `weir unshadow`: stops the shadow run.

use super::TargetArgs;
use anyhow::Result;

/// The arguments of `weir unshadow` (its help text is the command's).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    target: TargetArgs,
}

/// `weir unshadow`.
pub fn run(args: Args) -> Result<()> {
    args.target.target().unshadow()?;
    println!("shadow run stopped");
    Ok(())
}
