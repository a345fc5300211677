//! Real-time mode: records reach the operator as they arrive and its output
//! reaches the sink part by part; the alerts are those of micro-batch mode
//! over the same input, and a SIGKILL at any moment loses and duplicates
//! nothing (the part log replays exactly the parts that were delivered).

use crate::common::{guest, run_epochs, uninterrupted_and_killed, weir_run_quiet, VELOCITY_CONFIG};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Payments in each run (but the live one).
const ROWS: u64 = 30_000;

/// A generator → `fraud-velocity` → files pipeline in `dir`.
/// `start_ms` fixes the payments' event times (all due at once);
/// without it they are generated live at `rate` per second.
fn pipeline(dir: &Path, trigger: &str, rate: u64, start_ms: Option<i64>, per_part: u64) -> String {
    pipeline_of(dir, trigger, rate, start_ms, per_part, ROWS)
}

fn pipeline_of(
    dir: &Path,
    trigger: &str,
    rate: u64,
    start_ms: Option<i64>,
    per_part: u64,
    rows: u64,
) -> String {
    let start = start_ms.map_or(String::new(), |ms| format!("start_ms = {ms}"));
    format!(
        r#"name = "test"
checkpoint = "{dir}/checkpoint"
batch_rows = 1000
[trigger]
{trigger}
[source]
kind = "generator"
rate = {rate}
seed = 5
rows = {rows}
max_rows_per_trigger = {per_part}
{start}
[operator]
path = "{op}"
config = {VELOCITY_CONFIG}
[sink]
kind = "files"
path = "{dir}/out"
"#,
        dir = dir.display(),
        op = guest("fraud_velocity").display(),
    )
}

/// Every alert the sink holds, one JSON object per line, with its event
/// time left out when `drop_ts` (live runs generate at different times).
fn alerts(out: &Path, drop_ts: bool) -> Vec<String> {
    let mut rows = Vec::new();
    for (_, bytes) in crate::common::sink_files(out) {
        for line in String::from_utf8(bytes).unwrap().lines() {
            let mut v: Value = serde_json::from_str(line).unwrap();
            if drop_ts {
                v.as_object_mut().unwrap().remove("ts");
            }
            rows.push(v.to_string());
        }
    }
    rows.sort();
    rows
}

fn part_files(out: &Path) -> usize {
    crate::common::sink_files(out)
        .iter()
        .filter(|(name, _)| name.contains("-part-"))
        .count()
}

#[test]
fn real_time_emits_the_alerts_of_micro_batch_over_the_same_input() {
    const START: i64 = weir_cli::demo::generator::START_MS;
    let batch = tempfile::tempdir().unwrap();
    let epochs = run_epochs(
        batch.path(),
        &pipeline(
            batch.path(),
            "mode = \"available-now\"",
            1_000,
            Some(START),
            4_000,
        ),
    )
    .unwrap();
    assert!(epochs.len() >= 8, "{} epochs", epochs.len());
    let expected = alerts(&batch.path().join("out"), false);
    assert!(expected.len() > 100, "{} alerts", expected.len());

    let live = tempfile::tempdir().unwrap();
    let trigger = "mode = \"real-time\"\ncheckpoint_interval = \"100ms\"";
    let epochs = run_epochs(
        live.path(),
        &pipeline(live.path(), trigger, 1_000, Some(START), 700),
    )
    .unwrap();
    let rows_in: u64 = epochs.iter().map(|e| e.rows_in).sum();
    assert_eq!(rows_in, ROWS, "every payment, once");
    let out = live.path().join("out");
    assert_eq!(alerts(&out, false), expected);
    assert!(part_files(&out) > 10, "output went out part by part");
    let rows_out: u64 = epochs.iter().map(|e| e.rows_out).sum();
    assert_eq!(rows_out, expected.len() as u64);
}

