//! `weir demo`.

use crate::demo::{self, DemoOperator, DemoOptions};
use anyhow::Result;
use std::path::PathBuf;

/// The arguments of `weir demo` (its help text is the command's).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory to work in (default: a new directory under the temp dir).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Number of payments to generate.
    #[arg(long, default_value_t = 200_000)]
    payments: u64,
    /// Number of input files to split them into.
    #[arg(long, default_value_t = 20)]
    files: u64,
    /// Input files per epoch.
    #[arg(long, default_value_t = 2)]
    files_per_epoch: usize,
    /// Seed of the generated stream.
    #[arg(long, default_value_t = 0x5EED)]
    seed: u64,
    /// The bundled operator: `velocity` (rules + per-card velocity over
    /// keyed state), `rules` (stateless rules only) or `windows` (Spark's
    /// semantics: 60 s event-time tumbling windows per card, each payment
    /// scored with its window's final count when the watermark closes it).
    #[arg(long, value_enum, default_value_t = DemoOperator::Velocity)]
    operator: DemoOperator,
    /// `micro-batch`: files of payments, a few per epoch. `real-time`:
    /// payments generated live at --rate for --seconds, each scored as it
    /// arrives; the summary adds event-to-alert latency.
    #[arg(long, value_enum, default_value_t = DemoModeArg::MicroBatch)]
    mode: DemoModeArg,
    /// Real-time mode: payments generated per second (the demo's 5,000
    /// cards make more than 5 payments a minute each from ~400/s on, so the
    /// velocity rule flags most payments at high rates).
    #[arg(long, default_value_t = 500)]
    rate: u64,
    /// Real-time mode: seconds of payments to generate.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Print only the summary.
    #[arg(long, short)]
    quiet: bool,
}

/// `weir demo --mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DemoModeArg {
    MicroBatch,
    RealTime,
}

/// `weir demo`: generates payments and scores them.
pub fn run(args: Args) -> Result<()> {
    let Args {
        dir,
        payments,
        files,
        files_per_epoch,
        seed,
        operator,
        mode,
        rate,
        seconds,
        quiet,
    } = args;
    anyhow::ensure!(payments > 0, "--payments must be at least 1");
    anyhow::ensure!(
        (1..=1_000_000).contains(&rate),
        "--rate must be between 1 and 1000000 payments per second"
    );
    anyhow::ensure!(
        (1..=86_400).contains(&seconds),
        "--seconds must be between 1 and 86400"
    );
    anyhow::ensure!(files > 0, "--files must be at least 1");
    anyhow::ensure!(files_per_epoch > 0, "--files-per-epoch must be at least 1");
    let opts = DemoOptions {
        dir,
        payments,
        files,
        files_per_epoch,
        seed,
        operator,
        mode: match mode {
            DemoModeArg::MicroBatch => demo::DemoMode::MicroBatch,
            DemoModeArg::RealTime => demo::DemoMode::RealTime { rate, seconds },
        },
    };
    match opts.mode {
        demo::DemoMode::MicroBatch => println!(
            "weir demo: {payments} payments in {files} files, {files_per_epoch} files per epoch"
        ),
        demo::DemoMode::RealTime { rate, seconds } => println!(
            "weir demo (real-time): {} payments generated at {rate}/s for {seconds}s, each scored as it arrives",
            rate * seconds
        ),
    }
    let report = demo::run(&opts, &mut |p| {
        if !quiet {
            println!("{p}");
        }
    })?;
    print!("{}", demo::summary_text(&report));
    Ok(())
}
