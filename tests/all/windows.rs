//! Event-time timers and windows through real pipelines. `fraud-windows`
//! (every payment of a card's 60 s tumbling window scored with the
//! window's final count, emitted when the 10 s watermark closes it) is
//! checked epoch by epoch against an independent reference implementation
//! of Spark Structured Streaming's semantics, over generated payments with
//! out-of-order and late events; and across the final no-data epoch,
//! restarts, hot swaps, SIGKILL crashes and the real-time mode.

use crate::common::{guest, open_pipeline, sink_files};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use weir_connectors::generator::payments::{Rng, START_MS};

const CARDS: u64 = 60;
const PER_FILE: u64 = 300;
/// 300 payments per 60 s of event time: five per card and window on average.
const STEP_MS: i64 = 200;
const WINDOW_MS: i64 = 60_000;
const LATENESS_MS: i64 = 10_000;
const MAX_PAYMENTS: u64 = 5;
const HOMES: [&str; 4] = ["US", "GB", "DE", "FR"];

/// One generated payment (the fields the job reads).
#[derive(Debug, Clone)]
pub(crate) struct Pay {
    pub(crate) txn_id: String,
    pub(crate) card: String,
    pub(crate) amount: f64,
    country: String,
    home: String,
    pub(crate) ts: i64,
}

/// How far behind its place in the stream a payment's event time may be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Disorder {
    /// Up to 8 s: out of order but never late, whatever the epochs.
    Mild,
    /// Also 8–30 s (sometimes late) and 1–3 min (late).
    WithLate,
}

fn payment(i: u64, disorder: Disorder) -> Pay {
    let mut rng = Rng::new(0x57AE ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let card = rng.below(CARDS);
    let home = HOMES[(card % 4) as usize];
    let country = if rng.below(10) == 0 {
        HOMES[rng.below(4) as usize]
    } else {
        home
    };
    let amount = if rng.below(20) == 0 {
        1_000.0 + rng.below(4_000) as f64
    } else {
        5.0 + rng.below(500) as f64
    };
    let behind = match (rng.below(100), disorder) {
        (0..=59, _) => 0,
        (60..=89, _) | (_, Disorder::Mild) => rng.below(8_000) as i64,
        (90..=96, Disorder::WithLate) => 8_000 + rng.below(22_000) as i64,
        (_, Disorder::WithLate) => 60_000 + rng.below(120_000) as i64,
    };
    Pay {
        txn_id: format!("w-{i:07}"),
        card: format!("c-{card:03}"),
        amount,
        country: country.into(),
        home: home.into(),
        ts: START_MS + i as i64 * STEP_MS - behind,
    }
}

pub(crate) fn file_payments(n: u64, disorder: Disorder) -> Vec<Pay> {
    (n * PER_FILE..(n + 1) * PER_FILE)
        .map(|i| payment(i, disorder))
        .collect()
}

/// Writes input file `n` (one epoch's worth with `max_files_per_trigger = 1`).
pub(crate) fn write_file(dir: &Path, n: u64, disorder: Disorder) {
    let mut bytes = Vec::new();
    for p in file_payments(n, disorder) {
        let row = serde_json::json!({
            "txn_id": p.txn_id, "card_id": p.card, "merchant_id": "m-0001",
            "amount": p.amount, "currency": "USD", "country": p.country,
            "card_country": p.home, "ts": p.ts, "device_id": null,
        });
        bytes.extend(serde_json::to_vec(&row).unwrap());
        bytes.push(b'\n');
    }
    crate::common::write_input_file(dir, n, &bytes);
}

/// The job's config; late rows are dropped (as Spark does) or, with
/// `late = "score"`, scored on their rules alone — then with a threshold
/// of 0.4, so that one rule alone alerts.
fn config(late: &str) -> String {
    let threshold = if late == "score" { 0.4 } else { 0.7 };
    format!(
        r#"{{ alert_threshold = {threshold}, late = "{late}", rules = [
  {{ rule = "amount_above", threshold = 1000.0, weight = 0.5 }},
  {{ rule = "country_mismatch", weight = 0.4 }} ],
  velocity = {{ window_ms = {WINDOW_MS}, max_payments = {MAX_PAYMENTS}, weight = 0.7 }} }}"#
    )
}

