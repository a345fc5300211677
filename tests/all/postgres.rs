//! The PostgreSQL sink against a real PostgreSQL server (a temp cluster on
//! 127.0.0.1 per test, see `common/pg.rs`): exactly-once epochs, replay
//! skipped through the progress table, both write paths, existing tables
//! with other column types, refused writes naming the column or constraint,
//! start-up errors, a 30 s server outage mid-run, and the SIGKILL crash test.

use crate::common::pg::PgServer;
use crate::common::{guest, open_pipeline, wait_for, write_input, Background};
use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir_connectors::postgres::table::TableName;
use weir_connectors::postgres::{PostgresSink, PostgresSinkSettings, WriteMethod};
use weir_core::sink::Sink;
use weir_host::WasmHost;

/// fraud-rules set to alert on every payment: every input row must reach
/// the table exactly once, with all four column types.
const ALERT_ALL: &str = r#"{ alert_threshold = 0.5, rules = [ { rule = "amount_above", threshold = 0.0, weight = 1.0 } ] }"#;

/// A pipeline over `dir/input` (one file per epoch, available-now) through
/// fraud-rules alerting on everything into `table`; `url: None` leaves the
/// connection string to the environment; `extra` adds sink keys.
fn pg_toml(dir: &Path, url: Option<&str>, table: &str, extra: &str) -> String {
    let files_sink = format!("kind = \"files\"\npath = \"{}/out\"", dir.display());
    let url = url.map(|u| format!("url = \"{u}\"")).unwrap_or_default();
    let toml = crate::common::pipeline_toml(dir, &guest("fraud_rules"), ALERT_ALL, "", "");
    assert!(toml.contains(&files_sink));
    toml.replace(
        &files_sink,
        &format!("kind = \"postgres\"\n{url}\ntable = \"{table}\"\n{extra}"),
    )
}

fn run_in_process(
    dir: &Path,
    toml: &str,
) -> anyhow::Result<Vec<weir_core::progress::EpochProgress>> {
    crate::common::run_epochs(dir, toml)
}

fn query_id(dir: &Path) -> String {
    weir_core::checkpoint::Checkpoint::inspect(&dir.join("checkpoint"))
        .unwrap()
        .metadata
        .query_id
}

fn err_text(r: anyhow::Result<impl std::fmt::Debug>) -> String {
    format!("{:#}", r.expect_err("expected an error"))
}

#[test]
#[ignore = "needs PostgreSQL"]
fn every_row_lands_once_and_a_replayed_epoch_is_skipped() {
    let pg = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 7, 4, 250);
    // The URL comes from the default variable, WEIR_POSTGRES_URL; the
    // pipeline file holds no password. Two tasks, each writing its share
    // of an epoch in a transaction of its own, claimed on its own.
    let toml = format!(
        "parallelism = 2\n{}",
        pg_toml(dir.path(), None, "alerts", "")
    );
    let file = dir.path().join("pipeline.toml");
    std::fs::write(&file, &toml).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let run = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["run", "--quiet"])
            .arg(&file)
            .env("WEIR_CACHE_DIR", cache.path())
            .env("WEIR_POSTGRES_URL", pg.url("postgres"))
            .env("WEIR_LOG", "info")
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "weir run failed: {log}");
        assert!(
            !log.contains(crate::common::pg::PASSWORD),
            "the password leaked into the log: {log}"
        );
        log
    };
    run();

    assert_eq!(pg.count("SELECT count(*) FROM alerts"), 1000);
    assert_eq!(pg.count("SELECT count(DISTINCT txn_id) FROM alerts"), 1000);
    let types = pg.rows(
        "SELECT column_name::text, data_type::text FROM information_schema.columns \
         WHERE table_name = 'alerts'",
    );
    assert_eq!(
        types,
        [
            "(amount,\"double precision\")",
            "(card_id,text)",
            "(reasons,text)",
            "(score,\"double precision\")",
            "(ts,bigint)",
            "(txn_id,text)"
        ]
    );
    let qid = query_id(dir.path());
    assert_eq!(
        pg.rows("SELECT query_id, sink_name, epoch, rows FROM weir_sink_progress"),
        ["alerts", "alerts/task-1"]
            .iter()
            .flat_map(|name| {
                let qid = &qid;
                (0..4).map(move |e| format!("({qid},{name},{e},125)"))
            })
            .collect::<Vec<_>>()
    );
    let metadata = std::fs::read_to_string(dir.path().join("checkpoint/metadata")).unwrap();
    assert!(metadata.contains(&format!(
        "postgres:127.0.0.1:{}/postgres/public.alerts",
        pg.port
    )));
    assert!(!metadata.contains(crate::common::pg::PASSWORD));
    let before = pg.rows("SELECT * FROM alerts");

    // The run "crashed" after the table had epoch 3 but before commits/3;
    // the restart asks for 3 tasks, but epoch 3 replays as its 2.
    std::fs::remove_file(dir.path().join("checkpoint/commits/3")).unwrap();
    std::fs::write(&file, toml.replace("parallelism = 2", "parallelism = 3")).unwrap();
    let log = run();
    assert!(log.contains("epoch already in the table"), "{log}");
    assert!(dir.path().join("checkpoint/commits/3").exists());
    assert_eq!(
        pg.rows("SELECT * FROM alerts"),
        before,
        "the replay wrote nothing"
    );
}

