//! `weir deploy`.

use super::TargetArgs;
use anyhow::Result;
use std::path::PathBuf;
use weir_admin::client;

/// The arguments of `weir deploy` (its help text is the command's).
#[derive(Debug, clap::Args)]
pub struct Args {
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
    #[arg(long = "artifact", value_name = "NAME=FILE", value_parser = super::parse_artifact)]
    artifacts: Vec<(String, PathBuf)>,
    /// Only register the version; activate it later with `weir activate`.
    #[arg(long)]
    stage: bool,
    /// Wait until an epoch has run with the new version (at most this long, e.g. 30s).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    wait: Option<std::time::Duration>,
}

/// `weir deploy`: uploads a version and says what it will do.
pub fn run(args: Args) -> Result<()> {
    let Args {
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
