//! `weir operator`: work with operator components outside a pipeline —
//! test one over sample rows, make a new project, check what it is.

use anyhow::{Context, Result};
use std::path::PathBuf;
use weir_host::{default_cache_root, Grants, WasmHost};

/// The arguments of `weir operator` (its help text is the command's).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

impl Args {
    /// Whether this is `weir operator test`, which logs the operator's
    /// own lines and not the scratch pipeline's progress.
    pub fn is_test(&self) -> bool {
        matches!(self.command, Command::Test { .. })
    }
}

/// What `weir operator` does.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
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
        #[arg(long = "artifact", value_name = "NAME=FILE", value_parser = super::parse_artifact)]
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

/// `weir operator`.
pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Test {
            file,
            input,
            config,
            pipeline,
            expect,
            state,
            output,
            artifacts,
        } => test(crate::devtools::TestOptions {
            component: file,
            inputs: input,
            config,
            pipeline,
            expect,
            state,
            output,
            artifacts,
        }),
        Command::New {
            name,
            lang,
            dir,
            sdk,
        } => new(name, lang, dir, sdk),
        Command::Check { file, grants } => check(file, grants),
    }
}

/// `weir operator test`: one epoch, or one per input file.
fn test(opts: crate::devtools::TestOptions) -> Result<()> {
    if let Some(name) = &opts.output {
        weir_core::outputs::check_name(name).context("--output")?;
    }
    let host = WasmHost::new(default_cache_root())?;
    let checked = if opts.expect.is_some() {
        "; output as expected"
    } else {
        ""
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

/// `weir operator new`.
fn new(
    name: String,
    lang: crate::devtools::scaffold::Lang,
    dir: Option<PathBuf>,
    sdk: Option<PathBuf>,
) -> Result<()> {
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

/// `weir operator check`.
fn check(file: PathBuf, grant_names: Vec<String>) -> Result<()> {
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