/// The pipeline: files (one per epoch) → `fraud-windows` → files.
fn pipeline(dir: &Path, late: &str, trigger: &str) -> String {
    crate::common::pipeline_toml(dir, &guest("fraud_windows"), &config(late), "", "")
        .replace("mode = \"available-now\"", trigger)
        + "[event_time]\ncolumn = \"ts\"\nallowed_lateness = \"10s\"\n"
}

/// An alert as compared: score to 1e-9, reasons, window count and start.
type Alert = (String, String, Option<u64>, Option<i64>);

/// Spark Structured Streaming's semantics for the job, written plainly
/// from its documentation (a window aggregation in append mode with
/// `withWatermark("ts", "10 seconds")`), independent of the SDK:
/// - the watermark of batch N is the maximum event time of batches before
///   N minus 10 s (none in batch 0), and never goes back;
/// - a row is dropped as late when its window ended at or before the
///   watermark of the batch before (Spark ≥ 3.4's late-event watermark);
/// - a window `[start, start + 60 s)` is emitted, final, by the batch
///   whose watermark is at or past its end;
/// - after the last batch of a run, one batch without data runs if the
///   watermark moved and closes a window (Spark's no-data batch).
///
struct Reference {
    late_scored: bool,
    max_ts: Option<i64>,
    watermark: Option<i64>,
    open: BTreeMap<(String, i64), Vec<Pay>>,
    out: Vec<BTreeMap<String, Alert>>,
}

impl Reference {
    fn new(late_scored: bool) -> Self {
        Reference {
            late_scored,
            max_ts: None,
            watermark: None,
            open: BTreeMap::new(),
            out: Vec::new(),
        }
    }

    fn rules(p: &Pay) -> (f64, Vec<&'static str>) {
        let mut fired = Vec::new();
        let mut score = 0.0;
        if p.amount > 1_000.0 {
            score += 0.5;
            fired.push("amount_above");
        }
        if p.country != p.home {
            score += 0.4;
            fired.push("country_mismatch");
        }
        (score, fired)
    }

    fn alert(&self, p: &Pay, window: Option<(u64, i64)>) -> Option<Alert> {
        let threshold = if self.late_scored { 0.4 } else { 0.7 };
        let (mut score, mut reasons) = Self::rules(p);
        if window.is_some_and(|(count, _)| count > MAX_PAYMENTS) {
            score += 0.7;
            reasons.push("velocity");
        }
        (!reasons.is_empty() && score >= threshold).then(|| {
            (
                format!("{score:.9}"),
                reasons.join(","),
                window.map(|w| w.0),
                window.map(|w| w.1),
            )
        })
    }

    /// One batch: `rows` (none for a no-data batch).
    fn batch(&mut self, rows: &[Pay]) {
        let late_mark = self.watermark;
        let mark = self.max_ts.map(|m| m - LATENESS_MS).max(self.watermark);
        let mut alerts = BTreeMap::new();
        for p in rows {
            let start = p.ts.div_euclid(WINDOW_MS) * WINDOW_MS;
            if late_mark.is_some_and(|w| start + WINDOW_MS <= w) {
                if self.late_scored {
                    if let Some(a) = self.alert(p, None) {
                        alerts.insert(p.txn_id.clone(), a);
                    }
                }
                continue;
            }
            self.open
                .entry((p.card.clone(), start))
                .or_default()
                .push(p.clone());
        }
        let closed: Vec<_> = self
            .open
            .keys()
            .filter(|(_, start)| mark.is_some_and(|m| start + WINDOW_MS <= m))
            .cloned()
            .collect();
        for key in closed {
            let rows = self.open.remove(&key).unwrap();
            for p in &rows {
                if let Some(a) = self.alert(p, Some((rows.len() as u64, key.1))) {
                    alerts.insert(p.txn_id.clone(), a);
                }
            }
        }
        self.watermark = mark;
        self.max_ts = rows.iter().map(|p| p.ts).max().max(self.max_ts);
        self.out.push(alerts);
    }

