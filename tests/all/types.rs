//! Every column type end to end: decimals, timestamps, dates, bytes,
//! structs and lists from JSON lines, through an operator in each SDK
//! (`types-check`, `types-check-py`, `types-check-js`: the same
//! computation on the language's own values), to the files sink. The
//! three write byte-identical files, equal to what the test computes
//! from the input on its own; an operator built before these types
//! existed is refused such an input.

use crate::common::{guest, open_pipeline, sink_files};
use std::path::Path;

/// The input's schema: a payment with money, time and nesting.
pub(crate) const SCHEMA: &str = r#"schema = [
  { name = "txn_id", type = "utf8" },
  { name = "amount", type = "decimal(18,2)", nullable = true },
  { name = "ts", type = "timestamp(ms, UTC)", nullable = true },
  { name = "day", type = "date", nullable = true },
  { name = "raw", type = "binary", nullable = true },
  { name = "device", type = "struct", fields = [
      { name = "id", type = "utf8" },
      { name = "ip", type = "utf8", nullable = true },
      { name = "score", type = "int64", nullable = true } ] },
  { name = "tags", type = "list<utf8>", nullable = true },
  { name = "lines", type = "list<struct>", nullable = true, fields = [
      { name = "sku", type = "utf8" },
      { name = "price", type = "decimal(18,2)" } ] },
]"#;

/// Rows that reach the edges: negative and sub-cent amounts, the largest
/// 16-digit amount, instants before 1970 and with milliseconds, empty and
/// null bytes, lists and list items.
pub(crate) const INPUT: &str = r#"{"txn_id":"t1","amount":"19.99","ts":"2026-12-07T09:30:00.250Z","day":"2026-12-07","raw":"00ff10","device":{"id":"d1","ip":"10.0.0.1","score":7},"tags":["card-present","3ds"],"lines":[{"sku":"a","price":"0.10"},{"sku":"b","price":"0.20"}]}
{"txn_id":"t2","amount":-0.05,"ts":-1,"day":"1969-12-31","raw":"","device":{"id":"d2"},"tags":[],"lines":[]}
{"txn_id":"t3","amount":"9999999999999999.99","ts":1796635800000,"day":null,"raw":null,"device":{"id":"d3","ip":null,"score":-1},"tags":null,"lines":null}
{"txn_id":"t4","amount":null,"ts":null,"day":"2000-02-29","device":{"id":"d4","ip":"::1"},"tags":["x",null],"lines":[{"sku":"c","price":"100.01"}]}
{"txn_id":"t5","amount":"100.00","ts":"1970-01-01T00:00:00Z","day":"1970-01-01","raw":"7765697220","device":{"id":"d5","ip":"192.168.1.1","score":0},"tags":["a"],"lines":[{"sku":"d","price":"-1.50"},{"sku":"e","price":"2"}]}
"#;

fn pipeline(dir: &Path, operator: &Path) -> String {
    format!(
        r#"name = "types"
checkpoint = "{dir}/checkpoint"
[trigger]
mode = "available-now"
[source]
kind = "files"
path = "{dir}/input"
{SCHEMA}
[operator]
path = "{op}"
[sink]
kind = "files"
path = "{dir}/out"
"#,
        dir = dir.display(),
        op = operator.display(),
    )
}

/// Runs the pipeline `toml` over `dir` to its end; the files sink's bytes.
pub(crate) fn run_to_end(dir: &Path, toml: &str, host: &weir_host::WasmHost) -> Vec<u8> {
    try_run_to_end(dir, toml, host).unwrap()
}

/// [`run_to_end`], its error returned.
pub(crate) fn try_run_to_end(
    dir: &Path,
    toml: &str,
    host: &weir_host::WasmHost,
) -> anyhow::Result<Vec<u8>> {
    let mut p = open_pipeline(dir, toml, host)?;
    p.run(
        host,
        &std::sync::atomic::AtomicBool::new(false),
        &mut |_| {},
    )?;
    Ok(sink_files(&dir.join("out"))
        .into_iter()
        .flat_map(|(_, b)| b)
        .collect())
}

/// Runs `operator` over [`INPUT`] in `dir` with the files sink replaced by
/// `sink` (TOML keys of `[sink]`, when given); the files sink's bytes
/// (none with another sink).
pub(crate) fn run_types_into(
    dir: &Path,
    operator: &Path,
    sink: Option<&str>,
    host: &weir_host::WasmHost,
) -> Vec<u8> {
    try_run_types_into(dir, operator, sink, host).unwrap()
}

