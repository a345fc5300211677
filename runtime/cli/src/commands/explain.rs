//! `weir explain`.

use anyhow::Result;
use std::path::PathBuf;
use weir_host::{default_cache_root, WasmHost};

/// The arguments of `weir explain` (its help text is the command's).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The pipeline file.
    #[arg(short = 'p', long = "pipeline", value_name = "PIPELINE.toml")]
    pipeline: PathBuf,
    /// The (committed) epoch that made the decision.
    #[arg(long)]
    epoch: u64,
    /// The value of --column that names the row, e.g. a txn_id.
    #[arg(long, alias = "txn", value_name = "KEY")]
    row: String,
    /// The input and output column --row is matched against.
    #[arg(long, default_value = "txn_id")]
    column: String,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// `weir explain`.
pub fn run(args: Args) -> Result<()> {
    let host = WasmHost::new(default_cache_root())?;
    let report = crate::explain::explain(
        &host,
        &crate::explain::ExplainRequest {
            pipeline: args.pipeline,
            epoch: args.epoch,
            key: args.row,
            column: args.column,
        },
    )?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        crate::explain::print_text(&report);
    }
    Ok(())
}