    /// The end of a run: a no-data batch if the watermark would move and
    /// close a window.
    fn end_of_run(&mut self) {
        let next = self.max_ts.map(|m| m - LATENESS_MS);
        let moves = next > self.watermark;
        let closes = self
            .open
            .keys()
            .any(|(_, start)| next.is_some_and(|m| start + WINDOW_MS <= m));
        if moves && closes {
            self.batch(&[]);
        }
    }
}

/// The reference's alerts per epoch for runs that end after input files
/// `run_ends` (`[6, 12]`: files 0..6, a restart, files 6..12).
fn expected(
    run_ends: &[u64],
    disorder: Disorder,
    late_scored: bool,
) -> Vec<BTreeMap<String, Alert>> {
    let mut r = Reference::new(late_scored);
    let mut first = 0;
    for &end in run_ends {
        for n in first..end {
            r.batch(&file_payments(n, disorder));
        }
        r.end_of_run();
        first = end;
    }
    r.out
}

/// What the sink holds, per epoch (files `epoch-N.jsonl` or, in real-time
/// mode, `epoch-N-part-I.jsonl`; none if empty).
fn actual(dir: &Path) -> BTreeMap<u64, BTreeMap<String, Alert>> {
    let mut out = BTreeMap::new();
    for (name, bytes) in sink_files(&dir.join("out")) {
        let digits = name.trim_start_matches("epoch-");
        let epoch: u64 = digits[..digits.find(['-', '.']).unwrap()].parse().unwrap();
        let alerts: &mut BTreeMap<String, Alert> = out.entry(epoch).or_default();
        for line in String::from_utf8(bytes).unwrap().lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            let txn = v["txn_id"].as_str().unwrap().to_string();
            let alert = (
                format!("{:.9}", v["score"].as_f64().unwrap()),
                v["reasons"].as_str().unwrap().to_string(),
                v["window_count"].as_u64(),
                v["window_start"].as_i64(),
            );
            assert!(alerts.insert(txn.clone(), alert).is_none(), "{txn} twice");
        }
    }
    out
}

/// Compares the sink with the reference epoch by epoch.
fn assert_matches(dir: &Path, expected: &[BTreeMap<String, Alert>]) {
    let actual = actual(dir);
    let total: usize = expected.iter().map(|e| e.len()).sum();
    assert!(total > 200, "the data raise alerts ({total})");
    for (epoch, want) in expected.iter().enumerate() {
        let got = actual.get(&(epoch as u64)).cloned().unwrap_or_default();
        if &got != want {
            let missing: Vec<_> = want
                .keys()
                .filter(|k| !got.contains_key(*k))
                .take(5)
                .collect();
            let extra: Vec<_> = got
                .keys()
                .filter(|k| !want.contains_key(*k))
                .take(5)
                .collect();
            let differ: Vec<_> = want
                .iter()
                .filter(|(k, v)| got.get(*k).is_some_and(|g| g != *v))
                .take(3)
                .map(|(k, v)| (k, v, &got[k]))
                .collect();
            panic!(
                "epoch {epoch}: {} alerts, the reference has {}; missing {missing:?}, \
                 extra {extra:?}, different {differ:?}",
                got.len(),
                want.len()
            );
        }
    }
    let last = actual.keys().next_back().copied().unwrap_or(0);
    assert!(
        last < expected.len() as u64,
        "output for epoch {last}, past the reference"
    );
}

fn run(dir: &Path, toml: &str) -> Vec<weir_core::progress::EpochProgress> {
    crate::common::run_epochs(dir, toml).unwrap()
}