#[test]
fn payments_generated_live_are_scored_as_they_arrive() {
    let dir = tempfile::tempdir().unwrap();
    let trigger = "mode = \"real-time\"\ncheckpoint_interval = \"200ms\"";
    // 6,000 payments at 4,000/s: 1.5 s of live generation, slow enough
    // for a debug build on a busy machine to keep up.
    let toml = pipeline_of(dir.path(), trigger, 4_000, None, 100_000, 6_000)
        + "[event_time]\ncolumn = \"ts\"\nallowed_lateness = \"10s\"\n";
    let epochs = run_epochs(dir.path(), &toml).unwrap();
    assert_eq!(epochs.iter().map(|e| e.rows_in).sum::<u64>(), 6_000);
    assert!(
        epochs.len() >= 5,
        "{} epochs for 1.5 s at 200 ms",
        epochs.len()
    );
    let parts: usize = epochs
        .iter()
        .map(|e| e.source["parts"].as_u64().unwrap() as usize)
        .sum();
    assert!(parts > 20, "{parts} parts: records were taken as they came");

    let alerts = alerts(&dir.path().join("out"), false).len() as u64;
    assert_eq!(epochs.iter().map(|e| e.rows_out).sum::<u64>(), alerts);
    assert!(alerts > 0);

    // Every alert's event→emit latency is in its epoch's record.
    for e in epochs.iter().filter(|e| e.rows_out > 0) {
        let l = e.latency.expect("latency of an epoch with output");
        assert_eq!(l.rows, e.rows_out, "epoch {}", e.epoch);
        assert!(l.p50_ms <= l.p99_ms && l.p99_ms <= l.max_ms, "{l:?}");
        assert!(l.max_ms < 60_000.0, "{l:?}");
    }
    assert!(epochs.iter().all(|e| e.late_rows == 0));
}

#[test]
fn sigkill_in_real_time_mode_loses_and_duplicates_nothing() {
    let setup = |dir: &Path, _: &str| -> PathBuf {
        // Live generation paces the run (10 s at 3,000/s) so kills land in
        // every phase; event times differ between runs and are left out.
        let trigger = "mode = \"real-time\"\ncheckpoint_interval = \"100ms\"";
        let path = dir.join("pipeline.toml");
        std::fs::write(&path, pipeline(dir, trigger, 3_000, None, 100_000)).unwrap();
        path
    };
    let (clean, crashy) = uninterrupted_and_killed(setup, crate::common::crash_kills());
    let expected = alerts(&clean.path().join("out"), true);
    let got = alerts(&crashy.path().join("out"), true);
    let distinct: BTreeSet<&String> = got.iter().collect();
    assert_eq!(got.len(), distinct.len(), "an alert was delivered twice");
    assert_eq!(got, expected);
    // A finished run has nothing left: starting it again changes nothing.
    let cache = tempfile::tempdir().unwrap();
    let status = weir_run_quiet(&crashy.path().join("pipeline.toml"), cache.path())
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(alerts(&crashy.path().join("out"), true), expected);
}

#[test]
fn sigkill_in_real_time_mode_leaves_the_postgres_table_of_an_uninterrupted_run() {
    let pg = crate::common::pg::PgServer::start();
    let setup = |dir: &Path, run: &str| -> PathBuf {
        let trigger = "mode = \"real-time\"\ncheckpoint_interval = \"100ms\"";
        let files_sink = format!("kind = \"files\"\npath = \"{}/out\"", dir.display());
        let toml = pipeline(dir, trigger, 3_000, None, 100_000).replace(
            &files_sink,
            &format!(
                "kind = \"postgres\"\nurl = \"{}\"\ntable = \"alerts_{run}\"",
                pg.url("postgres")
            ),
        );
        assert!(toml.contains("kind = \"postgres\""));
        let path = dir.join("pipeline.toml");
        std::fs::write(&path, toml).unwrap();
        path
    };
    uninterrupted_and_killed(setup, crate::common::crash_kills());
    let counts = |t: &str| pg.rows(&format!("SELECT count(*), count(DISTINCT txn_id) FROM {t}"));
    let clean = counts("alerts_clean");
    assert_eq!(
        counts("alerts_crashy"),
        clean,
        "count = distinct = the uninterrupted run's"
    );
    let (n, distinct) = clean[0]
        .trim_matches(|c| c == '(' || c == ')')
        .split_once(',')
        .unwrap();
    assert_eq!(n, distinct);
    assert!(n.parse::<u64>().unwrap() > 0);
    // The same payments alerted on (event times differ between live runs).
    let ids = |t: &str| pg.rows(&format!("SELECT txn_id FROM {t} ORDER BY txn_id"));
    assert!(
        ids("alerts_crashy") == ids("alerts_clean"),
        "other payments alerted on"
    );
}
