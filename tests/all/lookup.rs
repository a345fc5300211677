//! Reference tables: `[[lookup]]` tables the host loads,
//! versions by content and records per epoch in `offsets/N`; `card-home`
//! reads the `cards` table through `weir_sdk::lookup` and reports the
//! version it read in every row.

use crate::common::{guest, sink_files, wait_for, write_payments, Background};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

const SEED: u64 = 5;
const PER_FILE: u64 = 500;

/// The pipeline over `dir/input` with the `cards` table at `dir/cards.jsonl`.
fn pipeline(dir: &Path, trigger: &str) -> String {
    pipeline_from(dir, trigger, "path = \"cards.jsonl\"")
}

/// The artifact `notes` every card-home run carries (`dir/notes.txt`).
const NOTES: &[u8] = b"cards: home countries for the lookup tests\n";

/// The pipeline over `dir/input` with the `cards` table from `source`.
fn pipeline_from(dir: &Path, trigger: &str, source: &str) -> String {
    std::fs::write(dir.join("notes.txt"), NOTES).unwrap();
    format!(
        r#"name = "lookups"
checkpoint = "{dir}/checkpoint"
[trigger]
{trigger}
[source]
kind = "files"
path = "{dir}/input"
max_files_per_trigger = 1
{schema}
[operator]
path = "{op}"
artifacts = {{ notes = "{dir}/notes.txt" }}
[sink]
kind = "files"
path = "{dir}/out"
[[lookup]]
name = "cards"
key = "card_id"
{source}
schema = [ {{ name = "card_id", type = "utf8" }}, {{ name = "home_country", type = "utf8", nullable = true }} ]
refresh = "10ms"
"#,
        dir = dir.display(),
        op = guest("card_home").display(),
        schema = weir_connectors::generator::payments::SCHEMA_TOML,
    )
}