#[test]
#[ignore = "needs PostgreSQL"]
fn copy_and_insert_paths_write_the_same_rows_into_an_existing_table() {
    let pg = PgServer::start();
    // Other types than the sink would create, and columns the operator does
    // not output (a default and a nullable one).
    for t in ["by_copy", "by_insert"] {
        pg.execute(&format!(
            "CREATE TABLE {t} (id bigserial PRIMARY KEY, txn_id varchar(40) UNIQUE NOT NULL, \
             card_id text, amount real, score double precision, reasons varchar(200), \
             ts timestamptz, note text, written_at timestamptz NOT NULL DEFAULT now())"
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 9, 3, 300);
    for (table, method) in [("by_copy", "copy"), ("by_insert", "insert")] {
        let toml = pg_toml(
            dir.path(),
            Some(&pg.url("postgres")),
            table,
            &format!("write_method = \"{method}\""),
        )
        .replace("/checkpoint\"", &format!("/checkpoint-{table}\""));
        run_in_process(dir.path(), &toml).unwrap();
    }
    let cols = "txn_id, card_id, amount, score, reasons, ts, note";
    let copied = pg.rows(&format!("SELECT {cols} FROM by_copy"));
    assert_eq!(copied.len(), 900);
    assert_eq!(copied, pg.rows(&format!("SELECT {cols} FROM by_insert")));
    // ts (Unix ms) arrived as the same instant; amount as real.
    let (first, _) = weir_connectors::generator::payments::payment(9, 0);
    let row = pg
        .client()
        .query_one(
            "SELECT (extract(epoch FROM ts) * 1000)::bigint, amount FROM by_copy WHERE txn_id = $1",
            &[&first.txn_id],
        )
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), first.ts);
    assert_eq!(row.get::<_, f32>(1), first.amount as f32);
}

fn sink_settings(pg: &PgServer, table: &str) -> PostgresSinkSettings {
    let table = TableName {
        schema: "public".into(),
        table: table.into(),
    };
    PostgresSinkSettings::new(&pg.url("postgres"), table, "q-direct")
}

fn facts(docs: &[&str], ns: &[i64]) -> RecordBatch {
    RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("doc", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
        ])),
        vec![
            Arc::new(StringArray::from(docs.to_vec())),
            Arc::new(Int64Array::from(ns.to_vec())),
        ],
    )
    .unwrap()
}