#[test]
fn alerts_equal_a_reference_implementation_of_spark_semantics() {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..16 {
        write_file(dir.path(), n, Disorder::WithLate);
    }
    let epochs = run(
        dir.path(),
        &pipeline(dir.path(), "drop", "mode = \"available-now\""),
    );
    let want = expected(&[16], Disorder::WithLate, false);
    assert_eq!(
        epochs.len(),
        want.len(),
        "16 data epochs and a final no-data one"
    );
    assert_matches(dir.path(), &want);
    // The final epoch had no input: only the watermark closed its windows.
    let last = epochs.last().unwrap();
    assert_eq!(last.rows_in, 0);
    assert!(
        last.rows_out > 0,
        "the no-data epoch emitted the last windows"
    );
    let entry: Value = serde_json::from_slice(
        &std::fs::read(
            dir.path()
                .join(format!("checkpoint/offsets/{}", last.epoch)),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(entry["no_data"], true, "{entry}");
    // Late rows were counted by the host, as every epoch's are.
    let late: u64 = epochs.iter().map(|e| e.late_rows).sum();
    assert!(late > 0, "the data had late rows");
}

#[test]
fn late_rows_can_be_scored_on_the_rules_alone() {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..8 {
        write_file(dir.path(), n, Disorder::WithLate);
    }
    run(
        dir.path(),
        &pipeline(dir.path(), "score", "mode = \"available-now\""),
    );
    let want = expected(&[8], Disorder::WithLate, true);
    let late_alerts = want
        .iter()
        .flat_map(|e| e.values())
        .filter(|a| a.2.is_none())
        .count();
    let late: usize = (0..8)
        .map(|n| file_payments(n, Disorder::WithLate).len())
        .sum();
    eprintln!("DEBUG late alerts {late_alerts} of {late}");
    assert!(late_alerts > 0, "some late payments alert on their rules");
    assert_matches(dir.path(), &want);
}

#[test]
fn a_window_closed_only_by_the_end_of_input_is_emitted() {
    // Two epochs of input, each 60 s of event time: the watermark of the
    // second (end of the first minute − 10 s) closes no window, so only the
    // no-data epoch after the input's end emits the first minute's.
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), 0, Disorder::Mild);
    write_file(dir.path(), 1, Disorder::Mild);
    let toml = pipeline(dir.path(), "drop", "mode = \"available-now\"");
    let epochs = run(dir.path(), &toml);
    assert_eq!(epochs.len(), 3);
    assert_eq!(
        epochs[0].rows_out + epochs[1].rows_out,
        0,
        "nothing closed yet"
    );
    assert_eq!(epochs[2].rows_in, 0);
    assert!(
        epochs[2].rows_out > 0,
        "the no-data epoch closed the first minute"
    );
    assert!(epochs[2].range.contains("no data"), "{}", epochs[2].range);
    assert_matches_loosely(dir.path(), &expected(&[2], Disorder::Mild, false));
}

/// `weir explain` of a window's alert, in the epoch that emitted it, finds
/// the payment in the earlier epoch that read it; explaining that earlier
/// epoch says the row was held in state and names the epoch that emitted it.
#[test]
fn explain_follows_a_windowed_alert_back_to_its_input_and_forward_to_its_close() {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..4 {
        write_file(dir.path(), n, Disorder::Mild);
    }
    let toml = pipeline(dir.path(), "drop", "mode = \"available-now\"");
    run(dir.path(), &toml);
    let pipeline_file = dir.path().join("pipeline.toml");
    std::fs::write(&pipeline_file, &toml).unwrap();
    let (emitted, txn) = actual(dir.path())
        .into_iter()
        .find_map(|(epoch, alerts)| Some((epoch, alerts.into_keys().next()?)))
        .expect("an alert");
    let explain = |epoch: u64, text: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_weir"));
        cmd.args(["explain", "-p"])
            .arg(&pipeline_file)
            .args(["--epoch", &epoch.to_string(), "--txn", &txn])
            .env("WEIR_CACHE_DIR", dir.path().join("cache"))
            .env("WEIR_LOG", "warn");
        if !text {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };

    let report: Value = serde_json::from_str(&explain(emitted, false)).unwrap();
    assert_eq!(report["input"]["txn_id"], txn.as_str(), "{report}");
    let read = report["input_epoch"].as_u64().unwrap();
    assert!(read < emitted, "read in {read}, emitted in {emitted}");
    assert_eq!(report["outputs"]["default"][0]["txn_id"], txn.as_str());
    assert_eq!(report["score"]["identical"], true, "{report}");
    let text = explain(emitted, true);
    assert!(
        text.contains(&format!(
            "input  read in epoch {read} and held in the operator's state"
        )),
        "{text}"
    );

    let earlier: Value = serde_json::from_str(&explain(read, false)).unwrap();
    assert_eq!(earlier["input_epoch"], read);
    let outputs = earlier["outputs"].as_object().unwrap();
    assert!(outputs
        .values()
        .all(|rows| rows.as_array().unwrap().is_empty()));
    assert_eq!(earlier["emitted_in"]["epoch"], emitted, "{earlier}");
    assert_eq!(
        earlier["emitted_in"]["rows"]["default"][0]["txn_id"],
        txn.as_str()
    );
    let text = explain(read, true);
    assert!(
        text.contains(&format!("held it in state, and epoch {emitted} emitted it")),
        "{text}"
    );
}

