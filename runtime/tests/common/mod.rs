//! Helpers shared by the integration tests: guest components, pipeline files
//! and generated input.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Path of a bundled guest component (built by runtime/build.rs).
pub fn guest(name: &str) -> PathBuf {
    Path::new(weir::GUEST_DIR).join(format!("{name}.wasm"))
}

/// Writes `count` generated payments per file into `dir/input`.
pub fn write_input(dir: &Path, seed: u64, files: u64, per_file: u64) {
    let input = dir.join("input");
    std::fs::create_dir_all(&input).unwrap();
    for f in 0..files {
        let bytes = weir::demo::generator::json_lines(seed, f * per_file, per_file);
        std::fs::write(input.join(format!("payments-{f:04}.jsonl")), bytes).unwrap();
    }
}

/// A pipeline file over `dir/input` → `dir/out` with the given operator.
pub fn pipeline_toml(
    dir: &Path,
    operator: &Path,
    operator_config: &str,
    extra_source: &str,
    extra_operator: &str,
) -> String {
    format!(
        r#"name = "test"
checkpoint = "{dir}/checkpoint"
[trigger]
mode = "available-now"
[source]
kind = "files"
path = "{dir}/input"
max_files_per_trigger = 1
{schema}
{extra_source}
[operator]
path = "{op}"
{extra_operator}
config = {operator_config}
[sink]
kind = "files"
path = "{dir}/out"
"#,
        dir = dir.display(),
        op = operator.display(),
        schema = weir::demo::generator::SCHEMA_TOML,
    )
}

/// The demo's rules as an inline TOML table.
pub const DEMO_RULES_INLINE: &str = r#"{ alert_threshold = 0.7, rules = [
  { rule = "amount_above", threshold = 2500.0, weight = 0.5 },
  { rule = "country_mismatch", weight = 0.4 },
  { rule = "merchant_in", merchants = ["m-0666", "m-0777", "m-0999"], weight = 0.7 },
  { rule = "currency_not_in", currencies = ["USD", "EUR", "GBP"], weight = 0.2 } ] }"#;

/// Every output file of the sink, sorted by name, with its bytes.
pub fn sink_files(out: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(out)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl") && !n.starts_with('.'))
        .map(|n| {
            let bytes = std::fs::read(out.join(&n)).unwrap();
            (n, bytes)
        })
        .collect();
    files.sort();
    files
}

/// Parses `toml` (relative paths from `dir`) and opens the pipeline on `host`.
/// Tests use temp dirs, so the ephemeral-checkpoint warning is off.
pub fn open_pipeline(
    dir: &Path,
    toml: &str,
    host: &weir::operator::WasmHost,
) -> anyhow::Result<weir::engine::Pipeline> {
    let cfg = weir::config::PipelineConfig::parse(toml, dir)?;
    weir::pipeline::open(
        &cfg,
        host,
        weir::pipeline::OpenOptions {
            ephemeral_checkpoint_ok: true,
        },
    )
}
