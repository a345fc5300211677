//! `weir audit`: the audit trail of a running pipeline.

use super::TargetArgs;
use anyhow::Result;

/// The arguments of `weir audit` (its help text is the command's).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    target: TargetArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `weir audit`.
pub fn run(args: Args) -> Result<()> {
    crate::security::print_audit(&args.target.target().history()?, args.json)
}
