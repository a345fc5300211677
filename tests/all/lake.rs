//! The lake's formats: the Parquet sink, Parquet input.

use crate::common::{
    guest, pipeline_toml, sorted_rows, weir_run_quiet, write_input, VELOCITY_CONFIG,
};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::path::Path;

/// The velocity pipeline over generated payments, writing to `sink`.
fn pipeline(dir: &Path, sink: &str) -> std::path::PathBuf {
    write_input(dir, 19, 4, 1_500);
    let toml = pipeline_toml(dir, &guest("fraud_velocity"), VELOCITY_CONFIG, "", "").replace(
        "[sink]\nkind = \"files\"",
        &format!("[sink]\nkind = \"{sink}\""),
    );
    let file = dir.join("pipeline.toml");
    std::fs::write(&file, toml).unwrap();
    file
}

fn run(pipeline: &Path, cache: &Path) {
    let status = weir_run_quiet(pipeline, cache).status().unwrap();
    assert!(status.success(), "weir run failed");
}

/// Every row of every Parquet file in `out` as a JSON line, sorted, read
/// with arrow's own Parquet reader.
fn parquet_rows(out: &Path) -> Vec<String> {
    let mut rows = Vec::new();
    for entry in std::fs::read_dir(out).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "parquet") {
            let reader =
                ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap())
                    .unwrap()
                    .build()
                    .unwrap();
            let batches: Vec<_> = reader.collect::<Result<_, _>>().unwrap();
            let lines = weir_core::sink::to_json_lines(&batches).unwrap();
            rows.extend(
                String::from_utf8(lines)
                    .unwrap()
                    .lines()
                    .map(str::to_string),
            );
        }
    }
    rows.sort();
    rows
}

#[test]
fn the_parquet_sink_holds_the_rows_of_the_files_sink_and_a_replay_rewrites_them_identically() {
    let cache = tempfile::tempdir().unwrap();
    let (files, lake) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run(&pipeline(files.path(), "files"), cache.path());
    let parquet = pipeline(lake.path(), "parquet");
    run(&parquet, cache.path());

    let expected = sorted_rows(files.path());
    assert!(
        expected.len() > 20,
        "the velocity rules alert: {}",
        expected.len()
    );
    let out = lake.path().join("out");
    assert_eq!(
        parquet_rows(&out),
        expected,
        "arrow reads back the files sink's rows"
    );

    // Epoch 3 again (its commit removed, as a crash before it would leave
    // it): the same file, byte for byte, and no second copy.
    let name = "epoch-0000000003.parquet";
    let before = std::fs::read(out.join(name)).unwrap();
    std::fs::remove_file(lake.path().join("checkpoint/commits/3")).unwrap();
    let modified = std::fs::metadata(out.join(name))
        .unwrap()
        .modified()
        .unwrap();
    run(&parquet, cache.path());
    assert!(
        lake.path().join("checkpoint/commits/3").exists(),
        "epoch 3 ran again"
    );
    assert!(
        std::fs::metadata(out.join(name))
            .unwrap()
            .modified()
            .unwrap()
            > modified,
        "the replay wrote the file again"
    );
    assert_eq!(
        std::fs::read(out.join(name)).unwrap(),
        before,
        "a replay rewrites the same bytes"
    );
    assert_eq!(parquet_rows(&out), expected, "nothing written twice");
}

