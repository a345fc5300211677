//! `cargo bench -p weir-cli --bench observe`: what watching a pipeline
//! costs. Runs the demo pipeline (200,000 payments, 10 epochs, the
//! stateless `fraud-rules` operator, the cheapest epochs there are) and
//! measures, in the same process, the per-epoch bookkeeping of
//! [`weir_engine::observe::Telemetry`] (metrics, verdict, the record written to
//! `checkpoint/progress/`), a `/metrics` scrape and a dashboard poll
//! (`/progress` as JSON), each as a share of the demo's mean epoch.

use std::time::{Duration, Instant};
use weir_cli::demo::{self, DemoOperator, DemoOptions};
use weir_engine::observe::Telemetry;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time(reps: usize, mut f: impl FnMut()) -> Duration {
    median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

fn main() {
    let scratch = tempfile::tempdir().unwrap();
    let mut records = Vec::new();
    let opts = DemoOptions {
        dir: Some(scratch.path().join("demo")),
        operator: DemoOperator::Rules,
        ..DemoOptions::default()
    };
    demo::run(&opts, &mut |p| records.push(p.clone())).unwrap();
    let epoch = median(records.iter().map(|p| p.total).collect());

    let telemetry = Telemetry::open(
        &scratch.path().join("progress"),
        "bench",
        Some(1000),
        100,
        None,
    )
    .unwrap();
    let mut n = 0u64;
    let bookkeeping = time(2_000, || {
        let mut p = records[(n % records.len() as u64) as usize].clone();
        p.epoch = n;
        n += 1;
        telemetry.epoch_done(&p);
    });
    let scrape = time(500, || {
        std::hint::black_box(telemetry.metrics_text());
    });
    let poll = time(200, || {
        std::hint::black_box(serde_json::to_vec(&telemetry.report(None, 100)).unwrap());
    });

    println!(
        "demo: {} epochs of {} rows, median epoch {:.2} ms\n",
        records.len(),
        records[0].rows_in,
        epoch.as_secs_f64() * 1e3
    );
    println!("| work | median | share of a demo epoch |");
    println!("|---|---|---|");
    for (what, d) in [
        (
            "bookkeeping per epoch (metrics, verdict, progress file)",
            bookkeeping,
        ),
        ("one /metrics scrape", scrape),
        ("one dashboard poll (/progress, 100 records as JSON)", poll),
    ] {
        println!(
            "| {what} | {:.1} µs | {:.3}% |",
            d.as_secs_f64() * 1e6,
            100.0 * d.as_secs_f64() / epoch.as_secs_f64()
        );
    }
}
