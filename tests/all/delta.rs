//! The Delta sink: one commit per epoch with a `txn` action,
//! every table read back with delta-rs's own Python reader (the
//! `deltalake` package, installed by scripts/install-delta-reader.sh), not
//! with Weir.

use crate::common::s3::{S3Server, BUCKET};
use crate::common::{
    guest, latest_entry, pipeline_toml, sink_files, weir_run_quiet, write_input, VELOCITY_CONFIG,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const PER_FILE: u64 = 1_500;

/// The velocity pipeline over generated payments in `dir`, writing to the
/// Delta table `table` (or, with `None`, to the files sink in `dir/out`).
fn pipeline(dir: &Path, files: u64, table: Option<&str>, extra: &str) -> PathBuf {
    write_input(dir, 19, files, PER_FILE);
    let mut toml = pipeline_toml(dir, &guest("fraud_velocity"), VELOCITY_CONFIG, "", "");
    if let Some(table) = table {
        toml = toml.replace(
            &format!("[sink]\nkind = \"files\"\npath = \"{}/out\"", dir.display()),
            &format!("[sink]\nkind = \"delta\"\npath = \"{table}\"\n{extra}"),
        );
    }
    let file = dir.join("pipeline.toml");
    std::fs::write(&file, toml).unwrap();
    file
}

fn run(pipeline: &Path, cache: &Path, s3: Option<&S3Server>) -> std::process::Output {
    let mut cmd = weir_run_quiet(pipeline, cache);
    if let Some(s3) = s3 {
        s3.credentials(&mut cmd);
    }
    cmd.stderr(std::process::Stdio::piped()).output().unwrap()
}

fn run_ok(pipeline: &Path, cache: &Path, s3: Option<&S3Server>) {
    let out = run(pipeline, cache, s3);
    assert!(
        out.status.success(),
        "weir run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What delta-rs sees in `table`: its version, rows (as sorted canonical
/// JSON) and the txn version of each of `apps`.
pub struct Seen {
    pub version: u64,
    pub rows: Vec<String>,
    pub txns: Value,
}

pub fn read_with_delta_rs(table: &str, apps: &[&str], s3: Option<&S3Server>) -> Seen {
    weir_test_support::needs("delta-rs's reader");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join("target/tools/delta/bin/python");
    assert!(
        python.exists(),
        "delta-rs's reader is not installed: run scripts/install-delta-reader.sh (scripts/test.sh does)"
    );
    let mut cmd = Command::new(python);
    cmd.arg(root.join("tools/delta/read_table.py"))
        .arg(table)
        .args(apps);
    if let Some(s3) = s3 {
        s3.credentials(&mut cmd)
            .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{}", s3.port));
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "delta-rs could not read {table}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    Seen {
        version: seen["version"].as_u64().unwrap(),
        rows: canonical(seen["rows"].as_array().unwrap().iter().cloned()),
        txns: seen["txns"].clone(),
    }
}

/// Rows as JSON with sorted keys, sorted: comparable whoever printed them.
fn canonical(rows: impl Iterator<Item = Value>) -> Vec<String> {
    let mut rows: Vec<String> = rows.map(|r| r.to_string()).collect();
    rows.sort();
    rows
}

/// Each commit of a local table's log, as its actions.
fn log_commits(table: &Path) -> Vec<Vec<Value>> {
    let mut commits = Vec::new();
    for v in 0.. {
        let Ok(text) = std::fs::read_to_string(table.join(format!("_delta_log/{v:020}.json")))
        else {
            break;
        };
        commits.push(
            text.lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
        );
    }
    commits
}

/// The `(appId, version)` of every commit's txn action, in log order;
/// checks each commit has exactly one.
fn txns(commits: &[Vec<Value>]) -> Vec<(String, u64)> {
    commits
        .iter()
        .map(|actions| {
            let txns: Vec<&Value> = actions.iter().filter_map(|a| a.get("txn")).collect();
            assert_eq!(txns.len(), 1, "one txn per commit: {actions:?}");
            (
                txns[0]["appId"].as_str().unwrap().to_string(),
                txns[0]["version"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn query_id(checkpoint: &Path) -> String {
    let meta: Value =
        serde_json::from_slice(&std::fs::read(checkpoint.join("metadata")).unwrap()).unwrap();
    meta["query_id"].as_str().unwrap().to_string()
}

/// The epochs of a files-sink run that wrote output.
fn epochs_with_output(out: &Path) -> Vec<u64> {
    sink_files(out)
        .iter()
        .map(|(name, _)| name[6..16].parse().unwrap())
        .collect()
}

#[test]
#[ignore = "needs s3s-fs and delta-rs's reader"]
fn delta_rs_reads_the_files_sinks_rows_from_one_commit_per_epoch_and_a_replay_is_skipped() {
    let cache = tempfile::tempdir().unwrap();
    let (files, lake) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run_ok(&pipeline(files.path(), 6, None, ""), cache.path(), None);
    let expected = crate::common::canonical_rows(&files.path().join("out"));
    let epochs = epochs_with_output(&files.path().join("out"));
    assert!(expected.len() > 20 && epochs.len() >= 4, "{epochs:?}");

    let table = lake.path().join("lake/alerts");
    let delta = pipeline(lake.path(), 6, Some("lake/alerts"), "");
    run_ok(&delta, cache.path(), None);
    let query = query_id(&lake.path().join("checkpoint"));
    let seen = read_with_delta_rs(table.to_str().unwrap(), &[&query], None);
    assert_eq!(seen.rows, expected, "delta-rs reads the files sink's rows");
    let commits = log_commits(&table);
    assert_eq!(
        txns(&commits),
        epochs
            .iter()
            .map(|&e| (query.clone(), e))
            .collect::<Vec<_>>(),
        "one commit per epoch with output, its txn the epoch"
    );
    assert_eq!(seen.version as usize, commits.len() - 1);
    assert_eq!(seen.txns[&query], *epochs.last().unwrap());

    // The last epoch again, as a crash after the Delta commit and before
    // commits/N leaves it: the table has it, so nothing is added.
    let last = epochs.last().unwrap();
    std::fs::remove_file(lake.path().join(format!("checkpoint/commits/{last}"))).unwrap();
    run_ok(&delta, cache.path(), None);
    assert!(lake
        .path()
        .join(format!("checkpoint/commits/{last}"))
        .exists());
    let again = read_with_delta_rs(table.to_str().unwrap(), &[&query], None);
    assert_eq!(again.version, seen.version, "no new version");
    assert_eq!(again.rows, expected, "nothing written twice");
}

/// delta-rs checkpoints the table and its older commits are cleaned up, as
/// log retention does: the sink reads the epochs' `txn`s from the
/// checkpoint's Parquet, skips a replayed epoch, and appends new ones.
#[test]
#[ignore = "needs s3s-fs and delta-rs's reader"]
fn txns_are_read_from_a_checkpoint_delta_rs_wrote() {
    let cache = tempfile::tempdir().unwrap();
    let (files, lake) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run_ok(&pipeline(files.path(), 6, None, ""), cache.path(), None);
    let epochs = epochs_with_output(&files.path().join("out"));

    let table = lake.path().join("lake/alerts");
    run_ok(
        &pipeline(lake.path(), 4, Some("lake/alerts"), ""),
        cache.path(),
        None,
    );
    let before = log_commits(&table).len();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let checkpointed = Command::new(root.join("target/tools/delta/bin/python"))
        .args([
            "-c",
            "import sys, os; from deltalake import DeltaTable; \
             DeltaTable(sys.argv[1]).create_checkpoint(); sys.stdout.flush(); os._exit(0)",
        ])
        .arg(&table)
        .output()
        .unwrap();
    assert!(
        checkpointed.status.success(),
        "{}",
        String::from_utf8_lossy(&checkpointed.stderr)
    );
    let checkpoint = table.join(format!("_delta_log/{:020}.checkpoint.parquet", before - 1));
    assert!(
        checkpoint.exists(),
        "delta-rs wrote {}",
        checkpoint.display()
    );
    for v in 0..before {
        std::fs::remove_file(table.join(format!("_delta_log/{v:020}.json"))).unwrap();
    }

    // The last epoch run so far again, then two more files.
    let last = latest_entry(&lake.path().join("checkpoint/commits")).unwrap();
    assert!(epochs.contains(&last), "the replayed epoch has rows");
    std::fs::remove_file(lake.path().join(format!("checkpoint/commits/{last}"))).unwrap();
    run_ok(
        &pipeline(lake.path(), 6, Some("lake/alerts"), ""),
        cache.path(),
        None,
    );

    let query = query_id(&lake.path().join("checkpoint"));
    let seen = read_with_delta_rs(table.to_str().unwrap(), &[&query], None);
    assert_eq!(
        seen.rows,
        crate::common::canonical_rows(&files.path().join("out")),
        "each row once"
    );
    assert_eq!(seen.txns[&query], *epochs.last().unwrap());
    let after: Vec<u64> = (before..=seen.version as usize)
        .map(|v| {
            let text =
                std::fs::read_to_string(table.join(format!("_delta_log/{v:020}.json"))).unwrap();
            let actions: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            txns(&[actions])[0].1
        })
        .collect();
    assert_eq!(
        after,
        epochs
            .iter()
            .copied()
            .filter(|&e| e > last)
            .collect::<Vec<_>>(),
        "only the new epochs were committed"
    );
}

#[test]
#[ignore = "needs s3s-fs and delta-rs's reader"]
fn a_table_of_other_columns_is_refused_naming_the_column() {
    let cache = tempfile::tempdir().unwrap();
    let lake = tempfile::tempdir().unwrap();
    let table = lake.path().join("lake/alerts");
    // Made by delta-rs, with a column the operator does not output.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let made = Command::new(root.join("target/tools/delta/bin/python"))
        .args([
            "-c",
            "import sys, pyarrow as pa; from deltalake import write_deltalake; \
             write_deltalake(sys.argv[1], pa.table({'txn_id': ['t1'], 'analyst_note': ['x']}))",
        ])
        .arg(&table)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let out = run(
        &pipeline(lake.path(), 2, Some("lake/alerts"), ""),
        cache.path(),
        None,
    );
    assert!(!out.status.success(), "a mismatched table must be refused");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is not in the Delta table")
            || stderr.contains("has column `analyst_note`"),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs s3s-fs and delta-rs's reader"]
fn a_table_in_an_s3_compatible_store_is_read_back_by_delta_rs() {
    let s3 = S3Server::start();
    let cache = tempfile::tempdir().unwrap();
    let (files, lake) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run_ok(&pipeline(files.path(), 3, None, ""), cache.path(), None);
    let url = format!("s3://{BUCKET}/lake/alerts");
    let store = format!(
        "endpoint = \"http://127.0.0.1:{}\"\nallow_http = true",
        s3.port
    );
    run_ok(
        &pipeline(lake.path(), 3, Some(&url), &store),
        cache.path(),
        Some(&s3),
    );
    let query = query_id(&lake.path().join("checkpoint"));
    let seen = read_with_delta_rs(&url, &[&query], Some(&s3));
    assert_eq!(
        seen.rows,
        crate::common::canonical_rows(&files.path().join("out"))
    );
    let last = *epochs_with_output(&files.path().join("out"))
        .last()
        .unwrap();
    assert_eq!(seen.txns[&query], last);
    assert!(
        s3.keys("lake/alerts").iter().all(|k| !k.contains("_probe")),
        "the store's check leaves nothing behind"
    );
}

/// SIGKILL at random moments (at least 20 kills, some between offsets/N and
/// commits/N), two tasks committing to the table side by side: the table
/// holds exactly the uninterrupted run's rows, each once, and each task's
/// txn version of every epoch once.
#[test]
#[ignore = "needs s3s-fs and delta-rs's reader"]
fn sigkill_at_random_moments_leaves_each_epoch_in_the_delta_table_once() {
    let epochs = crate::common::crash_epochs(40);
    let setup = |dir: &Path, _run: &str| {
        let file = pipeline(dir, epochs, Some("lake/alerts"), "");
        let toml = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, format!("parallelism = 2\nkey = \"card_id\"\n{toml}")).unwrap();
        file
    };
    let (clean, crashy) =
        crate::common::uninterrupted_and_killed(setup, crate::common::crash_kills());
    let clean_table = clean.path().join("lake/alerts");
    let crashy_table = crashy.path().join("lake/alerts");
    let expected = read_with_delta_rs(clean_table.to_str().unwrap(), &[], None);
    let actual = read_with_delta_rs(crashy_table.to_str().unwrap(), &[], None);
    assert!(expected.rows.len() > 50, "{}", expected.rows.len());
    assert_eq!(
        actual.rows, expected.rows,
        "the same rows, none lost or doubled"
    );
    let distinct: std::collections::HashSet<&String> = actual.rows.iter().collect();
    assert_eq!(distinct.len(), actual.rows.len(), "rows = distinct");

    // Each task's epochs, in commit order: no epoch twice, and the
    // uninterrupted run's epochs.
    let by_app = |table: &Path, checkpoint: &Path| {
        let query = query_id(checkpoint);
        let mut apps = std::collections::BTreeMap::<String, Vec<u64>>::new();
        for (app, epoch) in txns(&log_commits(table)) {
            let task = app
                .strip_prefix(&query)
                .expect("the query's own app id")
                .to_string();
            apps.entry(task).or_default().push(epoch);
        }
        apps
    };
    let crashy_apps = by_app(&crashy_table, &crashy.path().join("checkpoint"));
    let clean_apps = by_app(&clean_table, &clean.path().join("checkpoint"));
    assert_eq!(
        crashy_apps.keys().collect::<Vec<_>>(),
        ["", "-task-1"],
        "both tasks committed"
    );
    for epochs in crashy_apps.values() {
        assert!(
            epochs.windows(2).all(|w| w[0] < w[1]),
            "an epoch twice: {epochs:?}"
        );
    }
    assert_eq!(
        crashy_apps, clean_apps,
        "one txn version per epoch and task"
    );
}

/// Money, instants, days and nested records in a Delta table: `decimal`,
/// `timestamp` (written as microseconds whatever the unit), `date`, an
/// `array` and a `struct`, read back by delta-rs exactly.
#[test]
#[ignore = "needs delta-rs's reader"]
fn decimals_timestamps_dates_lists_and_structs_are_read_back_by_delta_rs_exactly() {
    use arrow_array::{
        ArrayRef, Date32Array, Decimal128Array, ListArray, RecordBatch, StringArray, StructArray,
        TimestampMillisecondArray,
    };
    use arrow_schema::{DataType, Field, Fields, Schema};
    use std::sync::Arc;
    use weir_connectors::delta::sink::DeltaSink;
    use weir_connectors::delta::store::TableStore;
    use weir_core::sink::Sink;
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("payments");
    let device = Fields::from(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("ip", DataType::Utf8, true),
    ]);
    let tags = ListArray::from_iter_primitive::<arrow_array::types::Int64Type, _, _>(vec![
        Some(vec![Some(1), Some(2)]),
        None,
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(
            Decimal128Array::from(vec![Some(12345), Some(-1)])
                .with_precision_and_scale(18, 2)
                .unwrap(),
        ),
        Arc::new(
            TimestampMillisecondArray::from(vec![Some(1_796_637_600_123), None])
                .with_timezone("+00:00"),
        ),
        Arc::new(Date32Array::from(vec![Some(20794), Some(0)])),
        Arc::new(tags),
        Arc::new(StructArray::new(
            device.clone(),
            vec![
                Arc::new(StringArray::from(vec!["d1", "d2"])),
                Arc::new(StringArray::from(vec![Some("10.0.0.1"), None])),
            ],
            None,
        )),
    ];
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .zip(["amount", "ts", "day", "tags", "device"])
            .map(|(c, n)| Field::new(n, c.data_type().clone(), true))
            .collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(schema, columns).unwrap();
    let store = TableStore::open(&table, &Default::default()).unwrap();
    let mut sink = DeltaSink::open(store, "q-types", "w-types").unwrap();
    sink.write_epoch(0, &[batch]).unwrap();
    let seen = read_with_delta_rs(table.to_str().unwrap(), &[], None);
    assert_eq!(
        seen.rows,
        [
            r#"{"amount":"-0.01","day":"1970-01-01","device":{"id":"d2","ip":null},"tags":null,"ts":null}"#,
            r#"{"amount":"123.45","day":"2026-12-07","device":{"id":"d1","ip":"10.0.0.1"},"tags":[1,2],"ts":"2026-12-07 10:00:00.123000+00:00"}"#,
        ]
    );
}