/// Every card of the first `files` input files.
fn cards(files: u64) -> BTreeSet<String> {
    let lines = weir_connectors::generator::payments::json_lines(SEED, 0, files * PER_FILE);
    String::from_utf8(lines)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["card_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// Every card of the first `files` input files, at home in `country`;
/// `repeat` adds a second row for the first card (bad data).
fn write_cards(dir: &Path, files: u64, country: &str, repeat: bool) {
    let cards = cards(files);
    let mut text: String = cards
        .iter()
        .map(|c| format!("{{\"card_id\":\"{c}\",\"home_country\":\"{country}\"}}\n"))
        .collect();
    if repeat {
        text += &format!(
            "{{\"card_id\":\"{}\",\"home_country\":\"XX\"}}\n",
            cards.first().unwrap()
        );
    }
    // Whole or not at all: the running pipeline refreshes every 10 ms.
    std::fs::write(dir.join("cards.jsonl.tmp"), text).unwrap();
    std::fs::rename(dir.join("cards.jsonl.tmp"), dir.join("cards.jsonl")).unwrap();
}

/// Each epoch's rows' home countries and table versions (its tasks' files
/// together), by epoch.
type Seen = (BTreeSet<String>, BTreeSet<String>);

fn epochs(out: &Path) -> Vec<Seen> {
    let mut by_epoch = std::collections::BTreeMap::<String, Seen>::new();
    for (name, bytes) in sink_files(out) {
        let seen = by_epoch.entry(name[..16].to_string()).or_default();
        for line in String::from_utf8(bytes).unwrap().lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            seen.0
                .insert(v["home_country"].as_str().unwrap_or("-").to_string());
            seen.1
                .insert(v["cards_version"].as_str().unwrap().to_string());
        }
    }
    by_epoch.into_values().collect()
}

/// An epoch's output files' bytes, its tasks' together.
fn epoch_bytes(out: &Path, epoch: u64) -> Vec<(String, Vec<u8>)> {
    let prefix = format!("epoch-{epoch:010}");
    sink_files(out)
        .into_iter()
        .filter(|(n, _)| n.starts_with(&prefix))
        .collect()
}

/// Progress record `epoch` of the checkpoint at `ck`.
fn progress(ck: &Path, epoch: u64) -> Value {
    serde_json::from_slice(&std::fs::read(ck.join(format!("progress/{epoch:010}.json"))).unwrap())
        .unwrap()
}

/// Writes input file `n` into `dir` and waits until the running pipeline
/// committed it.
fn feed(dir: &Path, n: u64) {
    write_payments(dir, SEED, n, n * PER_FILE..(n + 1) * PER_FILE);
    let ck = dir.join("checkpoint");
    wait_for("the file's epoch", || {
        crate::common::committed_rows(&ck) >= (n + 1) * PER_FILE
    });
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_refresh_takes_effect_at_the_next_epoch_and_a_replay_reads_its_own_version() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_cards(d, 3, "DE", false);
    std::fs::create_dir_all(d.join("input")).unwrap();
    let run = Background::start(
        d,
        pipeline(d, "mode = \"processing-time\"\ninterval = \"20ms\""),
    );
    let ck = d.join("checkpoint");
    let feed = |n: u64| feed(d, n);
    feed(0);
    // A bad version (a repeated key) is refused: epoch 1 reads the one before.
    write_cards(d, 3, "DE", true);
    std::thread::sleep(std::time::Duration::from_millis(50));
    feed(1);
    // A good one takes effect at the next epoch.
    write_cards(d, 3, "FR", false);
    std::thread::sleep(std::time::Duration::from_millis(50));
    feed(2);
    run.stop().unwrap();

    let seen = epochs(&d.join("out"));
    assert_eq!(seen.len(), 3, "{seen:?}");
    let (v1, v2) = (seen[0].1.clone(), seen[2].1.clone());
    assert_eq!(v1.len(), 1, "one version per epoch");
    assert_ne!(v1, v2, "the refresh is a new version");
    assert_eq!(seen[0], (set(&["DE"]), v1.clone()));
    assert_eq!(seen[1], (set(&["DE"]), v1), "the bad version was not used");
    assert_eq!(seen[2], (set(&["FR"]), v2.clone()));
    let failures = |e| {
        progress(&ck, e)["lookup_refresh_failures"]
            .as_u64()
            .unwrap_or(0)
    };
    assert_eq!(
        (failures(0), failures(1), failures(2)),
        (0, 1, 0),
        "the bad version is counted once, while epoch 1 is planned"
    );
    // And recorded once in the audit trail, by the engine.
    let trail = weir_engine::versions::registry::audit_trail(&ck).unwrap();
    let failed: Vec<_> = trail
        .iter()
        .filter(|e| e.action == "lookup-refresh-failed")
        .collect();
    assert_eq!(failed.len(), 1, "{trail:?}");
    assert_eq!(failed[0].by.as_ref().unwrap().name, "engine");
    let note = failed[0].note.as_deref().unwrap();
    assert!(
        note.contains("lookup `cards` keeps version sha256:"),
        "{note}"
    );
    assert_eq!(
        progress(&ck, 2)["lookups"]["cards"].as_str(),
        v2.first().map(String::as_str),
        "the progress record names the version read"
    );
    let recorded: Value =
        serde_json::from_slice(&std::fs::read(ck.join("offsets/2")).unwrap()).unwrap();
    assert_eq!(
        format!("{{{:?}}}", recorded["lookups"]["cards"].as_str().unwrap()),
        format!("{v2:?}"),
        "offsets/2 records the version epoch 2 read"
    );

    // Epoch 2 again after yet another version, as a crash before its
    // commit leaves it: it reads the version its offsets/2 records.
    let before = epoch_bytes(&d.join("out"), 2);
    write_cards(d, 3, "IT", false);
    std::fs::remove_file(ck.join("commits/2")).unwrap();
    crate::common::run_epochs(d, &pipeline(d, "mode = \"available-now\"")).unwrap();
    assert!(ck.join("commits/2").exists(), "epoch 2 ran again");
    assert_eq!(
        epoch_bytes(&d.join("out"), 2),
        before,
        "the replay read the version it was planned with"
    );
}

#[test]
fn bad_reference_data_at_start_names_the_table_and_row() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_cards(d, 1, "DE", true);
    write_payments(d, SEED, 0, 0..PER_FILE);
    let err = format!(
        "{:#}",
        crate::common::run_epochs(d, &pipeline(d, "mode = \"available-now\"")).unwrap_err()
    );
    assert!(
        err.contains("loading lookup table `cards`") && err.contains("repeats row 1"),
        "{err}"
    );
    std::fs::write(
        d.join("cards.jsonl"),
        "{\"card_id\":\"c-1\",\"home_country\":7}\n",
    )
    .unwrap();
    let err = format!(
        "{:#}",
        crate::common::run_epochs(d, &pipeline(d, "mode = \"available-now\"")).unwrap_err()
    );
    assert!(
        err.contains("cards.jsonl") && err.contains("line 1"),
        "{err}"
    );
}

