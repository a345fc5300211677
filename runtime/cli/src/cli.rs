//! The `weir` command line.

use crate::demo::{self, DemoOperator, DemoOptions};
use crate::watch::Watcher;
use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use weir_admin::{client, AdminServer, AdminSettings};
use weir_core::checkpoint::Checkpoint;
use weir_engine::config::{PipelineConfig, TriggerConfig};
use weir_engine::observe::ProgressReport;
use weir_engine::versions::registry::Origin;
use weir_engine::versions::{Listed, Status};
use weir_engine::OpenOptions;
use weir_host::{default_cache_root, Grants, WasmHost};

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
    Run {
        /// The pipeline file (see docs/config.md).
        pipeline: PathBuf,
        /// Print only the summary, not a line per epoch.
        #[arg(long, short)]
        quiet: bool,
        /// Redeploy the operator whenever its .wasm file changes (development).
        #[arg(long)]
        watch: bool,
        /// Serve the admin API on this address (overrides `admin.listen`;
        /// `127.0.0.1:0` picks a free port, written to <checkpoint>/admin-url,
        /// or <checkpoint_cache>/<worker>/admin-url for a cluster's worker).
        #[arg(long, value_name = "HOST:PORT")]
        admin: Option<String>,
        /// This worker's name, with `[cluster]` (default: the host name).
        /// Workers on one machine need names of their own: each keeps its
        /// cache of the checkpoint under `<checkpoint_cache>/<name>`.
        #[arg(long, value_name = "NAME")]
        worker: Option<String>,
    },
    /// Upload an operator version to a running pipeline and activate it at the next epoch.
    ///
    /// The upload is validated first (it compiles, implements the
    /// weir:operator world, `init` accepts the config, golden files pass);
    /// a refused upload changes nothing. With --shadow the version runs
    /// beside the active one and only reports how its output differs.
    Deploy(DeployArgs),
    /// List the operator versions of a running pipeline.
    Versions {
        #[command(flatten)]
        target: TargetArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Go back to the previously active operator version (or --to N), at the next epoch.
    Rollback {
        #[command(flatten)]
        target: TargetArgs,
        /// The version to go back to.
        #[arg(long)]
        to: Option<u32>,
    },
    /// Activate a registered operator version at the next epoch.
    Activate {
        #[command(flatten)]
        target: TargetArgs,
        /// Version number (see `weir versions`).
        version: u32,
    },
    /// Make the version running in shadow the active one, at the next epoch.
    Promote {
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Stop the shadow run.
    Unshadow {
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Print the audit trail of a running pipeline: who changed what runs, when, from where.
    ///
    /// Every upload, activation, shadow run, promotion, rollback and
    /// automatic rollback, and every lookup table that began failing to
    /// refresh, with the admin token's name (or `engine`, `pipeline-file`,
    /// `watch`), the client's address and the versions' digests. Kept in
    /// the checkpoint; `weir checkpoint audit DIR` reads it without a
    /// running pipeline, older entries included.
    Audit {
        #[command(flatten)]
        target: TargetArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Make an admin API token: printed once, stored only as its digest.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Show what a running pipeline runs and whether it keeps up.
    ///
    /// Active version, shadow differences, last epoch, the backlog verdict
    /// (keeping up / at risk / backlog growing), rates, source lag, state
    /// size and recent warnings. The same figures are on the dashboard at
    /// the admin URL and in Prometheus form at /metrics.
    Status(StatusArgs),
    /// Generate payments with planted fraud and score them with the bundled operator.
    ///
    /// Needs no services and no config. Everything is written to a fresh
    /// directory (printed at the end), including a pipeline.toml to re-run.
    Demo(DemoArgs),
    /// Produce synthetic payments (with planted fraud) to a Kafka topic.
    ///
    /// Drives examples/kafka-fraud; each payment's `ts` is its production
    /// time, so alert latency can be read off the sink.
    Feed(FeedArgs),
    /// Write the demo's synthetic data as JSON lines to stdout.
    ///
    /// `payments`: the payment stream (with `--labels`, each payment's
    /// planted fraud kind, or null, in a `planted` field: the training data
    /// of tools/model/train.py). `cards`: the card population, the `cards`
    /// lookup table of the model pipeline (home country, registered devices).
    Generate(GenerateArgs),
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
    Explain(ExplainArgs),
    /// Inspect a checkpoint directory.
    Checkpoint {
        #[command(subcommand)]
        command: CheckpointCommand,
    },
    /// Work with operator components.
    Operator {
        #[command(subcommand)]
        command: OperatorCommand,
    },
}

/// Which running pipeline an admin command talks to.
#[derive(Debug, clap::Args)]
struct TargetArgs {
    /// The pipeline's name (its `name` in the pipeline file).
    #[arg(long, short)]
    pipeline: String,
    /// The pipeline's admin API.
    #[arg(long, env = "WEIR_ADMIN_URL", default_value = "http://127.0.0.1:7878")]
    admin: String,
    /// Bearer token of the admin API.
    #[arg(long, env = "WEIR_ADMIN_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// For an https:// admin API: a CA certificate (PEM) to trust besides
    /// the system's.
    #[arg(long, env = "WEIR_ADMIN_CA_FILE")]
    ca_file: Option<PathBuf>,
    /// For an admin API that requires client certificates: this client's (PEM).
    #[arg(long, env = "WEIR_ADMIN_CLIENT_CERT", requires = "client_key")]
    client_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, env = "WEIR_ADMIN_CLIENT_KEY", requires = "client_cert")]
    client_key: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Generate a random token with a name and a scope.
    ///
    /// Scopes nest: `read` (status, versions, progress, audit, metrics,
    /// the dashboard) < `deploy` (upload, activate, shadow, promote) <
    /// `admin` (rollback). The token is printed once on stdout; with
    /// --file its entry (name, scope, sha256 digest) is added to that
    /// tokens file, which a running admin API reads again within a second.
    /// Rotate by adding a new token and removing the old one's entry.
    New {
        /// The token's name, shown in the audit trail (letters, digits, - _ . @).
        #[arg(long)]
        name: String,
        /// read, deploy or admin.
        #[arg(long)]
        scope: weir_admin::tokens::Scope,
        /// The tokens file to add it to (`admin.tokens_file`).
        #[arg(long)]
        file: Option<PathBuf>,
    },
}

impl TargetArgs {
    fn target(self) -> client::Target {
        let url = if self.admin.contains("://") {
            self.admin
        } else {
            format!("http://{}", self.admin)
        };
        client::Target::new(
            url,
            self.pipeline,
            self.token,
            client::ClientTls {
                ca_file: self.ca_file,
                cert_file: self.client_cert,
                key_file: self.client_key,
            },
        )
    }
}

#[derive(Debug, Subcommand)]
enum CheckpointCommand {
    /// List epochs with their offsets, operator digests and commit status.
    Show {
        /// The checkpoint directory.
        dir: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Verify the state store (every block's checksum, in the working copy
    /// and in every snapshot) and move each corrupt one aside. The next
    /// `weir run` rebuilds the state from the newest good snapshot and
    /// re-runs the operator over the epochs since; their output is not
    /// written again. Refused while a pipeline runs on the checkpoint.
    Repair {
        /// The checkpoint directory.
        dir: PathBuf,
    },
    /// Print the checkpoint's whole audit trail (see `weir audit`).
    Audit {
        /// The checkpoint directory.
        dir: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum OperatorCommand {
    /// Run a component over sample rows, outside any pipeline, and print its output.
    ///
    /// The input is JSON lines in the source schema: the pipeline's with
    /// --pipeline, else the demo's payments. Keyed state starts empty, or as
    /// --state gives it. Output rows are printed as JSON lines, columns in the
    /// operator's order. With --expect the output must equal that file row by
    /// row (exit 1 if not). --pipeline also supplies the operator's config
    /// ([operator.config]) unless --config is given.
    ///
    /// Several --input files run as one epoch each, in order, through a real
    /// pipeline in a scratch directory: state, lists and timers carry from
    /// epoch to epoch, and with an [event_time] in --pipeline a final epoch
    /// without data fires the timers the watermark passed (closing windows).
    /// Each epoch's rows follow a `# epoch N` line on stderr.
    Test {
        /// The component (.wasm).
        file: PathBuf,
        /// Input rows (JSON lines); repeat for one epoch per file.
        #[arg(long, required = true)]
        input: Vec<PathBuf>,
        /// Operator config (.json or .toml); default: the pipeline's, else {}.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Take schema, config, limits and grants from this pipeline file.
        #[arg(long)]
        pipeline: Option<PathBuf>,
        /// The exact expected output (JSON lines).
        #[arg(long)]
        expect: Option<PathBuf>,
        /// Keyed state to start from: JSON lines of {"key": text, "value":
        /// text or JSON} ("key_hex"/"value_hex" for bytes), as the operator's
        /// state.get sees them.
        #[arg(long)]
        state: Option<PathBuf>,
        /// Print (and --expect) the rows the operator emits to this named
        /// output (e.g. scores) instead of the rows `process` returns.
        #[arg(long, value_name = "NAME")]
        output: Option<String>,
        /// A named file for the operator (`model=model.onnx`), read through
        /// weir:operator/artifacts; repeat for more. Default: the
        /// pipeline's `[operator] artifacts`.
        #[arg(long = "artifact", value_name = "NAME=FILE", value_parser = parse_artifact)]
        artifacts: Vec<(String, PathBuf)>,
    },
    /// Create an operator project that builds and tests out of the box.
    New {
        /// The operator's name (lowercase letters, digits, - and _).
        name: String,
        /// Language of the project.
        #[arg(long, value_enum)]
        lang: crate::devtools::scaffold::Lang,
        /// Directory to create (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// weir-sdk directory for Rust projects (default: the one this weir was built from).
        #[arg(long)]
        sdk: Option<PathBuf>,
    },
    /// Check that a component implements the `weir:operator` world and what it imports.
    Check {
        /// The component (`.wasm`).
        file: PathBuf,
        /// Check as if the pipeline granted this capability (clocks, random).
        #[arg(long = "grant", value_parser = ["clocks", "random", "inert_wasi"])]
        grants: Vec<String>,
    },
}

/// Entry point of the `weir` binary; returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    // `weir operator test` prints the operator's output and its own log
    // lines, not the scratch pipeline's progress.
    let testing = matches!(
        cli.command,
        Command::Operator {
            command: OperatorCommand::Test { .. }
        }
    );
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

fn stop_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            eprintln!(
                "second interrupt: exiting now; the uncommitted epoch will be re-run on restart"
            );
            std::process::exit(130);
        }
        eprintln!("stopping after the current epoch (interrupt again to exit now)");
    })
    .context("installing the Ctrl-C handler")?;
    Ok(stop)
}

// The arguments of `weir deploy` (its help text is the variant's).
#[derive(Debug, clap::Args)]
struct DeployArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// The component (.wasm).
    file: PathBuf,
    /// Operator config (.json, or .toml); default: the active version's.
    #[arg(long)]
    config: Option<PathBuf>,
    /// A note kept with the version (e.g. the rule change).
    #[arg(long)]
    label: Option<String>,
    /// Input rows (JSON lines, source schema) the version must turn into --golden-output.
    #[arg(long, requires = "golden_output")]
    golden_input: Option<PathBuf>,
    /// The exact output rows (JSON lines) expected for --golden-input.
    #[arg(long, requires = "golden_input")]
    golden_output: Option<PathBuf>,
    /// Run in shadow: same epochs as the active version, nothing written; see `weir status`.
    #[arg(long, conflicts_with = "stage")]
    shadow: bool,
    /// Output column that identifies a row when shadow output is compared (default: the first).
    #[arg(long, requires = "shadow")]
    key: Option<String>,
    /// A named file the version reads through weir:operator/artifacts
    /// (`model=model.onnx`); repeat for more. It replaces the active
    /// version's artifact of that name; the others are kept.
    #[arg(long = "artifact", value_name = "NAME=FILE", value_parser = parse_artifact)]
    artifacts: Vec<(String, PathBuf)>,
    /// Only register the version; activate it later with `weir activate`.
    #[arg(long)]
    stage: bool,
    /// Wait until an epoch has run with the new version (at most this long, e.g. 30s).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    wait: Option<std::time::Duration>,
}