/// Like [`assert_matches`], for inputs too small for its alert count.
fn assert_matches_loosely(dir: &Path, expected: &[BTreeMap<String, Alert>]) {
    let actual = actual(dir);
    for (epoch, want) in expected.iter().enumerate() {
        let got = actual.get(&(epoch as u64)).cloned().unwrap_or_default();
        assert_eq!(&got, want, "epoch {epoch}");
    }
}

#[test]
fn timers_survive_restarts_and_hot_swaps() {
    use weir_engine::versions::registry::Origin;
    use weir_engine::versions::{Then, Upload};
    let dir = tempfile::tempdir().unwrap();
    let toml = pipeline(dir.path(), "drop", "mode = \"available-now\"");
    for n in 0..6 {
        write_file(dir.path(), n, Disorder::WithLate);
    }
    // Run 1, with a hot swap to another build of the operator after epoch 2:
    // windows opened by version 1 are closed by version 2's timers.
    let wasm = std::fs::read(guest("fraud_windows")).unwrap();
    let host = weir_host::WasmHost::new(None).unwrap();
    let mut p = open_pipeline(dir.path(), &toml, &host).unwrap();
    let control = p.control();
    let mut versions = Vec::new();
    p.run(&host, &AtomicBool::new(false), &mut |e| {
        versions.push(e.operator_version);
        if e.epoch == 2 {
            control
                .upload(
                    Upload {
                        wasm: crate::common::variant(&wasm, "v2"),
                        config_json: None,
                        artifacts: Default::default(),
                        golden: None,
                        label: Some("v2".into()),
                        origin: Origin::Upload { file_name: None },
                    },
                    Then::Activate,
                    &weir_engine::versions::registry::Actor::named("test"),
                )
                .unwrap();
        }
    })
    .unwrap();
    drop((p, control));
    let distinct: BTreeSet<_> = versions.iter().collect();
    assert_eq!(distinct.len(), 2, "the swap took effect: {versions:?}");
    // Run 2, after a restart, on more input: timers set in run 1 fire.
    for n in 6..12 {
        write_file(dir.path(), n, Disorder::WithLate);
    }
    run(dir.path(), &toml);
    assert_matches(dir.path(), &expected(&[6, 12], Disorder::WithLate, false));
}

#[test]
fn timers_fire_exactly_once_across_sigkill_crashes() {
    let setup = |dir: &Path, _run: &str| {
        for n in 0..crate::common::crash_epochs(40) {
            write_file(dir, n, Disorder::WithLate);
        }
        let toml = pipeline(dir, "drop", "mode = \"available-now\"")
            + "[state]\nsnapshot_every = 3\n[wal]\ncompact_every = 5\nretain = 2\n";
        let file = dir.join("pipeline.toml");
        std::fs::write(&file, toml).unwrap();
        file
    };
    let (clean, crashy) =
        crate::common::uninterrupted_and_killed(setup, crate::common::crash_kills());
    assert_eq!(
        sink_files(&crashy.path().join("out")),
        sink_files(&clean.path().join("out")),
        "the output of an uninterrupted run"
    );
    assert_eq!(
        crate::state::state_dump(crashy.path()),
        crate::state::state_dump(clean.path()),
        "the state (windows, lists and timers) of an uninterrupted run"
    );
    assert_matches(
        clean.path(),
        &expected(
            &[crate::common::crash_epochs(40)],
            Disorder::WithLate,
            false,
        ),
    );
}