/// A table from a PostgreSQL query: a changed table is a new version at the
/// next epoch; with the server gone, a refresh fails and epochs keep reading
/// the version before.
#[test]
#[ignore = "needs PostgreSQL"]
fn a_table_from_a_query_follows_the_database_and_outlives_an_outage() {
    let mut pg = crate::common::pg::PgServer::start();
    pg.execute("CREATE TABLE cards (card_id text PRIMARY KEY, home_country text)");
    for card in cards(3) {
        pg.execute(&format!("INSERT INTO cards VALUES ('{card}', 'DE')"));
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("input")).unwrap();
    let source = format!(
        "query = \"SELECT card_id, home_country FROM cards\"\nurl = \"{}\"",
        pg.url("postgres")
    );
    let trigger = "mode = \"processing-time\"\ninterval = \"20ms\"";
    let run = Background::start(d, pipeline_from(d, trigger, &source));
    let ck = d.join("checkpoint");
    let feed = |n: u64| feed(d, n);
    feed(0);
    pg.execute("UPDATE cards SET home_country = 'FR'");
    std::thread::sleep(std::time::Duration::from_millis(50));
    feed(1);
    pg.stop_immediately();
    std::thread::sleep(std::time::Duration::from_millis(50));
    feed(2);
    run.stop().unwrap();

    let seen = epochs(&d.join("out"));
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen[0].0, set(&["DE"]));
    assert_eq!(
        seen[1].0,
        set(&["FR"]),
        "the changed table, from the next epoch"
    );
    assert_ne!(seen[0].1, seen[1].1);
    assert_eq!(seen[2], seen[1], "the server gone: the version before");
    assert!(
        progress(&ck, 2)["lookup_refresh_failures"].as_u64() >= Some(1),
        "the failed refresh is counted"
    );
}

/// The Python and JavaScript SDKs' helpers read the same rows as Rust's:
/// `card-home` in three languages over the same payments and table (some
/// cards missing from it) gives the same output, row for row.
#[test]
#[ignore = "needs componentize-py/js"]
fn python_and_javascript_operators_read_the_table_as_the_rust_one() {
    let host = crate::polyglot::polyglot_host();
    let run = |operator: &Path| {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write_cards(d, 1, "DE", false);
        for n in 0..2 {
            write_payments(d, SEED, n, n * PER_FILE..(n + 1) * PER_FILE);
        }
        let toml = pipeline(d, "mode = \"available-now\"").replace(
            &guest("card_home").display().to_string(),
            &operator.display().to_string(),
        );
        let mut p = crate::common::open_pipeline(d, &toml, &host).unwrap();
        p.run(
            &host,
            &std::sync::atomic::AtomicBool::new(false),
            &mut |_| {},
        )
        .unwrap();
        crate::common::canonical_rows(&d.join("out"))
    };
    let rust = run(&guest("card_home"));
    assert_eq!(rust.len() as u64, 2 * PER_FILE);
    // Every language reads the version's artifact the same way.
    let notes = format!(
        "\"notes_bytes\":{},\"notes_digest\":\"{}\"",
        NOTES.len(),
        weir_core::Digest::of(NOTES)
    );
    assert!(rust.iter().all(|r| r.contains(&notes)), "{}", rust[0]);
    assert!(
        rust.iter().any(|r| !r.contains("\"home_country\"")),
        "some cards are not in the table"
    );
    for file in ["card_home_py.wasm", "card_home_js.wasm"] {
        assert!(
            run(&crate::polyglot::polyglot(file)) == rust,
            "{file} reads otherwise"
        );
    }
}