#[test]
#[ignore = "needs PostgreSQL"]
fn json_and_narrow_integer_columns_are_written_and_bad_values_refused_whole() {
    let pg = PgServer::start();
    pg.execute("CREATE TABLE facts (doc jsonb, n integer)");
    for method in [WriteMethod::Insert, WriteMethod::Copy] {
        let mut s = sink_settings(&pg, "facts");
        s.write_method = method;
        let mut sink = PostgresSink::new(s).unwrap();
        pg.execute("TRUNCATE facts; DELETE FROM weir_sink_progress");
        sink.write_epoch(0, &[facts(&[r#"{"a": 1}"#, "[1, 2]"], &[1, -5])])
            .unwrap();
        assert_eq!(
            pg.rows("SELECT doc, n FROM facts"),
            ["(\"[1, 2]\",-5)", "(\"{\"\"a\"\": 1}\",1)"],
            "{method:?}"
        );
        // One good row and one that does not fit `integer`: neither lands.
        let err = format!(
            "{:#}",
            sink.write_epoch(1, &[facts(&["{}", "{}"], &[7, 5_000_000_000])])
                .unwrap_err()
        );
        assert!(
            err.contains("column `n`") && err.contains("5000000000"),
            "{err}"
        );
        // Not JSON: PostgreSQL's own error, passed on whole.
        let err = format!(
            "{:#}",
            sink.write_epoch(2, &[facts(&["{}", "not json"], &[7, 8])])
                .unwrap_err()
        );
        assert!(err.contains("invalid input syntax for type json"), "{err}");
        assert!(err.contains("22P02"), "{err}");
        assert_eq!(pg.count("SELECT count(*) FROM facts"), 2, "{method:?}");
        assert_eq!(
            pg.count("SELECT count(*) FROM weir_sink_progress WHERE epoch > 0"),
            0,
            "refused epochs are not recorded"
        );
    }
}

#[test]
#[ignore = "needs PostgreSQL"]
fn refused_writes_name_the_column_or_constraint_and_commit_nothing() {
    let pg = PgServer::start();
    let cols = "card_id text, score float8, reasons text, ts bigint";
    pg.execute(&format!(
        "CREATE TABLE typed_wrong (txn_id text, amount boolean, {cols});
         CREATE TABLE small_amounts (txn_id text, amount float8 CONSTRAINT amount_is_negative CHECK (amount < 0), {cols});
         CREATE TABLE unique_ids (txn_id text CONSTRAINT one_alert_per_txn PRIMARY KEY, amount float8, {cols});
         CREATE TABLE too_few (txn_id text, {cols});"
    ));
    let (first, _) = weir_connectors::generator::payments::payment(5, 0);
    pg.client()
        .execute(
            "INSERT INTO unique_ids (txn_id) VALUES ($1)",
            &[&first.txn_id],
        )
        .unwrap();
    let duplicate = format!("Key (txn_id)=({}) already exists", first.txn_id);
    let cases = [
        (
            "typed_wrong",
            "",
            "column `amount`: the operator outputs float64",
        ),
        ("small_amounts", "", "amount_is_negative"),
        ("unique_ids", "", "one_alert_per_txn"),
        ("unique_ids", "", duplicate.as_str()),
        ("too_few", "", "has no column `amount`"),
        ("missing", "create_table = false", "create_table = false"),
    ];
    for (table, extra, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        write_input(dir.path(), 5, 1, 200);
        // One task: the epoch is one transaction, so a refusal commits
        // none of it. (With tasks, each task's share is a transaction of
        // its own; the shares that were not refused stay claimed.)
        let toml = format!(
            "parallelism = 1\n{}",
            pg_toml(dir.path(), Some(&pg.url("postgres")), table, extra)
        );
        let err = err_text(run_in_process(dir.path(), &toml));
        assert!(err.contains(expected), "{table}: {err}");
        assert!(
            err.contains("epoch 0") && err.contains(table),
            "{table}: the error names epoch and table: {err}"
        );
        assert!(
            !dir.path().join("checkpoint/commits/0").exists(),
            "{table}: a refused epoch was committed"
        );
        if table != "missing" {
            let kept = i64::from(table == "unique_ids");
            assert_eq!(
                pg.count(&format!("SELECT count(*) FROM {table}")),
                kept,
                "{table}"
            );
        }
    }
}

#[test]
#[ignore = "needs PostgreSQL"]
fn bad_credentials_missing_databases_and_unreachable_servers_fail_at_start() {
    let pg = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 1, 1, 10);
    let open = |url: &str, extra: &str| {
        let toml = pg_toml(dir.path(), Some(url), "alerts", extra);
        let host = WasmHost::new(None).unwrap();
        let _ = std::fs::remove_dir_all(dir.path().join("checkpoint"));
        err_text(open_pipeline(dir.path(), &toml, &host).map(|_| ()))
    };
    let wrong = pg
        .url("postgres")
        .replace(crate::common::pg::PASSWORD, "not-the-password");
    let err = open(&wrong, "");
    assert!(err.contains("password authentication failed"), "{err}");
    assert!(
        err.contains("28P01") && err.contains("user `weir`"),
        "{err}"
    );
    assert!(
        !err.contains("not-the-password"),
        "the password leaked: {err}"
    );

    let err = open(&pg.url("no_such_db"), "");
    assert!(err.contains("\"no_such_db\" does not exist"), "{err}");

    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgresql://weir@127.0.0.1:{closed}/postgres");
    let err = open(&url, "timeout = \"1s\"");
    assert!(
        err.contains("not reachable") && err.contains("gave up after 1s"),
        "{err}"
    );
    assert!(
        err.contains(&format!("127.0.0.1:{closed}/postgres")),
        "{err}"
    );
}

/// Files `first..first + count` of generated payments, `per_file` each.
fn write_files(dir: &Path, seed: u64, first: u64, count: u64, per_file: u64) {
    for f in first..first + count {
        crate::common::write_payments(dir, seed, f, f * per_file..(f + 1) * per_file);
    }
}

#[test]
#[ignore = "needs PostgreSQL"]
fn server_down_for_30_seconds_mid_run_loses_and_duplicates_nothing() {
    const PER_FILE: u64 = 500;
    let mut pg = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), 3, 0, 10, PER_FILE);
    let toml = pg_toml(dir.path(), Some(&pg.url("postgres")), "alerts", "").replace(
        "mode = \"available-now\"",
        "mode = \"processing-time\"\ninterval = \"100ms\"",
    );
    let ck = dir.path().join("checkpoint");
    let pipeline = Background::start(dir.path(), toml);
    wait_for("three epochs", || {
        crate::common::committed_rows(&ck) >= 3 * PER_FILE
    });

    pg.stop_immediately();
    let at_stop = crate::common::committed_rows(&ck);
    write_files(dir.path(), 3, 10, 10, PER_FILE); // data keeps arriving
    let down = Instant::now();
    std::thread::sleep(Duration::from_secs(30));
    let while_down = crate::common::committed_rows(&ck);
    assert!(
        while_down <= at_stop + PER_FILE,
        "epochs were committed while the server was down ({at_stop} -> {while_down} rows)"
    );
    assert!(
        while_down < 20 * PER_FILE,
        "the outage did not interrupt the run"
    );
    eprintln!("server down for {:?}", down.elapsed());

    pg.start_again();
    wait_for("every epoch after the restart", || {
        // A pipeline that failed ends the wait; `stop` below reports why.
        !pipeline.is_running() || crate::common::committed_rows(&ck) == 20 * PER_FILE
    });
    let summary = pipeline.stop().unwrap();
    assert_eq!(summary.rows_in, 20 * PER_FILE);
    assert_eq!(
        pg.count("SELECT count(*) FROM alerts"),
        20 * PER_FILE as i64
    );
    assert_eq!(
        pg.count("SELECT count(DISTINCT txn_id) FROM alerts"),
        20 * PER_FILE as i64
    );
    assert_eq!(
        pg.count("SELECT count(DISTINCT epoch) FROM weir_sink_progress"),
        20
    );
}

#[test]
#[ignore = "needs PostgreSQL"]
fn sigkill_at_random_moments_leaves_the_rows_of_an_uninterrupted_run() {
    let files = crate::common::crash_epochs(40);
    let pg = PgServer::start();
    let setup = |dir: &Path, run: &str| {
        write_input(dir, 42, files, 1_000);
        let toml = pg_toml(dir, Some(&pg.url("postgres")), &format!("alerts_{run}"), "");
        let file = dir.join("pipeline.toml");
        std::fs::write(&file, toml).unwrap();
        file
    };
    crate::common::uninterrupted_and_killed(setup, crate::common::crash_kills());

    let counts = |t: &str| pg.rows(&format!("SELECT count(*), count(DISTINCT txn_id) FROM {t}"));
    assert_eq!(counts("alerts_crashy"), counts("alerts_clean"));
    assert_eq!(
        counts("alerts_clean"),
        [format!("({0},{0})", files * 1_000)]
    );
    assert!(
        pg.rows("SELECT * FROM alerts_crashy") == pg.rows("SELECT * FROM alerts_clean"),
        "the rows differ from the uninterrupted run"
    );
    assert_eq!(
        pg.count("SELECT count(*) FROM weir_sink_progress WHERE sink_name = 'alerts_crashy'"),
        files as i64
    );
}

#[test]
#[ignore = "needs PostgreSQL"]
fn a_role_without_create_rights_writes_into_existing_tables() {
    let pg = PgServer::start();
    // Since PostgreSQL 15 only the owner may create in `public`; the DBA
    // creates the tables and grants a writer role just what it needs.
    let mut s = sink_settings(&pg, "facts");
    PostgresSink::new(s.clone()).unwrap(); // creates the progress table as the owner
    pg.execute(
        "CREATE TABLE facts (doc jsonb, n integer);
         CREATE ROLE writer LOGIN PASSWORD 'writer-pw';
         GRANT SELECT, INSERT ON facts, weir_sink_progress TO writer;",
    );
    s.url = s.url.replace(
        &format!(
            "{}:{}",
            crate::common::pg::USER,
            crate::common::pg::PASSWORD
        ),
        "writer:writer-pw",
    );
    let mut sink = PostgresSink::new(s.clone()).unwrap();
    sink.write_epoch(0, &[facts(&["{}"], &[1])]).unwrap();
    assert_eq!(pg.count("SELECT count(*) FROM facts"), 1);

    // A missing table it may not create is an error naming the privilege.
    s.table.table = "elsewhere".into();
    let mut sink = PostgresSink::new(s).unwrap();
    let err = format!(
        "{:#}",
        sink.write_epoch(0, &[facts(&["{}"], &[1])]).unwrap_err()
    );
    assert!(
        err.contains("permission denied") && err.contains("42501"),
        "{err}"
    );
}

/// The fence: a writer that took ownership of a query's output
/// (a worker assigned the partition) has its later writes refused once
/// another writer takes it (the partition moved), even an epoch without
/// rows, so it cannot commit; the new owner writes on, and the claim keeps
/// the epoch the old owner wrote before the move from being written twice.
#[test]
#[ignore = "needs PostgreSQL"]
fn a_writer_fenced_by_a_newer_owner_is_refused_and_writes_nothing() {
    let pg = PgServer::start();
    let mut old = PostgresSink::new(sink_settings(&pg, "owned")).unwrap();
    old.fence().unwrap();
    old.write_epoch(1, &[facts(&["{}"], &[1])]).unwrap();
    let mut new = PostgresSink::new(sink_settings(&pg, "owned")).unwrap();
    new.fence().unwrap();
    for batches in [vec![facts(&["{}"], &[2])], vec![]] {
        let e = old.write_epoch(2, &batches).unwrap_err();
        assert!(
            weir_core::sink::Fenced::is_in(&e),
            "not refused as fenced: {e:#}"
        );
        assert!(format!("{e:#}").contains("owner generation 2, this writer holds 1"));
    }
    new.write_epoch(1, &[facts(&["{}"], &[1])]).unwrap();
    new.write_epoch(2, &[facts(&["{}"], &[2])]).unwrap();
    assert_eq!(pg.rows("SELECT n FROM owned"), ["(1)", "(2)"]);
    assert_eq!(
        pg.count("SELECT generation FROM weir_sink_progress_owners WHERE query_id = 'q-direct'"),
        2
    );
}

/// Tasks that start at once each create the output (and progress) table
/// if it is missing. `CREATE TABLE IF NOT EXISTS` is not safe under
/// concurrency: the writers that lose the race get "type … already
/// exists" or a catalog unique violation, which must count as success
/// (CI saw two tasks fail their first epoch on it).
#[test]
#[ignore = "needs PostgreSQL"]
fn writers_creating_the_output_table_at_once_all_write() {
    let pg = PgServer::start();
    const WRITERS: usize = 8;
    for round in 0..4 {
        let table = format!("raced_{round}");
        let barrier = std::sync::Barrier::new(WRITERS);
        std::thread::scope(|s| {
            for w in 0..WRITERS {
                let (pg, table, barrier) = (&pg, &table, &barrier);
                s.spawn(move || {
                    let mut settings = sink_settings(pg, table);
                    settings.query_id = format!("q-{round}-{w}");
                    barrier.wait();
                    let mut sink = PostgresSink::new(settings).unwrap();
                    sink.write_epoch(0, &[facts(&["{}"], &[w as i64])])
                        .unwrap_or_else(|e| panic!("writer {w} of round {round}: {e:#}"));
                });
            }
        });
        assert_eq!(
            pg.count(&format!("SELECT count(DISTINCT n) FROM {table}")),
            WRITERS as i64
        );
    }
}

/// Money, time and bytes in their native PostgreSQL types: a created table
/// gets `numeric(18,2)`, `timestamptz`, `timestamp`, `date` and `bytea`
/// columns, and the values read back as text are exactly those written,
/// through both write paths.
#[test]
#[ignore = "needs PostgreSQL"]
fn decimals_timestamps_dates_and_bytes_land_in_their_native_types_exactly() {
    use arrow_array::{BinaryArray, Date32Array, Decimal128Array, TimestampMicrosecondArray};
    use arrow_array::{TimestampMillisecondArray, TimestampNanosecondArray};
    use arrow_schema::TimeUnit;
    let pg = PgServer::start();
    let schema = Arc::new(Schema::new(vec![
        Field::new("amount", DataType::Decimal128(18, 2), true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, Some("+00:00".into())),
            true,
        ),
        Field::new(
            "local",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            true,
        ),
        Field::new("day", DataType::Date32, true),
        Field::new("data", DataType::Binary, true),
        Field::new(
            "fine",
            DataType::Timestamp(TimeUnit::Nanosecond, None),
            true,
        ),
    ]));
    let batch = |fine: i64| {
        RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(
                    Decimal128Array::from(vec![
                        Some(12345),
                        Some(-1),
                        None,
                        Some(999_999_999_999_999_999),
                    ])
                    .with_precision_and_scale(18, 2)
                    .unwrap(),
                ),
                Arc::new(
                    TimestampMillisecondArray::from(vec![
                        Some(1_796_637_600_123),
                        Some(0),
                        None,
                        Some(-1),
                    ])
                    .with_timezone("+00:00"),
                ),
                Arc::new(TimestampMicrosecondArray::from(vec![
                    Some(1),
                    None,
                    Some(0),
                    Some(86_400_000_000),
                ])),
                Arc::new(Date32Array::from(vec![
                    Some(20794),
                    Some(0),
                    Some(-1),
                    None,
                ])),
                Arc::new(BinaryArray::from(vec![
                    Some(&b"\x00\xffweir"[..]),
                    None,
                    Some(&b""[..]),
                    Some(&b"a"[..]),
                ])),
                Arc::new(TimestampNanosecondArray::from(vec![
                    Some(fine),
                    None,
                    None,
                    None,
                ])),
            ],
        )
        .unwrap()
    };
    for (n, method) in [WriteMethod::Insert, WriteMethod::Copy]
        .into_iter()
        .enumerate()
    {
        let table = format!("money_{n}");
        let mut s = sink_settings(&pg, &table);
        s.write_method = method;
        let mut sink = PostgresSink::new(s).unwrap();
        sink.write_epoch(0, &[batch(5_000)]).unwrap();
        let mut client = pg.client();
        let text = |client: &mut postgres::Client, sql: &str| -> Vec<String> {
            client
                .query(sql, &[])
                .unwrap()
                .iter()
                .map(|r| r.get::<_, String>(0))
                .collect()
        };
        let types = text(
            &mut client,
            &format!(
                "SELECT string_agg(format_type(atttypid, atttypmod), ',' ORDER BY attnum) \
                 FROM pg_attribute WHERE attrelid = '{table}'::regclass AND attnum > 0"
            ),
        );
        assert_eq!(
            types,
            ["numeric(18,2),timestamp with time zone,timestamp without time zone,date,bytea,timestamp without time zone"],
            "{method:?}"
        );
        client.batch_execute("SET TIME ZONE 'UTC'").unwrap();
        let rows = text(
            &mut client,
            &format!(
                "SELECT format('%s|%s|%s|%s|%s|%s', amount, ts, local, day, \
                 encode(data, 'hex'), fine) FROM {table} ORDER BY amount NULLS LAST"
            ),
        );
        assert_eq!(
            rows,
            [
                "-0.01|1970-01-01 00:00:00+00||1970-01-01||",
                "123.45|2026-12-07 10:00:00.123+00|1970-01-01 00:00:00.000001|2026-12-07|00ff77656972|1970-01-01 00:00:00.000005",
                "9999999999999999.99|1969-12-31 23:59:59.999+00|1970-01-02 00:00:00||61|",
                "||1970-01-01 00:00:00|1969-12-31||",
            ],
            "{method:?}"
        );
        // Nanoseconds PostgreSQL cannot keep: refused, naming the column.
        let err = format!("{:#}", sink.write_epoch(1, &[batch(5_001)]).unwrap_err());
        assert!(
            err.contains("column `fine`") && err.contains("microseconds"),
            "{err}"
        );
    }
}

