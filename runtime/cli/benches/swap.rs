//! `cargo bench -p weir-runtime --bench swap`: hot swaps under load.
//!
//! The demo's fraud-velocity pipeline runs epochs back to back (1,000
//! payments each) while new versions are uploaded through the admin API,
//! one after another. Each version is new code (a new digest), compiled
//! without a cache, so the figures include Cranelift. Printed per swap:
//! upload → accepted (validation: compile, link, `init`), upload → first
//! epoch on the new version committed, and the longest epoch around the
//! swap against the median epoch away from any swap, measured in the same
//! run.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use weir_admin::client::{DeployRequest, Target};
use weir_admin::{AdminServer, AdminSettings};
use weir_cli::demo::{self, DemoOperator, DemoOptions};
use weir_engine::config::{AdminConfig, PipelineConfig, TriggerConfig};
use weir_host::WasmHost;

const FILES: u64 = 300;
const PER_FILE: u64 = 1_000;
const SWAPS: usize = 5;

/// `wasm` plus a custom section: same code, new digest.
fn variant(wasm: &[u8], n: usize) -> Vec<u8> {
    let name = format!("bench-variant-{n}");
    let mut out = wasm.to_vec();
    out.push(0);
    let payload_len = 1 + name.len();
    assert!(payload_len < 128 && name.len() < 128);
    out.push(payload_len as u8);
    out.push(name.len() as u8);
    out.extend_from_slice(name.as_bytes());
    out
}

/// One finished epoch: number, version, duration, when it finished.
type Finished = (u64, Option<u32>, Duration, Instant);

/// What one swap measured.
struct Swap {
    number: u32,
    started: Instant,
    accepted: Duration,
    to_first: Duration,
    first_epoch: u64,
    first_took: Duration,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline_file = demo::prepare(
        dir.path(),
        &DemoOptions {
            dir: None,
            payments: FILES * PER_FILE,
            files: FILES,
            files_per_epoch: 1,
            seed: 0x5EED,
            operator: DemoOperator::Velocity,
            mode: demo::DemoMode::MicroBatch,
        },
    )
    .unwrap();
    let mut cfg = PipelineConfig::load(&pipeline_file).unwrap();
    // Back-to-back epochs that do not stop when the input is done.
    cfg.trigger = TriggerConfig::ProcessingTime {
        interval: Duration::from_millis(1),
    };
    let host = WasmHost::new(None).unwrap();
    let mut pipeline = weir_engine::open(
        &cfg,
        &host,
        weir_engine::OpenOptions {
            ephemeral_checkpoint_ok: true,
            ..Default::default()
        },
    )
    .unwrap();
    let settings = AdminSettings::resolve(&AdminConfig {
        listen: "127.0.0.1:0".into(),
        ..AdminConfig::default()
    })
    .unwrap();
    let server =
        AdminServer::start(settings, pipeline.control(), pipeline.telemetry(), None).unwrap();
    let target = Target::new(
        server.url().to_string(),
        cfg.name.clone(),
        None,
        Default::default(),
    );

    let finished: Arc<Mutex<Vec<Finished>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let runner = {
        let (finished, stop, host) = (finished.clone(), stop.clone(), host.clone());
        std::thread::spawn(move || {
            pipeline
                .run(&host, &stop, &mut |p| {
                    finished.lock().unwrap().push((
                        p.epoch,
                        p.operator_version,
                        p.total,
                        Instant::now(),
                    ))
                })
                .unwrap()
        })
    };
    let epochs_done = || finished.lock().unwrap().len();
    while epochs_done() < 15 {
        std::thread::sleep(Duration::from_millis(5));
    }

    let base = std::fs::read(Path::new(weir_cli::GUEST_DIR).join("fraud_velocity.wasm")).unwrap();
    let mut swaps = Vec::new();
    for n in 0..SWAPS {
        let file = dir.path().join(format!("v{n}.wasm"));
        std::fs::write(&file, variant(&base, n)).unwrap();
        let started = Instant::now();
        let v = target
            .deploy(&DeployRequest {
                component: file,
                then: "activate".into(),
                ..DeployRequest::default()
            })
            .unwrap();
        let accepted = started.elapsed();
        let number = v.version.number;
        let first = loop {
            let hit = finished
                .lock()
                .unwrap()
                .iter()
                .find(|f| f.1 == Some(number))
                .copied();
            if let Some(f) = hit {
                break f;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        swaps.push(Swap {
            number,
            started,
            accepted,
            to_first: first.3 - started,
            first_epoch: first.0,
            first_took: first.2,
        });
        // Let a few epochs run on the new version before the next swap.
        let until = epochs_done() + 10;
        while epochs_done() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    stop.store(true, Ordering::Relaxed);
    runner.join().unwrap();
    drop(server);

    let all = finished.lock().unwrap().clone();
    // Epochs that overlapped a validation or were the first on a version.
    let disturbed = |f: &Finished| {
        swaps.iter().any(|s| {
            (f.3 >= s.started && f.3 <= s.started + s.accepted + f.2) || f.0 == s.first_epoch
        })
    };
    let undisturbed: Vec<Duration> = all.iter().filter(|f| !disturbed(f)).map(|f| f.2).collect();
    let normal = median(undisturbed.clone());
    // The fair baseline for "the longest of n epochs": the longest of n
    // consecutive undisturbed epochs, typically (median over all windows).
    let longest_of = |n: usize| {
        let n = n.clamp(1, undisturbed.len());
        median(
            undisturbed
                .windows(n)
                .map(|w| w.iter().copied().max().unwrap_or_default())
                .collect(),
        )
    };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let ratio = |d: Duration| d.as_secs_f64() / normal.as_secs_f64();
    println!(
        "\nhot swap under load: fraud-velocity, {PER_FILE} payments per epoch, epochs back to \
         back, {} epochs; median undisturbed epoch {:.1} ms\n",
        all.len(),
        ms(normal)
    );
    println!(
        "| swap | upload → accepted (compile, link, init) | upload → first epoch on it committed | \
         longest of the n epochs while validating | vs longest of n undisturbed | first epoch on \
         the new version (vs median) |"
    );
    println!("|---|---|---|---|---|---|");
    for s in &swaps {
        let while_validating: Vec<Duration> = all
            .iter()
            .filter(|f| f.3 >= s.started && f.3 <= s.started + s.accepted + f.2)
            .map(|f| f.2)
            .collect();
        let during = while_validating.iter().copied().max().unwrap_or_default();
        let baseline = longest_of(while_validating.len());
        println!(
            "| v{} at epoch {} | {:.0} ms | {:.0} ms | n={}: {:.1} ms | {:.1} ms: {:.2}x | {:.1} ms ({:.2}x) |",
            s.number,
            s.first_epoch,
            ms(s.accepted),
            ms(s.to_first),
            while_validating.len(),
            ms(during),
            ms(baseline),
            during.as_secs_f64() / baseline.as_secs_f64(),
            ms(s.first_took),
            ratio(s.first_took),
        );
    }
}