/// `NAME=FILE` of `--artifact`.
fn parse_artifact(s: &str) -> Result<(String, PathBuf)> {
    let (name, file) = s
        .split_once('=')
        .context("expected NAME=FILE, e.g. model=model.onnx")?;
    weir_core::artifacts::check_name(name)?;
    if file.is_empty() {
        bail!("no file after `{name}=`");
    }
    Ok((name.to_string(), PathBuf::from(file)))
}

/// `weir deploy`: uploads a version and says what it will do.
fn deploy(args: DeployArgs) -> Result<()> {
    let DeployArgs {
        target,
        file,
        config,
        label,
        golden_input,
        golden_output,
        shadow,
        key,
        artifacts,
        stage,
        wait,
    } = args;
    let then = if shadow {
        "shadow"
    } else if stage {
        "stage"
    } else {
        "activate"
    };
    let target = target.target();
    let started = std::time::Instant::now();
    let v = target.deploy(&client::DeployRequest {
        component: file,
        config,
        label,
        golden: golden_input.zip(golden_output),
        artifacts,
        then: then.into(),
        key,
    })?;
    let number = v.version.number;
    println!(
        "version {number} ({}) validated and registered; {}",
        v.version.digest,
        match then {
            "shadow" => "runs in shadow from the next epoch (see `weir status`)",
            "stage" => "not active (use `weir activate`)",
            _ => "active from the next epoch",
        }
    );
    if let Some(timeout) = wait.filter(|_| then == "activate") {
        let epoch = target.wait_for_epoch_on(number, timeout)?;
        println!(
            "epoch {epoch} ran with version {number}, {:.2}s after the upload started",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

// The arguments of `weir status` (its help text is the variant's).
#[derive(Debug, clap::Args)]
struct StatusArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Print JSON (with every shadow report kept).
    #[arg(long)]
    json: bool,
}

/// `weir status`: what runs and whether it keeps up.
fn status(args: StatusArgs) -> Result<()> {
    let StatusArgs { target, json } = args;
    let target = target.target();
    let status = target.status()?;
    let progress = target.progress(if json { 100 } else { 5 })?;
    if json {
        let doc = serde_json::json!({
            "status": status,
            "progress": progress,
            "shadow_reports": target.shadow_reports()?,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", status_text(&status));
        print!("{}", progress_text(&progress));
    }
    Ok(())
}

// The arguments of `weir demo` (its help text is the variant's).
#[derive(Debug, clap::Args)]
struct DemoArgs {
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
fn demo_command(args: DemoArgs) -> Result<()> {
    let DemoArgs {
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

// The arguments of `weir feed` (its help text is the variant's).
#[derive(Debug, clap::Args)]
struct FeedArgs {
    /// Kafka bootstrap servers.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap_servers: String,
    /// Topic to produce to.
    #[arg(long, default_value = "payments")]
    topic: String,
    /// Number of payments.
    #[arg(long, default_value_t = 100_000)]
    payments: u64,
    /// Payments per second (default: as fast as possible).
    #[arg(long)]
    rate: Option<u64>,
    /// Seed of the generated stream.
    #[arg(long, default_value_t = 0x5EED)]
    seed: u64,
    /// Index of the first payment, to continue an earlier feed.
    #[arg(long, default_value_t = 0)]
    start: u64,
}

#[derive(Debug, clap::Args)]
struct ExplainArgs {
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
fn explain_command(args: ExplainArgs) -> Result<()> {
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

#[derive(Debug, clap::Args)]
struct GenerateArgs {
    /// What to write.
    what: GenerateWhat,
    /// Number of payments.
    #[arg(long, default_value_t = 100_000)]
    payments: u64,
    /// Seed of the generated stream.
    #[arg(long, default_value_t = 0x5EED)]
    seed: u64,
    /// Add each payment's planted fraud kind (`planted`, null if none).
    #[arg(long)]
    labels: bool,
}

/// What `weir generate` writes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum GenerateWhat {
    Payments,
    Cards,
}

/// `weir generate`: the demo's data as JSON lines on stdout; a reader
/// that stops early (`| head`) ends it quietly.
fn generate_command(args: GenerateArgs) -> Result<()> {
    let broken_pipe = |e: &anyhow::Error| {
        let kind = e
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            .or_else(|| e.downcast_ref::<serde_json::Error>()?.io_error_kind());
        kind == Some(std::io::ErrorKind::BrokenPipe)
    };
    match write_generated(&args) {
        Err(e) if broken_pipe(&e) => Ok(()),
        other => other,
    }
}

fn write_generated(args: &GenerateArgs) -> Result<()> {
    use std::io::Write;
    use weir_connectors::generator::payments;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    match args.what {
        GenerateWhat::Cards => out.write_all(&payments::cards_json_lines())?,
        GenerateWhat::Payments => {
            for i in 0..args.payments {
                let (p, planted) = payments::payment(args.seed, i);
                let mut row = serde_json::to_value(&p)?;
                if args.labels {
                    row["planted"] = planted.map(|k| k.name()).into();
                }
                serde_json::to_writer(&mut out, &row)?;
                out.write_all(b"\n")?;
            }
        }
    }
    Ok(out.flush()?)
}

/// `weir feed`: produces generated payments to a Kafka topic.
fn feed_command(args: FeedArgs) -> Result<()> {
    let FeedArgs {
        bootstrap_servers,
        topic,
        payments,
        rate,
        seed,
        start,
    } = args;
    let started = std::time::Instant::now();
    let sent = crate::feed::feed(&crate::feed::FeedOptions {
        bootstrap_servers,
        topic: topic.clone(),
        payments,
        rate,
        seed,
        start,
    })?;
    println!(
        "produced {sent} payments to `{topic}` in {:.2?}",
        started.elapsed()
    );
    Ok(())
}

fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run {
            pipeline,
            quiet,
            watch,
            admin,
            worker,
        } => run(pipeline, quiet, watch, admin, worker),
        Command::Deploy(args) => deploy(args),
        Command::Versions { target, json } => print_versions(&target.target().versions()?, json),
        Command::Rollback { target, to } => {
            let v = target.target().rollback(to)?;
            println!(
                "rolled back: version {} is active from the next epoch",
                v.version.number
            );
            Ok(())
        }
        Command::Activate { target, version } => {
            target.target().activate(version)?;
            println!("version {version} is active from the next epoch");
            Ok(())
        }
        Command::Promote { target } => {
            let v = target.target().promote()?;
            println!(
                "promoted: version {} is active from the next epoch",
                v.version.number
            );
            Ok(())
        }
        Command::Unshadow { target } => {
            target.target().unshadow()?;
            println!("shadow run stopped");
            Ok(())
        }
        Command::Status(args) => status(args),
        Command::Audit { target, json } => {
            crate::security::print_audit(&target.target().history()?, json)
        }
        Command::Token {
            command: TokenCommand::New { name, scope, file },
        } => crate::security::new_token(&name, scope, file.as_deref()),
        Command::Checkpoint {
            command: CheckpointCommand::Audit { dir, json },
        } => crate::security::checkpoint_audit(dir, json),
        Command::Demo(args) => demo_command(args),
        Command::Feed(args) => feed_command(args),
        Command::Generate(args) => generate_command(args),
        Command::Explain(args) => explain_command(args),
        Command::Checkpoint {
            command: CheckpointCommand::Show { dir, json },
        } => show_checkpoint(dir, json),
        Command::Checkpoint {
            command: CheckpointCommand::Repair { dir },
        } => repair_checkpoint(dir),
        Command::Operator {
            command: OperatorCommand::Check { file, grants },
        } => check_operator(file, grants),
        Command::Operator {
            command:
                OperatorCommand::Test {
                    file,
                    input,
                    config,
                    pipeline,
                    expect,
                    state,
                    output,
                    artifacts,
                },
        } => {
            if let Some(name) = &output {
                weir_core::outputs::check_name(name).context("--output")?;
            }
            let host = WasmHost::new(default_cache_root())?;
            let checked = if expect.is_some() {
                "; output as expected"
            } else {
                ""
            };
            let opts = crate::devtools::TestOptions {
                component: file,
                inputs: input,
                config,
                pipeline,
                expect,
                state,
                output,
                artifacts,
            };
            if crate::devtools::needs_epochs(&opts)? {
                let epochs = crate::devtools::test_epochs(&host, &opts)?;
                for e in &epochs {
                    let note = if e.no_data { " (no data)" } else { "" };
                    eprintln!(
                        "# epoch {}{note}: {} rows in, {} rows out",
                        e.epoch,
                        e.rows_in,
                        e.lines.len()
                    );
                    for line in &e.lines {
                        println!("{line}");
                    }
                }
                let out: usize = epochs.iter().map(|e| e.lines.len()).sum();
                eprintln!("{} epochs, {out} rows out{checked}", epochs.len());
                return Ok(());
            }
            let report = crate::devtools::test_operator(&host, &opts)?;
            for row in &report.rows {
                println!("{}", report.line(row));
            }
            eprintln!(
                "{} rows in, {} rows out{checked}",
                report.rows_in,
                report.rows.len(),
            );
            Ok(())
        }
        Command::Operator {
            command:
                OperatorCommand::New {
                    name,
                    lang,
                    dir,
                    sdk,
                },
        } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            let files = crate::devtools::scaffold::scaffold(&dir, &name, lang, sdk.as_deref())?;
            println!(
                "created {} ({} files); build and test it with `bash {}/test.sh`",
                dir.display(),
                files.len(),
                dir.display()
            );
            Ok(())
        }
    }
}

fn run(
    path: PathBuf,
    quiet: bool,
    watch: bool,
    admin: Option<String>,
    worker: Option<String>,
) -> Result<()> {
    let mut cfg = PipelineConfig::load(&path)?;
    if let Some(listen) = admin {
        cfg.admin.get_or_insert_with(Default::default).listen = listen;
    }
    let admin = cfg
        .admin
        .as_ref()
        .map(AdminSettings::resolve)
        .transpose()
        .context("`[admin]`")?;
    if cfg.cluster.is_some() {
        return run_worker(&cfg, quiet, watch, admin, worker);
    }
    if worker.is_some() {
        anyhow::bail!("`--worker` is for a pipeline with a `[cluster]` section");
    }
    let host = WasmHost::new(default_cache_root())?;
    let mut pipeline = weir_engine::open(&cfg, &host, OpenOptions::default())?;
    let _server = admin
        .map(|settings| {
            AdminServer::start(
                settings,
                pipeline.control(),
                pipeline.telemetry(),
                Some(pipeline.checkpoint().root().join("admin-url")),
            )
        })
        .transpose()?;
    let _watcher = if watch {
        Some(
            Watcher::start(
                cfg.operator.path.clone(),
                cfg.operator_config_json()?,
                pipeline.control(),
            )
            .context("starting the operator watcher")?,
        )
    } else {
        None
    };
    let stop = stop_flag()?;
    let backfill = matches!(
        cfg.trigger,
        TriggerConfig::AvailableNow | TriggerConfig::Once
    );
    let mut bar = backfill
        .then(weir_engine::observe::backfill::BackfillBar::new)
        .filter(|b| b.visible());
    let result = pipeline.run(&host, &stop, &mut |p| match &mut bar {
        Some(bar) => bar.epoch(p, (!quiet).then(|| p.to_string())),
        None if !quiet => println!("{p}"),
        None => {}
    });
    if let Some(bar) = &bar {
        bar.finish();
    }
    let summary = result?;
    println!(
        "{}: {} epochs ({} replayed), {} rows in, {} rows out, {} dead letters, {:.2}s",
        cfg.name,
        summary.epochs,
        summary.replayed,
        summary.rows_in,
        summary.rows_out,
        summary.dead_letters,
        summary.elapsed.as_secs_f64()
    );
    Ok(())
}

/// `weir run` of a pipeline with `[cluster]`: this process is one worker,
/// running the partitions the group gives it until Ctrl-C. Its admin API
/// (if any) deploys to, and reports on, the whole cluster.
fn run_worker(
    cfg: &PipelineConfig,
    quiet: bool,
    watch: bool,
    admin: Option<AdminSettings>,
    worker: Option<String>,
) -> Result<()> {
    let worker = match worker {
        Some(w) => w,
        None => host_name()?,
    };
    let host = WasmHost::new(default_cache_root())?;
    let stop = stop_flag()?;
    let on_epoch: weir_engine::cluster::partition::OnEpoch = Arc::new(move |p, e| {
        if !quiet {
            println!("partition {p}: {e}");
        }
    });
    let node = weir_engine::cluster::Worker::open(cfg, &host, &worker, on_epoch)?;
    let _server = match admin {
        Some(settings) => {
            let server = AdminServer::start(
                settings,
                node.control(),
                node.telemetry(),
                Some(node.cache().join("admin-url")),
            )?;
            node.set_admin_url(server.url());
            Some(server)
        }
        None => None,
    };
    let _watcher = watch
        .then(|| {
            Watcher::start(
                cfg.operator.path.clone(),
                cfg.operator_config_json()?,
                node.control(),
            )
            .context("starting the operator watcher")
        })
        .transpose()?;
    node.run(&stop)?;
    println!("{}: worker {worker} stopped", cfg.name);
    Ok(())
}

/// The machine's name, the default worker name.
fn host_name() -> Result<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .context("reading the host name; name the worker with `--worker NAME`")?;
    Ok(name.trim().to_string())
}

fn repair_checkpoint(dir: PathBuf) -> Result<()> {
    Checkpoint::inspect(&dir)?;
    let _lock = weir_core::checkpoint::WriterLock::take(&dir)?;
    let report = weir_state::verify::repair(&dir.join("state"))?;
    for (path, entries) in &report.sound {
        println!("sound    {} ({entries} entries)", path.display());
    }
    for (path, aside, why) in &report.set_aside {
        println!("CORRUPT  {}: {why}", path.display());
        println!("         moved to {}", aside.display());
    }
    if report.repaired() {
        println!(
            "The next `weir run` rebuilds the state from the newest good snapshot and the offset \
             log; the epochs it re-runs write no output again."
        );
    } else {
        println!("Nothing to repair.");
    }
    Ok(())
}

fn show_checkpoint(dir: PathBuf, json: bool) -> Result<()> {
    let ckpt = Checkpoint::inspect(&dir)?;
    let committed: std::collections::HashSet<u64> = ckpt.commits.epochs()?.into_iter().collect();
    let mut rows = Vec::new();
    for epoch in ckpt.offsets.epochs()? {
        let Some(entry) = ckpt.offsets.get(epoch)? else {
            continue;
        };
        let commit = ckpt.commits.get(epoch)?;
        // A real-time epoch's range is its logged parts.
        let source = if entry.real_time {
            let log = ckpt.parts.read_log(epoch)?;
            let parts: Vec<_> = log.parts.into_iter().map(|p| p.range).collect();
            match log.deferred.map(|p| p.range) {
                Some(d) => serde_json::json!({ "parts": parts, "deferred": d }),
                None => serde_json::json!({ "parts": parts }),
            }
        } else {
            entry.source
        };
        rows.push(serde_json::json!({
            "epoch": epoch,
            "committed": committed.contains(&epoch),
            "epoch_time_ms": entry.epoch_time_ms,
            "operator": entry.operator.digest,
            "operator_config": entry.operator.config_digest,
            "source": source,
            "rows_in": commit.as_ref().map(|c| c.rows_in),
            "rows_out": commit.as_ref().map(|c| c.rows_out),
        }));
    }
    if json {
        let doc = serde_json::json!({ "metadata": ckpt.metadata, "epochs": rows });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    let m = &ckpt.metadata;
    println!(
        "checkpoint {}\n  pipeline {}  query {}  format v{}\n  source {}\n  sink   {}\n",
        dir.display(),
        m.pipeline,
        m.query_id,
        m.format_version,
        m.source,
        m.sink
    );
    println!(
        "{:>6}  {:<9}  {:>8}  {:>8}  {:<19}  source range",
        "epoch", "status", "rows in", "rows out", "operator"
    );
    for r in &rows {
        let digest = r["operator"].as_str().unwrap_or("");
        let short = digest.get(..19).unwrap_or(digest);
        let files = r["source"]["files"]
            .as_array()
            .map(|f| {
                f.iter()
                    .filter_map(|x| x["name"].as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_else(|| match &r["source"] {
                serde_json::Value::Null => "no data: the watermark fired timers".to_string(),
                other => other.to_string(),
            });
        println!(
            "{:>6}  {:<9}  {:>8}  {:>8}  {:<19}  {}",
            r["epoch"].as_u64().unwrap_or_default(),
            if r["committed"].as_bool() == Some(true) {
                "committed"
            } else {
                "PLANNED"
            },
            r["rows_in"].as_u64().map_or("-".into(), |n| n.to_string()),
            r["rows_out"].as_u64().map_or("-".into(), |n| n.to_string()),
            short,
            files
        );
    }
    if rows.iter().any(|r| r["committed"].as_bool() != Some(true)) {
        println!("\nPLANNED: offsets written, commit missing; the next run re-runs that epoch.");
    }
    Ok(())
}

/// Unix milliseconds as an RFC 3339 UTC time to the second, for tables
/// (empty before 1970).
pub(crate) fn utc_seconds(ms: i64) -> String {
    u64::try_from(ms)
        .map(|ms| {
            humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms),
            )
            .to_string()
        })
        .unwrap_or_default()
}

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

/// `value` as JSON text (`null` when absent), as `weir status` prints it.
fn or_null<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "null".into(), |v| v.to_string())
}

fn status_text(s: &Status) -> String {
    let mut out = format!("pipeline {}\n", s.pipeline);
    let a = s.active.as_ref();
    out += &format!(
        "  active   version {} {}{}\n",
        or_null(a.map(|a| a.number)),
        a.map_or(String::new(), |a| a.digest.to_string()),
        s.active_since_epoch
            .map(|e| format!(" (since epoch {e})"))
            .unwrap_or_else(|| " (no epoch yet)".into())
    );
    if let Some(sh) = &s.shadow {
        out += &format!(
            "  shadow   version {} over {} epochs: {} agreed; rows added {}, removed {}, changed {}; {} failed\n",
            sh.version.number,
            sh.epochs,
            sh.epochs_agreeing,
            sh.added,
            sh.removed,
            sh.changed,
            sh.failed_epochs,
        );
    }
    if let Some(e) = &s.last_epoch {
        out += &format!(
            "  last     epoch {} on version {}: {} rows in, {} out, {:.1} ms\n",
            e.epoch,
            or_null(e.version),
            e.rows_in,
            e.rows_out,
            e.total_ms
        );
    }
    if let Some(c) = &s.cluster {
        out += &cluster_text(c);
    }
    out
}

/// The workers lines of `weir status` for a `[cluster]` pipeline: each
/// worker, whether its record is fresh, and its partitions' newest epochs.
fn cluster_text(c: &weir_engine::observe::ClusterStatus) -> String {
    let live = c.workers.iter().filter(|w| w.live).count();
    let mut out = format!(
        "  cluster  group {}: {} workers live{} (answered by {})\n",
        c.group,
        live,
        match c.workers.len() - live {
            0 => String::new(),
            gone => format!(", {gone} gone"),
        },
        c.answered_by
    );
    for w in &c.workers {
        let r = &w.record;
        out += &format!(
            "  worker   {}{} pid {}{}: {} partitions\n",
            r.worker,
            if w.live { "" } else { " (gone)" },
            r.pid,
            r.admin_url
                .as_ref()
                .map(|u| format!(" at {u}"))
                .unwrap_or_default(),
            r.partitions.len()
        );
        for p in &r.partitions {
            let last = p.last_epoch.as_ref().map_or_else(
                || "no epoch yet".to_string(),
                |e| {
                    format!(
                        "epoch {} on version {}, {} rows in, {} out",
                        e.epoch,
                        or_null(e.version),
                        e.rows_in,
                        e.rows_out
                    )
                },
            );
            out += &format!("    partition {:<3} {:<8} {last}\n", p.partition, p.state);
        }
    }
    out
}

/// The health, rates, lag and state lines of `weir status`.
fn progress_text(p: &ProgressReport) -> String {
    let mut out = format!(
        "  health   {}: {}\n",
        serde_json::to_value(p.health.verdict)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "?".into()),
        p.health.reason
    );
    if let Some(last) = p.epochs.last() {
        out += &format!(
            "  rates    {:.0} rows/s in, {:.0} rows/s processed (epoch {}, {:.1} ms{})\n",
            last.input_rows_per_sec,
            last.processed_rows_per_sec,
            last.epoch,
            last.total.as_secs_f64() * 1e3,
            p.trigger_interval_ms
                .map(|i| format!(" of a {i} ms trigger"))
                .unwrap_or_default(),
        );
        out += &format!(
            "  state    {} keys, {} bytes\n",
            last.state_keys, last.state_bytes
        );
        if let Some(l) = &last.latency {
            out += &format!(
                "  latency  event to sink: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} rows, epoch {})\n",
                l.p50_ms, l.p99_ms, l.max_ms, l.rows, last.epoch
            );
        }
    }
    if let Some(b) = p.source.map(|s| s.backlog) {
        out += &format!(
            "  lag      {} {} waiting at the source{}\n",
            b.pending,
            b.unit.as_str(),
            b.pending_files
                .map(|f| format!(" ({f} files)"))
                .unwrap_or_default()
        );
    }
    let errors = p.recent_errors.len();
    if errors > 0 {
        out += &format!("  log      {errors} recent warnings/errors (see the dashboard)\n");
    }
    out
}

fn check_operator(file: PathBuf, grant_names: Vec<String>) -> Result<()> {
    let wasm = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
    let grants = Grants {
        clocks: grant_names.iter().any(|g| g == "clocks"),
        random: grant_names.iter().any(|g| g == "random"),
        inert_wasi: grant_names.iter().any(|g| g == "inert_wasi"),
    };
    let host = WasmHost::new(None)?;
    let report = host
        .inspect(&wasm, grants)
        .with_context(|| format!("{} is not a WebAssembly component", file.display()))?;
    println!(
        "{}\n  digest  {}\n  size    {} bytes",
        file.display(),
        report.digest,
        report.size
    );
    println!("  exports");
    for e in &report.exports {
        println!("    {e}");
    }
    println!("  imports");
    for i in &report.imports {
        println!("    {i}");
    }
    match report.verdict {
        Ok(()) => {
            println!(
                "ok: implements weir:operator/operator@0.1.0 and imports only what is granted"
            );
            Ok(())
        }
        Err(why) => anyhow::bail!("{} cannot run: {why}", file.display()),
    }
}