#[test]
fn real_time_epochs_fire_timers_at_their_close() {
    // Mild disorder: no payment is late however the epochs fall, so every
    // window closes with its full count and the alerts are those of the
    // reference, whatever epoch each lands in.
    let dir = tempfile::tempdir().unwrap();
    for n in 0..6 {
        write_file(dir.path(), n, Disorder::Mild);
    }
    let want: BTreeMap<String, Alert> = expected(&[6], Disorder::Mild, false)
        .into_iter()
        .flatten()
        .collect();
    assert!(want.len() > 100, "{} alerts", want.len());
    // A files source never runs dry in real-time mode (more files may
    // come): stop once every alert is out, or fail after a minute's epochs.
    let trigger = "mode = \"real-time\"\ncheckpoint_interval = \"100ms\"";
    let host = weir_host::WasmHost::new(None).unwrap();
    let toml = pipeline(dir.path(), "drop", trigger);
    let mut p = open_pipeline(dir.path(), &toml, &host).unwrap();
    let stop = AtomicBool::new(false);
    let (mut epochs, mut rows_out) = (0, 0);
    p.run(&host, &stop, &mut |e| {
        epochs += 1;
        rows_out += e.rows_out;
        assert!(epochs < 600, "only {rows_out} alerts after {epochs} epochs");
        if rows_out >= want.len() as u64 {
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    })
    .unwrap();
    assert!(epochs > 1, "{epochs} epochs");
    let got: BTreeMap<String, Alert> = actual(dir.path()).into_values().flatten().collect();
    assert_eq!(got, want);
}

#[test]
fn operator_test_runs_one_epoch_per_input_as_a_pipeline_does() {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..6 {
        write_file(dir.path(), n, Disorder::WithLate);
    }
    let toml = dir.path().join("pipeline.toml");
    let text = pipeline(dir.path(), "drop", "mode = \"available-now\"");
    std::fs::write(&toml, text).unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_weir"));
    cmd.args(["operator", "test"])
        .arg(guest("fraud_windows"))
        .arg("--pipeline")
        .arg(&toml);
    for n in 0..6 {
        cmd.arg("--input")
            .arg(dir.path().join(format!("input/payments-{n:04}.jsonl")));
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("# epoch 0: 300 rows in"), "{stderr}");
    assert!(
        stderr.contains("# epoch 6 (no data): 0 rows in"),
        "{stderr}"
    );
    let mut got = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let first_key = line.split('"').nth(1);
        assert_eq!(first_key, Some("txn_id"), "columns in the operator's order");
        got.insert(
            v["txn_id"].as_str().unwrap().to_string(),
            (
                format!("{:.9}", v["score"].as_f64().unwrap()),
                v["reasons"].as_str().unwrap().to_string(),
                v["window_count"].as_u64(),
                v["window_start"].as_i64(),
            ),
        );
    }
    let want: BTreeMap<String, Alert> = expected(&[6], Disorder::WithLate, false)
        .into_iter()
        .flatten()
        .collect();
    assert!(want.len() > 50, "the data raise alerts ({})", want.len());
    assert_eq!(got, want);
}

/// An operator that sets event-time timers in a pipeline without
/// `[event_time]` is named in an error saying what to add: its timers could
/// never fire, its windows never close and its state only grow.
#[test]
fn timers_without_event_time_are_an_error_saying_what_to_add() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), 0, Disorder::Mild);
    let toml =
        crate::common::pipeline_toml(dir.path(), &guest("fraud_windows"), &config("drop"), "", "");
    assert!(!toml.contains("[event_time]"));
    let file = dir.path().join("pipeline.toml");
    std::fs::write(&file, toml).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = crate::common::weir_run_quiet(&file, cache.path())
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let text = crate::common::output_text(&out);
    assert!(text.contains("sets event-time timers"), "{text}");
    assert!(text.contains("[event_time]"), "{text}");
    assert_eq!(
        text.matches("sets event-time timers").count(),
        1,
        "once: {text}"
    );
}
