//! `cargo bench -p weir-cli --bench windows`: the Spark fraud job of issue
//! 16 — payments counted per card in 60 s event-time tumbling windows, each
//! payment scored with its window's *final* count when the 10 s watermark
//! closes the window — over the demo's generated payments (2M by default,
//! `BENCH_WINDOWS_EVENTS`), 100k per epoch, two ways:
//! - `fraud-windows`: the SDK's window helper on host timers, append-only
//!   lists and scans (and a final no-data epoch that closes the last
//!   windows);
//! - `fraud-windows-by-hand`, the baseline: the same job with get/put only
//!   — each window's payments one value, re-read and rewritten by every
//!   batch that adds to it, an index key of open windows.
//!
//! - the floor: `fraud-rules` alone (no state, no windows) over the same
//!   input — what reading, decoding and the sink cost, for the RSS.
//!
//! Each runs in a fresh process of its own (`WEIR_WINDOWS_ONE`), so peak
//! RSS is its own. Printed: events/s, alerts, peak RSS, state on disk, and
//! the operator and commit phases of the first and last epochs (flat = the
//! state cost does not grow with the state).
//!
//! Where the memory goes: `WEIR_WINDOWS_TRACE=1 WEIR_WINDOWS_ONE=timers
//! WEIR_WINDOWS_INPUT=/tmp/input cargo bench -p weir-cli --bench windows`
//! prints, per epoch, the RSS after it (and how much of it is mapped
//! files: the binary's code), glibc's heap in use and free, and the largest
//! RSS sampled (every 1 ms) during each of its phases.

use weir_test_support::guests;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use weir_cli::demo::{self, DemoOperator};

const PER_EPOCH: u64 = 100_000;

/// glibc's heap counters (in use, mapped on their own, free but kept).
#[allow(unsafe_code)] // a libc call with no safe wrapper in std
fn malloc_info() -> libc::mallinfo2 {
    // SAFETY: mallinfo2 takes no arguments and only reads the counters.
    unsafe { libc::mallinfo2() }
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with(field))?.to_string();
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn write_input(input: &Path, events: u64) {
    std::fs::create_dir_all(input).unwrap();
    for (n, start) in (0..events).step_by(PER_EPOCH as usize).enumerate() {
        let count = PER_EPOCH.min(events - start);
        let path = input.join(format!("payments-{n:04}.jsonl"));
        std::fs::write(
            &path,
            weir_connectors::generator::payments::json_lines(0x5EED, start, count),
        )
        .unwrap();
        let t = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000 + n as u64);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }
}

fn mean_ms(d: &[Duration]) -> f64 {
    d.iter().map(Duration::as_secs_f64).sum::<f64>() * 1e3 / d.len().max(1) as f64
}