/// [`run_types_into`], its error returned.
pub(crate) fn try_run_types_into(
    dir: &Path,
    operator: &Path,
    sink: Option<&str>,
    host: &weir_host::WasmHost,
) -> anyhow::Result<Vec<u8>> {
    std::fs::create_dir_all(dir.join("input")).unwrap();
    std::fs::write(dir.join("input/payments.jsonl"), INPUT).unwrap();
    let mut toml = pipeline(dir, operator);
    if let Some(sink) = sink {
        let files = format!("kind = \"files\"\npath = \"{}/out\"", dir.display());
        assert!(toml.contains(&files));
        toml = toml.replace(&files, sink);
        std::fs::create_dir_all(dir.join("out")).unwrap();
    }
    try_run_to_end(dir, &toml, host)
}

/// The sink's bytes after `operator` ran over [`INPUT`].
pub(crate) fn run_types(operator: &Path, host: &weir_host::WasmHost) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    run_types_into(dir.path(), operator, None, host)
}

/// What every SDK's `types-check` must write for [`INPUT`], row by row,
/// worked out by hand: `double` is `amount + amount`, `total` the exact sum
/// of the lines' prices, `over` whether the amount exceeds 100.00 exactly,
/// the texts RFC 3339 and ISO dates, `next_day` the day after (across a
/// leap day and the epoch). Nulls are left out by the JSON writer;
/// decimals are written as exact strings, bytes as hex.
pub(crate) const EXPECTED: [&str; 5] = [
    r#"{"txn_id":"t1","amount":"19.99","double":"39.98","total":"0.30","over":false,"ts":"2026-12-07T09:30:00.250Z","ts_text":"2026-12-07T09:30:00.250Z","day_text":"2026-12-07","next_day":"2026-12-08","raw":"00ff10","raw_len":3,"device":{"id":"d1","ip":"10.0.0.1","score":7},"device_ip":"10.0.0.1","tags":["card-present","3ds"],"tag_count":2,"lines":[{"sku":"a","price":"0.10"},{"sku":"b","price":"0.20"}],"device_in":{"id":"d1","ip":"10.0.0.1","score":7}}"#,
    r#"{"txn_id":"t2","amount":"-0.05","double":"-0.10","total":"0.00","over":false,"ts":"1969-12-31T23:59:59.999Z","ts_text":"1969-12-31T23:59:59.999Z","day_text":"1969-12-31","next_day":"1970-01-01","raw":"","raw_len":0,"device":{"id":"d2"},"tags":[],"tag_count":0,"lines":[],"device_in":{"id":"d2"}}"#,
    r#"{"txn_id":"t3","amount":"9999999999999999.99","double":"19999999999999999.98","total":"0.00","over":true,"ts":"2026-12-07T09:30:00Z","ts_text":"2026-12-07T09:30:00.000Z","device":{"id":"d3","score":-1},"tag_count":0,"device_in":{"id":"d3","score":-1}}"#,
    r#"{"txn_id":"t4","total":"100.01","day_text":"2000-02-29","next_day":"2000-03-01","device":{"id":"d4","ip":"::1"},"device_ip":"::1","tags":["x",null],"tag_count":2,"lines":[{"sku":"c","price":"100.01"}],"device_in":{"id":"d4","ip":"::1"}}"#,
    r#"{"txn_id":"t5","amount":"100.00","double":"200.00","total":"0.50","over":false,"ts":"1970-01-01T00:00:00Z","ts_text":"1970-01-01T00:00:00.000Z","day_text":"1970-01-01","next_day":"1970-01-02","raw":"7765697220","raw_len":5,"device":{"id":"d5","ip":"192.168.1.1","score":0},"device_ip":"192.168.1.1","tags":["a"],"tag_count":1,"lines":[{"sku":"d","price":"-1.50"},{"sku":"e","price":"2.00"}],"device_in":{"id":"d5","ip":"192.168.1.1","score":0}}"#,
];

/// The output's lines, sorted by txn_id (tasks may write them in any order).
pub(crate) fn sorted_lines(out: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8(out.to_vec())
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

#[test]
fn every_type_goes_through_the_rust_sdk_and_back_exactly() {
    let host = weir_host::WasmHost::new(None).unwrap();
    let out = run_types(&guest("types_check"), &host);
    assert_eq!(sorted_lines(&out), EXPECTED);
}

/// The Python and JavaScript `types-check`, built by
/// `scripts/build-polyglot.sh`, write the same bytes as the Rust one.
#[test]
#[ignore = "needs componentize-py/js"]
fn every_type_goes_through_the_python_and_javascript_sdks_byte_for_byte() {
    let host = weir_host::WasmHost::new(Some(crate::polyglot::polyglot_cache())).unwrap();
    let rust = run_types(&guest("types_check"), &host);
    for name in ["types_check_py.wasm", "types_check_js.wasm"] {
        let out = run_types(&crate::polyglot::polyglot(name), &host);
        assert_eq!(sorted_lines(&out), EXPECTED, "{name}");
        assert_eq!(sorted_lines(&out), sorted_lines(&rust), "{name}");
    }
}

/// The payments of the demo's schema with only basic columns.
const BASIC_SCHEMA: &str = r#"schema = [
  { name = "txn_id", type = "utf8" },
  { name = "amount", type = "float64" },
]"#;