/// The same payments as Parquet files (their columns in another order):
/// the files source reads them and the pipeline raises exactly the alerts
/// of the JSON-lines run.
#[test]
fn payments_in_parquet_files_give_the_alerts_of_the_same_payments_in_json_lines() {
    use weir_connectors::generator::payments::{columns, json_lines};
    let cache = tempfile::tempdir().unwrap();
    let (json, lake) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let json_pipeline = pipeline(json.path(), "files");
    run(&json_pipeline, cache.path());

    let parquet_pipeline = pipeline(lake.path(), "files");
    let input = lake.path().join("input");
    let schema = weir_core::schema::arrow_schema(&columns());
    // Stored in reverse column order: the source takes columns by name.
    let reversed: Vec<usize> = (0..schema.fields().len()).rev().collect();
    for entry in std::fs::read_dir(&input).unwrap() {
        let path = entry.unwrap().path();
        let n: u64 = path.file_stem().unwrap().to_str().unwrap()[9..]
            .parse()
            .unwrap();
        let decoder = weir_core::json::JsonDecoder::new(
            schema.clone(),
            1_000,
            weir_core::json::MalformedPolicy::Fail,
        );
        let lines = std::fs::read(&path).unwrap();
        assert_eq!(
            lines,
            json_lines(19, n * 1_500, 1_500),
            "the input this test expects"
        );
        let decoded = decoder.decode_lines(&lines, "json").unwrap();
        let batches: Vec<_> = decoded
            .batches
            .iter()
            .map(|b| b.project(&reversed).unwrap())
            .collect();
        let bytes = weir_connectors::parquet::sink::encode(&batches)
            .unwrap()
            .unwrap();
        let parquet = input.join(format!("payments-{n:04}.parquet"));
        std::fs::write(&parquet, bytes).unwrap();
        crate::common::date_as_input(&parquet, n);
        std::fs::remove_file(&path).unwrap();
    }
    run(&parquet_pipeline, cache.path());

    let expected = sorted_rows(json.path());
    assert!(expected.len() > 20, "the velocity rules alert");
    assert_eq!(sorted_rows(lake.path()), expected);
}

/// `examples/lake/run.sh` end to end, smaller: S3 (s3s-fs) → fraud-velocity
/// → PostgreSQL alerts + Delta scores, both read back; every payment is
/// scored once and the scores mark exactly the alerts.
#[test]
#[ignore = "needs s3s-fs, PostgreSQL and delta-rs's reader"]
fn the_lake_example_runs_end_to_end() {
    weir_test_support::needs("s3s-fs, PostgreSQL and delta-rs's reader");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let run = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("bash")
        .arg(root.join("examples/lake/run.sh"))
        .env("WEIR", env!("CARGO_BIN_EXE_weir"))
        .env("PAYMENTS", "4800")
        .env("RUN_DIR", run.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let alerts = stdout
        .lines()
        .find_map(|l| l.strip_suffix(" distinct) in PostgreSQL table alerts"))
        .expect("the alerts line");
    let (count, distinct) = alerts.split_once(" alerts (").unwrap();
    assert_eq!(count, distinct, "each alert once");
    let n: u64 = count.parse().unwrap();
    assert!(n > 20, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "4800 scores (4800 distinct, {n} marked as alerts) in Delta table s3://lake/scores"
        )),
        "{stdout}"
    );
}

/// SIGKILL at random moments with the Parquet sink: the files hold exactly
/// the rows of an uninterrupted run, none twice, and no temp file is left.
#[test]
fn sigkill_at_random_moments_leaves_the_parquet_files_of_an_uninterrupted_run() {
    let epochs = crate::common::crash_epochs(40);
    let setup = |dir: &Path, _run: &str| {
        write_input(dir, 23, epochs, 1_000);
        let toml = pipeline_toml(dir, &guest("fraud_velocity"), VELOCITY_CONFIG, "", "")
            .replace("[sink]\nkind = \"files\"", "[sink]\nkind = \"parquet\"");
        let file = dir.join("pipeline.toml");
        std::fs::write(&file, toml).unwrap();
        file
    };
    let (clean, crashy) =
        crate::common::uninterrupted_and_killed(setup, crate::common::crash_kills());
    let expected = parquet_rows(&clean.path().join("out"));
    assert!(expected.len() > 50, "{} alerts", expected.len());
    let actual = parquet_rows(&crashy.path().join("out"));
    assert_eq!(actual.len(), expected.len(), "no row lost or written twice");
    assert_eq!(actual, expected);
    crate::common::assert_no_temp_files(&crashy.path().join("out"));
}