/// An operator's decimal, timestamp, date, bytes, list and struct columns
/// (the Rust `types-check` over the types test's payments) land in a
/// created table as `numeric`, `timestamptz`, `date`, `bytea` and `jsonb`,
/// and read back exactly: decimals inside `jsonb` as exact strings.
#[test]
#[ignore = "needs PostgreSQL"]
fn an_operators_typed_and_nested_columns_land_in_native_types_and_jsonb() {
    let pg = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    let sink = format!(
        "kind = \"postgres\"\nurl = \"{}\"\ntable = \"typed\"",
        pg.url("postgres")
    );
    let host = WasmHost::new(None).unwrap();
    crate::types::run_types_into(dir.path(), &guest("types_check"), Some(&sink), &host);
    let mut client = pg.client();
    let text = |client: &mut postgres::Client, sql: &str| -> Vec<String> {
        client
            .query(sql, &[])
            .unwrap()
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect()
    };
    let types = text(
        &mut client,
        "SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) \
         FROM pg_attribute WHERE attrelid = 'typed'::regclass AND attnum > 0",
    );
    assert_eq!(
        types,
        [
            "txn_id text, amount numeric(18,2), double numeric(19,2), total numeric(18,2), \
          over boolean, ts timestamp with time zone, ts_text text, day_text text, next_day date, \
          raw bytea, raw_len bigint, device jsonb, device_ip text, tags jsonb, tag_count bigint, \
          lines jsonb, device_in jsonb"
        ]
    );
    client.batch_execute("SET TIME ZONE 'UTC'").unwrap();
    let rows = text(
        &mut client,
        "SELECT format('%s|%s|%s|%s|%s|%s|%s|%s', txn_id, amount, double, ts, next_day, \
         encode(raw, 'hex'), device, lines) FROM typed ORDER BY txn_id",
    );
    assert_eq!(
        rows,
        [
            r#"t1|19.99|39.98|2026-12-07 09:30:00.25+00|2026-12-08|00ff10|{"id": "d1", "ip": "10.0.0.1", "score": 7}|[{"sku": "a", "price": "0.10"}, {"sku": "b", "price": "0.20"}]"#,
            r#"t2|-0.05|-0.10|1969-12-31 23:59:59.999+00|1970-01-01||{"id": "d2"}|[]"#,
            r#"t3|9999999999999999.99|19999999999999999.98|2026-12-07 09:30:00+00|||{"id": "d3", "score": -1}|"#,
            r#"t4||||2000-03-01||{"id": "d4", "ip": "::1"}|[{"sku": "c", "price": "100.01"}]"#,
            r#"t5|100.00|200.00|1970-01-01 00:00:00+00|1970-01-02|7765697220|{"id": "d5", "ip": "192.168.1.1", "score": 0}|[{"sku": "d", "price": "-1.50"}, {"sku": "e", "price": "2.00"}]"#,
        ]
    );
}