/// Runs one variant over `input` in this process; prints one result line.
fn one(variant: &str, input: &Path) {
    // As `weir` itself does.
    weir_core::memory::tune_allocator();
    let dir = tempfile::tempdir().unwrap();
    let wasm = match variant {
        "timers" => DemoOperator::Windows.wasm().to_vec(),
        "rules" => DemoOperator::Rules.wasm().to_vec(),
        _ => std::fs::read(guests::guest("fraud_windows_by_hand")).unwrap(),
    };
    std::fs::write(dir.path().join("op.wasm"), wasm).unwrap();
    let op = match variant {
        "rules" => DemoOperator::Rules,
        _ => DemoOperator::Windows,
    };
    // One task: the by-hand baseline keeps one index of every open window,
    // a key no task split can own (and the published figures are one
    // task's).
    let toml = format!("parallelism = 1\n{}", demo::pipeline_toml(1, op))
        .replace(
            "path = \"input\"",
            &format!("path = {:?}", input.display().to_string()),
        )
        .replace(op.file(), "op.wasm");
    let cfg = weir_engine::config::PipelineConfig::parse(&toml, dir.path()).unwrap();
    let host = weir_host::WasmHost::new(None).unwrap();
    let opts = weir_engine::OpenOptions {
        ephemeral_checkpoint_ok: true,
        ..Default::default()
    };
    let mut pipeline = weir_engine::open(&cfg, &host, opts).unwrap();
    let mut epochs = Vec::new();
    // WEIR_WINDOWS_TRACE: the RSS after every epoch, to see where it grows.
    let trace = std::env::var_os("WEIR_WINDOWS_TRACE").is_some();
    let samples = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(i64, u64)>::new()));
    if trace {
        let samples = samples.clone();
        std::thread::spawn(move || loop {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64;
            samples.lock().unwrap().push((now, status_kib("VmRSS:")));
            std::thread::sleep(Duration::from_millis(1));
        });
        eprintln!(
            "opened: RSS {} KiB (anonymous {}, files {}), peak {} KiB",
            status_kib("VmRSS:"),
            status_kib("RssAnon:"),
            status_kib("RssFile:"),
            status_kib("VmHWM:")
        );
    }
    let started = Instant::now();
    let summary = pipeline
        .run(&host, &AtomicBool::new(false), &mut |p| {
            if trace {
                let mut at = p.started_ms;
                let mut line = String::new();
                let all = samples.lock().unwrap();
                for (name, d) in p.phases.named().into_iter().take(6) {
                    let end = at + d.as_millis() as i64;
                    let max = all
                        .iter()
                        .filter(|(t, _)| *t >= at && *t <= end)
                        .map(|s| s.1)
                        .max()
                        .unwrap_or(0);
                    line.push_str(&format!(" {name} {}", max / 1024));
                    at = end;
                }
                let heap = malloc_info();
                eprintln!(
                    "epoch {:3}: {:6} rows, RSS {} KiB (files {}), peak {} KiB; \
                     heap MiB in use {} free {}; MiB max by phase:{line}",
                    p.epoch,
                    p.rows_in,
                    status_kib("VmRSS:"),
                    status_kib("RssFile:"),
                    status_kib("VmHWM:"),
                    (heap.uordblks + heap.hblkhd) >> 20,
                    heap.fordblks >> 20,
                );
            }
            epochs.push(p.clone())
        })
        .unwrap();
    let secs = started.elapsed().as_secs_f64();
    drop(pipeline);
    let alerts = demo::read_alerts(&dir.path().join("alerts")).unwrap().len();
    let data: Vec<_> = epochs.iter().filter(|e| e.rows_in > 0).collect();
    let phase = |range: &[&weir_core::progress::EpochProgress],
                 f: fn(&weir_core::progress::Phases) -> Duration| {
        mean_ms(&range.iter().map(|e| f(&e.phases)).collect::<Vec<_>>())
    };
    let (first, last) = (
        &data[..3.min(data.len())],
        &data[data.len().saturating_sub(3)..],
    );
    println!(
        "RESULT {} {} {} {:.3} {} {} {:.1} {:.1} {:.1} {:.1}",
        summary.rows_in,
        epochs.len(),
        alerts,
        secs,
        status_kib("VmHWM:"),
        dir_bytes(&dir.path().join("checkpoint/state")),
        phase(first, |p| p.operator),
        phase(last, |p| p.operator),
        phase(first, |p| p.commit),
        phase(last, |p| p.commit),
    );
}

fn main() {
    let events: u64 = std::env::var("BENCH_WINDOWS_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    if let (Ok(variant), Ok(input)) = (
        std::env::var("WEIR_WINDOWS_ONE"),
        std::env::var("WEIR_WINDOWS_INPUT"),
    ) {
        // Profiling one variant by hand: the input is written if missing.
        let input = Path::new(&input);
        if !input.exists() {
            write_input(input, events);
        }
        one(&variant, input);
        return;
    }
    let input = tempfile::tempdir().unwrap();
    write_input(input.path(), events);
    guests::guest("fraud_windows_by_hand");
    println!(
        "windows: {events} payments, {PER_EPOCH} per epoch; 60 s tumbling windows per card, \
         10 s watermark, every payment scored with its window's final count\n"
    );
    println!("| variant | events/s | vs by hand | epochs | alerts | peak RSS | state on disk | operator ms/epoch first → last 3 | commit ms/epoch first → last 3 |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut baseline = None;
    for (label, variant) in [
        ("by hand (get/put only)", "by-hand"),
        ("timers + lists (SDK windows)", "timers"),
        ("floor: rules only, no windows", "rules"),
    ] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .env("WEIR_WINDOWS_ONE", variant)
            .env("WEIR_WINDOWS_INPUT", input.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("RESULT "))
            .unwrap();
        let f: Vec<f64> = line.split(' ').map(|v| v.parse().unwrap()).collect();
        let rate = f[0] / f[3];
        let ratio = *baseline.get_or_insert(rate);
        println!(
            "| {label} | {:.0} | {:.2}x | {} | {} | {:.0} MiB | {:.0} MB | {:.0} → {:.0} | {:.0} → {:.0} |",
            rate,
            rate / ratio,
            f[1],
            f[2],
            f[4] / 1024.0,
            f[5] / 1e6,
            f[6],
            f[7],
            f[8],
            f[9],
        );
    }
}