#[test]
fn an_operator_built_before_typed_columns_runs_unchanged_and_is_refused_what_it_cannot_read() {
    let legacy = guest("basic_types_only");
    let host = weir_host::WasmHost::new(None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("input")).unwrap();
    std::fs::write(
        dir.path().join("input/p.jsonl"),
        "{\"txn_id\":\"a\",\"amount\":1.5}\n{\"txn_id\":\"b\",\"amount\":2}\n",
    )
    .unwrap();
    let basic = pipeline(dir.path(), &legacy).replace(SCHEMA, BASIC_SCHEMA);
    let out = run_to_end(dir.path(), &basic, &host);
    assert_eq!(
        sorted_lines(&out),
        [
            r#"{"txn_id":"a","columns_seen":2}"#,
            r#"{"txn_id":"b","columns_seen":2}"#
        ]
    );

    let typed = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(typed.path().join("input")).unwrap();
    let err = open_pipeline(typed.path(), &pipeline(typed.path(), &legacy), &host)
        .err()
        .expect("a typed input refused");
    let err = format!("{err:#}");
    assert!(
        err.contains("reads only int64, float64, boolean and utf8 columns")
            && err.contains("column `amount` is decimal(18,2)")
            && err.contains("rebuild it with the current SDK"),
        "{err}"
    );
}

/// `n` payments' amounts as JSON text, cycling through `0.10`, `0.20` and
/// pseudo-random cents up to 99,999.99, some written as numbers: the exact
/// sum in cents beside them.
fn amounts(n: u64) -> (Vec<String>, i128) {
    let mut lines = Vec::with_capacity(n as usize);
    let mut cents_total: i128 = 0;
    for i in 0..n {
        let cents: i128 = match i % 3 {
            0 => 10,
            1 => 20,
            _ => ((i * 7_919) % 10_000_000) as i128,
        };
        cents_total += cents;
        let text = format!("{}.{:02}", cents / 100, cents % 100);
        lines.push(if i % 2 == 0 {
            format!("{{\"amount\":\"{text}\"}}")
        } else {
            format!("{{\"amount\":{text}}}")
        });
    }
    (lines, cents_total)
}

#[test]
fn a_million_decimal_amounts_sum_exactly_and_a_finer_one_is_a_dead_letter() {
    const ROWS: u64 = 1_000_000;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    std::fs::create_dir_all(&input).unwrap();
    let (lines, cents) = amounts(ROWS);
    for (i, chunk) in lines.chunks(250_000).enumerate() {
        let mut text = chunk.join("\n");
        if i == 1 {
            text.push_str("\n{\"amount\":\"0.001\"}");
        }
        std::fs::write(input.join(format!("p{i}.jsonl")), text + "\n").unwrap();
    }
    let toml = format!(
        r#"name = "sum"
checkpoint = "{dir}/checkpoint"
[trigger]
mode = "available-now"
[source]
kind = "files"
path = "{dir}/input"
max_files_per_trigger = 1
on_malformed = "dead-letter"
schema = [ {{ name = "amount", type = "decimal(18,2)" }} ]
[operator]
path = "{op}"
[sink]
kind = "files"
path = "{dir}/out"
"#,
        dir = dir.path().display(),
        op = guest("decimal_sum").display(),
    );
    let host = weir_host::WasmHost::new(None).unwrap();
    let out = run_to_end(dir.path(), &toml, &host);
    let last: serde_json::Value = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .max_by_key(|v| v["rows"].as_i64().unwrap())
        .unwrap();
    let exact = format!("{}.{:02}", cents / 100, cents % 100);
    assert_eq!(
        last["rows"], ROWS,
        "every good row summed, the finer one not"
    );
    assert_eq!(last["sum"], exact.as_str(), "the decimal sum is exact");
    println!(
        "exact {exact}, float64 {} (the same amounts summed as floats)",
        last["float_sum"]
    );
    let letters = std::fs::read_to_string(
        dir.path()
            .join("checkpoint/dead-letter/epoch-0000000001.jsonl"),
    )
    .unwrap();
    assert!(
        letters.contains("0.001")
            && letters.contains("amount")
            && letters.contains("decimal(18,2)"),
        "{letters}"
    );
}
