//! The `weir` command line: parses the arguments and dispatches to the
//! command's module under [`crate::commands`], where each command has its
//! arguments and its `run`.

use crate::commands;
use anyhow::Result;
use clap::{Parser, Subcommand};

/// Weir runs stream pipelines whose operators are sandboxed WebAssembly
/// components: the host owns sources, the offset and commit logs, sinks and
/// recovery; operators only turn micro-batches into rows.
#[derive(Debug, Parser)]
#[command(name = "weir", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a pipeline until its trigger is done or Ctrl-C (the current epoch finishes first).
    ///
    /// Resumes from the checkpoint: an epoch planned but not committed by an
    /// earlier run is re-run first, with the same input and operator version.
    ///
    /// With an `[admin]` section (or `--admin`), serves the admin API that
    /// `weir deploy`, `weir rollback` and `weir versions` talk to: operators
    /// are swapped between epochs without a restart. The same address serves
    /// the live dashboard (`/dashboard`), Prometheus metrics (`/metrics`) and
    /// per-epoch progress records (`weir status`).
    ///
    /// An `available-now` or `once` pipeline (a backfill) shows a progress
    /// bar with rate and ETA when stderr is a terminal.
    ///
    /// With `[cluster]`, this process is one worker of the cluster: it runs
    /// the Kafka partitions the consumer group gives it. Its admin API
    /// reaches the whole cluster: a deploy or rollback through any worker
    /// is taken up by every partition on every worker, and `weir status`
    /// lists every worker and its partitions.
    Run(commands::run::Args),
    /// Upload an operator version to a running pipeline and activate it at the next epoch.
    ///
    /// The upload is validated first (it compiles, implements the
    /// weir:operator world, `init` accepts the config, golden files pass);
    /// a refused upload changes nothing. With --shadow the version runs
    /// beside the active one and only reports how its output differs.
    Deploy(commands::deploy::Args),
    /// List the operator versions of a running pipeline.
    Versions(commands::versions::Args),
    /// Go back to the previously active operator version (or --to N), at the next epoch.
    Rollback(commands::rollback::Args),
    /// Activate a registered operator version at the next epoch.
    Activate(commands::activate::Args),
    /// Make the version running in shadow the active one, at the next epoch.
    Promote(commands::promote::Args),
    /// Stop the shadow run.
    Unshadow(commands::unshadow::Args),
    /// Print the audit trail of a running pipeline: who changed what runs, when, from where.
    ///
    /// Every upload, activation, shadow run, promotion, rollback and
    /// automatic rollback, and every lookup table that began failing to
    /// refresh, with the admin token's name (or `engine`, `pipeline-file`,
    /// `watch`), the client's address and the versions' digests. Kept in
    /// the checkpoint; `weir checkpoint audit DIR` reads it without a
    /// running pipeline, older entries included.
    Audit(commands::audit::Args),
    /// Make an admin API token: printed once, stored only as its digest.
    Token(commands::token::Args),
    /// Show what a running pipeline runs and whether it keeps up.
    ///
    /// Active version, shadow differences, last epoch, the backlog verdict
    /// (keeping up / at risk / backlog growing), rates, source lag, state
    /// size and recent warnings. The same figures are on the dashboard at
    /// the admin URL and in Prometheus form at /metrics.
    Status(commands::status::Args),
    /// Generate payments with planted fraud and score them with the bundled operator.
    ///
    /// Needs no services and no config. Everything is written to a fresh
    /// directory (printed at the end), including a pipeline.toml to re-run.
    Demo(commands::demo::Args),
    /// Produce synthetic payments (with planted fraud) to a Kafka topic.
    ///
    /// Drives examples/kafka-fraud; each payment's `ts` is its production
    /// time, so alert latency can be read off the sink.
    Feed(commands::feed::Args),
    /// Write the demo's synthetic data as JSON lines to stdout.
    ///
    /// `payments`: the payment stream (with `--labels`, each payment's
    /// planted fraud kind, or null, in a `planted` field: the training data
    /// of tools/model/train.py). `cards`: the card population, the `cards`
    /// lookup table of the model pipeline (home country, registered devices).
    Generate(commands::generate::Args),
    /// Replay one decision from the checkpoint and say why it was made.
    ///
    /// Runs epoch N again exactly as `offsets/N` recorded it — operator,
    /// config and artifact digests, lookup table versions, the state the
    /// epoch read — on a scratch copy of the checkpoint (nothing real is
    /// written), and prints the row's input, the state under its key, what
    /// each output made of it, and its score compared bit for bit with the
    /// one the files sink logged. For an operator that reports its
    /// features (`f_<name>` columns, as fraud-model does), each feature's
    /// value and contribution.
    Explain(commands::explain::Args),
    /// Inspect a checkpoint directory.
    Checkpoint(commands::checkpoint::Args),
    /// Work with operator components.
    Operator(commands::operator::Args),
}

/// Entry point of the `weir` binary; returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    // `weir operator test` prints the operator's output and its own log
    // lines, not the scratch pipeline's progress.
    let testing = matches!(&cli.command, Command::Operator(args) if args.is_test());
    init_tracing(if testing {
        "warn,weir::guest=debug"
    } else {
        "info"
    });
    match dispatch(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    }
}

/// Logs to stderr at `default` unless `WEIR_LOG` says otherwise.
fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // Warnings and errors are also kept for the dashboard and counted in
    // `/metrics`.
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(weir_engine::observe::recent::layer())
        .try_init();
}

/// Runs the command: dispatching only.
fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run(args) => commands::run::run(args),
        Command::Deploy(args) => commands::deploy::run(args),
        Command::Versions(args) => commands::versions::run(args),
        Command::Rollback(args) => commands::rollback::run(args),
        Command::Activate(args) => commands::activate::run(args),
        Command::Promote(args) => commands::promote::run(args),
        Command::Unshadow(args) => commands::unshadow::run(args),
        Command::Audit(args) => commands::audit::run(args),
        Command::Token(args) => commands::token::run(args),
        Command::Status(args) => commands::status::run(args),
        Command::Demo(args) => commands::demo::run(args),
        Command::Feed(args) => commands::feed::run(args),
        Command::Generate(args) => commands::generate::run(args),
        Command::Explain(args) => commands::explain::run(args),
        Command::Checkpoint(args) => commands::checkpoint::run(args),
        Command::Operator(args) => commands::operator::run(args),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap's own checks of every command's arguments (names unique, no
    /// clash with `--help` and `--version`), which it otherwise makes only
    /// when a debug build parses that command.
    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
