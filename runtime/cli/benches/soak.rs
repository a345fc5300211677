//! `cargo bench -p weir-runtime --bench soak`: memory over a long run.
//!
//! Runs the demo pipeline continuously (processing-time trigger) with one
//! new file of 20 payments per epoch — the shape of a low-volume stream —
//! with the keyed-state `fraud-velocity` operator and, in a process of its
//! own, the stateless `fraud-rules` as the baseline, and samples resident
//! memory. Files are removed once committed, as an archiver
//! would, so the source directory stays small. `WEIR_SOAK_EPOCHS` sets the
//! length (default 100,000 epochs; each takes a few milliseconds).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use weir_cli::demo::{self, DemoOperator};

const ROWS: u64 = 20;

/// Resident memory of this process, in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?.to_string();
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

fn write_file(input: &Path, n: u64) {
    let bytes = weir_connectors::generator::payments::json_lines(7, n * ROWS, ROWS);
    let tmp = input.join(format!(".f-{n:08}.jsonl"));
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, input.join(format!("f-{n:08}.jsonl"))).unwrap();
}

/// (epoch, RSS KiB, state keys) every `epochs / 20` epochs.
fn soak(operator: DemoOperator, epochs: u64) -> (Vec<(u64, u64, u64)>, f64) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(dir.path().join(operator.file()), operator.wasm()).unwrap();
    let toml = demo::pipeline_toml(1, operator).replace(
        "mode = \"available-now\"",
        "mode = \"processing-time\"\ninterval = \"1ms\"",
    );
    let cfg = weir_engine::config::PipelineConfig::parse(&toml, dir.path()).unwrap();
    let host = weir_host::WasmHost::new(None).unwrap();
    let opts = weir_engine::OpenOptions {
        ephemeral_checkpoint_ok: true,
        ..Default::default()
    };
    let mut pipeline = weir_engine::open(&cfg, &host, opts).unwrap();
    write_file(&input, 0);
    let stop = AtomicBool::new(false);
    let every = (epochs / 20).max(1);
    let mut samples = Vec::new();
    let started = Instant::now();
    pipeline
        .run(&host, &stop, &mut |p| {
            let _ = std::fs::remove_file(input.join(format!("f-{:08}.jsonl", p.epoch)));
            if (p.epoch + 1) % every == 0 {
                samples.push((p.epoch + 1, rss_kib(), p.state_keys));
            }
            if p.epoch + 1 >= epochs {
                stop.store(true, Ordering::Relaxed);
            } else {
                write_file(&input, p.epoch + 1);
            }
        })
        .unwrap();
    let per_epoch_ms = started.elapsed().as_secs_f64() * 1e3 / epochs as f64;
    (samples, per_epoch_ms)
}

/// KiB per 1,000 epochs over the second half of the run (least squares).
fn slope(samples: &[(u64, u64, u64)]) -> f64 {
    let half = &samples[samples.len() / 2..];
    let n = half.len() as f64;
    let mx = half.iter().map(|s| s.0 as f64).sum::<f64>() / n;
    let my = half.iter().map(|s| s.1 as f64).sum::<f64>() / n;
    let cov: f64 = half
        .iter()
        .map(|s| (s.0 as f64 - mx) * (s.1 as f64 - my))
        .sum();
    let var: f64 = half.iter().map(|s| (s.0 as f64 - mx).powi(2)).sum();
    if var == 0.0 {
        0.0
    } else {
        cov / var * 1000.0
    }
}

/// Runs one operator's soak in this process (`WEIR_SOAK_ONE` set), or each
/// in a fresh process of its own, so neither inherits the other's heap.
fn main() {
    let epochs: u64 = std::env::var("WEIR_SOAK_EPOCHS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    if let Ok(one) = std::env::var("WEIR_SOAK_ONE") {
        let op = if one == "rules" {
            DemoOperator::Rules
        } else {
            DemoOperator::Velocity
        };
        let (samples, per_epoch) = soak(op, epochs);
        println!("{per_epoch:.2} ms per epoch");
        println!("| epoch | RSS MiB | state keys |");
        println!("|---|---|---|");
        for (e, rss, keys) in &samples {
            println!("| {e} | {:.1} | {keys} |", *rss as f64 / 1024.0);
        }
        println!("SLOPE {:.1}", slope(&samples));
        return;
    }
    println!("soak: {epochs} epochs of {ROWS} payments each, a new file per epoch\n");
    let mut slopes = Vec::new();
    for (label, one) in [
        ("fraud-velocity (keyed state)", "velocity"),
        ("fraud-rules (stateless)", "rules"),
    ] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .env("WEIR_SOAK_ONE", one)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut slope = 0.0;
        println!("{label}:");
        for line in text.lines() {
            match line.strip_prefix("SLOPE ") {
                Some(s) => slope = s.parse().unwrap_or(0.0),
                None => println!("{line}"),
            }
        }
        println!("growth over the second half: {slope:.1} KiB per 1,000 epochs\n");
        slopes.push((label, slope));
    }
    println!("| operator | RSS growth, second half (KiB / 1,000 epochs) |");
    println!("|---|---|");
    for (label, s) in slopes {
        println!("| {label} | {s:.1} |");
    }
}