/// A table refreshed with new content forty-one times leaves only the versions
/// the retained log entries and the table itself still name in the
/// checkpoint's blobs: the others go with the entries compaction removes.
#[test]
fn lookup_versions_leave_the_blobs_with_the_log_entries_that_named_them() {
    // Odd, so the newest epoch is not the one a compaction folded.
    const REFRESHES: u64 = 41;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_cards(d, 1, "C0", false);
    std::fs::create_dir_all(d.join("input")).unwrap();
    // Logs compacted often, and a state snapshot every other epoch with one
    // kept, so that few entries are retained.
    let toml = pipeline(d, "mode = \"processing-time\"\ninterval = \"20ms\"")
        + "[wal]\ncompact_every = 2\nretain = 2\n[state]\nsnapshot_every = 2\nsnapshots_retained = 1\n";
    let run = Background::start(d, toml);
    for n in 0..REFRESHES {
        write_cards(d, 1, &format!("C{n}"), false);
        std::thread::sleep(std::time::Duration::from_millis(30));
        feed(d, n);
    }
    run.stop().unwrap();
    let seen = epochs(&d.join("out"));
    let versions: BTreeSet<String> = seen.iter().flat_map(|(_, v)| v.clone()).collect();
    assert!(
        versions.len() as u64 > REFRESHES / 2,
        "the table changed {} times",
        versions.len()
    );
    let blobs = std::fs::read_dir(d.join("checkpoint/blobs"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .count();
    // The component, its config, its artifact manifest and artifact, and
    // the versions named by at most retain + compact_every entries and
    // the current one.
    assert!(blobs <= 4 + 2 + 2 + 1, "{blobs} blobs left");
    // What remains still replays: the newest epoch again, as after a crash.
    let ck = d.join("checkpoint");
    let last = crate::common::latest_entry(&ck.join("commits")).unwrap();
    let before = epoch_bytes(&d.join("out"), last);
    std::fs::remove_file(ck.join(format!("commits/{last}"))).unwrap();
    crate::common::run_epochs(d, &pipeline(d, "mode = \"available-now\"")).unwrap();
    assert_eq!(epoch_bytes(&d.join("out"), last), before);
}

/// `weir operator test` with one input and a pipeline file that declares
/// a table runs the operator with the table, as a run would.
#[test]
fn operator_test_with_one_input_reads_the_pipelines_tables() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_cards(d, 1, "DE", false);
    write_payments(d, SEED, 0, 0..PER_FILE);
    let file = d.join("pipeline.toml");
    std::fs::write(&file, pipeline(d, "mode = \"available-now\"")).unwrap();
    let input = std::fs::read_dir(d.join("input"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["operator", "test"])
        .arg(guest("card_home"))
        .arg("--input")
        .arg(&input)
        .arg("--pipeline")
        .arg(&file)
        .env("WEIR_LOG", "warn")
        .output()
        .unwrap();
    let text = crate::common::output_text(&out);
    assert!(out.status.success(), "{text}");
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!rows.is_empty(), "{text}");
    assert!(
        rows.iter().all(|r| r["home_country"] == "DE"),
        "every card's home country from the table: {text}"
    );
}
