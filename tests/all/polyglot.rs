//! The WIT contract beyond Rust: the fraud rules written in Python
//! (componentize-py) and JavaScript (componentize-js) must emit exactly the
//! alerts of the Rust `fraud-rules` over the same 100k generated payments.
//! The two components are built by `scripts/build-polyglot.sh` (which
//! `scripts/test.sh` runs) into `target/guests/polyglot/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A component `scripts/build-polyglot.sh` built.
pub(crate) fn polyglot(name: &str) -> PathBuf {
    weir_test_support::needs("componentize-py/js");
    let path = Path::new(weir_cli::GUEST_DIR)
        .join("../../polyglot")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: run `bash scripts/install-polyglot.sh && bash scripts/build-polyglot.sh` \
         (scripts/test.sh does)",
        path.display()
    );
    path
}

/// Alerts of one run, by txn_id, as the sink wrote them.
fn alerts(dir: &Path) -> BTreeMap<String, serde_json::Value> {
    let mut out = BTreeMap::new();
    for (_, bytes) in crate::common::sink_files(&dir.join("out")) {
        for line in String::from_utf8(bytes).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let id = v["txn_id"].as_str().unwrap().to_string();
            assert!(out.insert(id.clone(), v).is_none(), "{id} alerted twice");
        }
    }
    out
}

/// Runs `operator` with the demo rules over 100k payments (10 epochs).
fn run(operator: &Path, host: &weir_host::WasmHost) -> BTreeMap<String, serde_json::Value> {
    run_with(operator, crate::common::DEMO_RULES_INLINE, host)
}

/// Runs `operator` with the demo rules over 100k payments read as the
/// demo reads them: `amount` a `decimal(18,2)`, `ts` a `timestamp(ms,
/// UTC)`, a nested `device`; the threshold given as a string, compared
/// exactly.
fn run_typed(operator: &Path, host: &weir_host::WasmHost) -> BTreeMap<String, serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    crate::common::write_input(dir.path(), 11, 10, 10_000);
    let config =
        crate::common::DEMO_RULES_INLINE.replace("threshold = 2500.0", "threshold = \"2500.00\"");
    assert_ne!(config, crate::common::DEMO_RULES_INLINE);
    let toml = crate::common::pipeline_toml(dir.path(), operator, &config, "", "");
    let basic = weir_connectors::generator::payments::SCHEMA_TOML;
    assert!(toml.contains(basic));
    let toml = toml.replace(
        basic,
        weir_connectors::generator::payments::TYPED_SCHEMA_TOML,
    );
    let (epochs_and_rows, alerts) = run_to_end(dir.path(), &toml, host);
    assert_eq!(epochs_and_rows, (10, 100_000));
    alerts
}

/// Runs `operator` with `config` (an inline TOML table) over 100k payments
/// (10 epochs); the alerts by txn_id.
fn run_with(
    operator: &Path,
    config: &str,
    host: &weir_host::WasmHost,
) -> BTreeMap<String, serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    crate::common::write_input(dir.path(), 11, 10, 10_000);
    let toml = crate::common::pipeline_toml(dir.path(), operator, config, "", "");
    let (epochs_and_rows, alerts) = run_to_end(dir.path(), &toml, host);
    assert_eq!(epochs_and_rows, (10, 100_000));
    alerts
}

/// Runs the pipeline of `toml` over `dir` to its end: (epochs, rows read)
/// and the alerts by txn_id.
fn run_to_end(
    dir: &Path,
    toml: &str,
    host: &weir_host::WasmHost,
) -> ((u64, u64), BTreeMap<String, serde_json::Value>) {
    let mut p = crate::common::open_pipeline(dir, toml, host).unwrap();
    let summary = p
        .run(
            host,
            &std::sync::atomic::AtomicBool::new(false),
            &mut |_| {},
        )
        .unwrap();
    ((summary.epochs, summary.rows_in), alerts(dir))
}

/// The compile cache under target/ that the polyglot tests share (also
/// as `WEIR_CACHE_DIR` of the `weir` they run), so only the first run pays
/// for compiling the Python and JavaScript runtimes.
pub(crate) fn polyglot_cache() -> PathBuf {
    Path::new(weir_cli::GUEST_DIR).join("../../polyglot-cache")
}

/// A host that compiles into [`polyglot_cache`].
pub(crate) fn polyglot_host() -> weir_host::WasmHost {
    weir_host::WasmHost::new(Some(polyglot_cache())).unwrap()
}

#[test]
#[ignore = "needs componentize-py/js"]
fn python_and_javascript_operators_emit_the_alerts_of_the_rust_one() {
    same_alerts_in_every_language(run);
}

/// The same with money as `decimal(18,2)` and time as a timestamp: the
/// three compare amounts exactly and pass both through in their types.
#[test]
#[ignore = "needs componentize-py/js"]
fn python_and_javascript_operators_alert_on_decimal_money_as_the_rust_one_does() {
    let alerts = same_alerts_in_every_language(run_typed);
    let first = alerts.values().next().unwrap();
    assert!(
        first["amount"].is_string(),
        "a decimal is written as text: {first}"
    );
    assert!(first["ts"].as_str().unwrap().ends_with('Z'), "{first}");
}

/// Runs the Rust, Python and JavaScript fraud rules with `run`; asserts
/// they alert on the same payments with the same rows; Rust's alerts.
fn same_alerts_in_every_language(
    run: fn(&Path, &weir_host::WasmHost) -> BTreeMap<String, serde_json::Value>,
) -> BTreeMap<String, serde_json::Value> {
    let host = polyglot_host();
    let rust = run(&crate::common::guest("fraud_rules"), &host);
    assert!(rust.len() > 500, "only {} alerts", rust.len());
    for (language, file) in [
        ("Python", "fraud_rules_py.wasm"),
        ("JavaScript", "fraud_rules_js.wasm"),
    ] {
        let other = run(&polyglot(file), &host);
        let missing: Vec<_> = rust
            .keys()
            .filter(|k| !other.contains_key(*k))
            .take(5)
            .collect();
        let extra: Vec<_> = other
            .keys()
            .filter(|k| !rust.contains_key(*k))
            .take(5)
            .collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{language}: missing {missing:?}, extra {extra:?}"
        );
        for (id, row) in &rust {
            assert_eq!(&other[id], row, "{language} differs on {id}");
        }
        eprintln!("{language}: {} alerts, identical to Rust's", other.len());
    }
    rust
}

/// Null amounts, countries, currencies and merchants fire no rule in any
/// language: each row below would alert (or alert with another score) if a
/// null compared as a value. The Python rules take another path once a
/// column has nulls; the demo data has none.
#[test]
#[ignore = "needs componentize-py/js"]
fn a_second_python_operator_compiles_little_more_than_its_own_code() {
    let root = tempfile::tempdir().unwrap();
    let compile = |file: &str| {
        let host = weir_host::WasmHost::new(Some(root.path().to_path_buf())).unwrap();
        let wasm = std::fs::read(polyglot(file)).unwrap();
        let started = std::time::Instant::now();
        host.load(&wasm, Default::default()).unwrap();
        let (hits, misses) = host.function_cache_hits_and_misses().unwrap();
        println!(
            "{file}: {hits} functions from the cache, {misses} compiled, in {:.1?}",
            started.elapsed()
        );
        (hits, misses)
    };
    compile("fraud_rules_py.wasm");
    let (hits, misses) = compile("card_home_py.wasm");
    // The interpreter and the SDK are the same in both: more than nine in
    // ten functions of the second come from the cache.
    assert!(misses * 10 < hits, "{hits} reused, {misses} compiled");
}

#[test]
#[ignore = "needs componentize-py/js"]
fn python_and_javascript_rules_treat_nulls_as_the_rust_one_does() {
    let rows = [
        // merchant fires (0.7); a null currency must not add 0.2.
        r#"{"txn_id":"n-1","card_id":"c-1","merchant_id":"m-0666","amount":10.0,"currency":null,"country":"US","card_country":"US","ts":1000}"#,
        // merchant fires; a null country must not count as a mismatch.
        r#"{"txn_id":"n-2","card_id":"c-2","merchant_id":"m-0777","amount":10.0,"currency":"USD","country":null,"card_country":"US","ts":1001}"#,
        // merchant fires; a null amount is above no threshold.
        r#"{"txn_id":"n-3","card_id":"c-3","merchant_id":"m-0999","amount":null,"currency":"USD","country":"US","card_country":"US","ts":1002}"#,
        // no merchant: amount and mismatch fire (0.9).
        r#"{"txn_id":"n-4","card_id":"c-4","merchant_id":null,"amount":3000.0,"currency":"USD","country":"FR","card_country":"US","ts":1003}"#,
        // a null card country is no mismatch: 0.5 + 0.2 = 0.7 alerts, not 1.1.
        r#"{"txn_id":"n-5","card_id":"c-5","merchant_id":"m-0001","amount":3000.0,"currency":"JPY","country":"FR","card_country":null,"ts":1004}"#,
        // nothing null, everything fires.
        r#"{"txn_id":"n-6","card_id":"c-6","merchant_id":"m-0666","amount":3000.0,"currency":"JPY","country":"FR","card_country":"US","ts":1005}"#,
    ];
    let host = polyglot_host();
    let run = |operator: &Path| {
        let dir = tempfile::tempdir().unwrap();
        crate::common::write_input_file(dir.path(), 0, (rows.join("\n") + "\n").as_bytes());
        // The demo schema, with the rules' columns nullable.
        let toml = crate::common::pipeline_toml(
            dir.path(),
            operator,
            crate::common::DEMO_RULES_INLINE,
            "",
            "",
        )
        .replace(
            r#"type = "utf8" },"#,
            r#"type = "utf8", nullable = true },"#,
        )
        .replace(
            r#"type = "float64" },"#,
            r#"type = "float64", nullable = true },"#,
        );
        run_to_end(dir.path(), &toml, &host).1
    };
    let rust = run(&crate::common::guest("fraud_rules"));
    let ids: Vec<&str> = rust.keys().map(String::as_str).collect();
    assert_eq!(ids, ["n-1", "n-2", "n-3", "n-4", "n-5", "n-6"], "{rust:?}");
    for (id, reasons) in [
        ("n-1", "merchant_in"),
        ("n-2", "merchant_in"),
        ("n-3", "merchant_in"),
        ("n-5", "amount_above,currency_not_in"),
    ] {
        assert_eq!(rust[id]["reasons"], reasons, "{id}");
    }
    for (language, file) in [
        ("Python", "fraud_rules_py.wasm"),
        ("JavaScript", "fraud_rules_js.wasm"),
    ] {
        assert_eq!(run(&polyglot(file)), rust, "{language}");
    }
}

/// The stateful job in Python on the SDK (`operators/fraud-velocity-py`:
/// rules plus a per-card count over 60 s in keyed state, across 10 epochs)
/// alerts exactly the payments the Rust `fraud-velocity` alerts, with the
/// same scores, reasons and window counts.
#[test]
#[ignore = "needs componentize-py/js"]
fn the_stateful_python_operator_emits_the_alerts_of_the_rust_one() {
    let host = polyglot_host();
    let config = crate::common::VELOCITY_CONFIG;
    let rust = run_with(&crate::common::guest("fraud_velocity"), config, &host);
    let python = run_with(&polyglot("fraud_velocity_py.wasm"), config, &host);
    let velocity = rust
        .values()
        .filter(|a| a["reasons"].as_str().unwrap().contains("velocity"))
        .count();
    assert!(
        velocity > 20,
        "only {velocity} velocity alerts of {}",
        rust.len()
    );
    assert_eq!(
        rust.keys().collect::<Vec<_>>(),
        python.keys().collect::<Vec<_>>(),
        "the same payments alerted"
    );
    for (id, row) in &rust {
        assert_eq!(&python[id], row, "Python differs on {id}");
    }
}

/// Several outputs from Python and JavaScript (their SDKs' `emit`): with
/// `scores = true` both return the alerts and emit every payment's score to
/// `scores`, routed to a sink of its own; the two languages agree row for
/// row, and each alert's score is its score in `scores`.
#[test]
#[ignore = "needs componentize-py/js"]
fn python_and_javascript_operators_emit_a_second_output_to_its_own_sink() {
    let host = polyglot_host();
    let mut runs = Vec::new();
    for file in ["fraud_rules_py.wasm", "fraud_rules_js.wasm"] {
        let dir = tempfile::tempdir().unwrap();
        crate::common::write_input(dir.path(), 11, 2, 5_000);
        let rules = crate::common::DEMO_RULES_INLINE.replacen('{', "{ scores = true,", 1);
        let toml = crate::common::pipeline_toml(dir.path(), &polyglot(file), &rules, "", "");
        let toml = format!(
            "{}\n[[sink]]\nkind = \"files\"\npath = \"{d}/out\"\n[[sink]]\noutput = \"scores\"\n\
             kind = \"files\"\npath = \"{d}/scores\"\n",
            &toml[..toml.find("[sink]").unwrap()],
            d = dir.path().display()
        );
        let mut p = crate::common::open_pipeline(dir.path(), &toml, &host).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        p.run(&host, &stop, &mut |_| {}).unwrap();
        let alerts = alerts(dir.path());
        let mut scores = BTreeMap::new();
        for (_, bytes) in crate::common::sink_files(&dir.path().join("scores")) {
            for line in String::from_utf8(bytes).unwrap().lines() {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                let id = v["txn_id"].as_str().unwrap().to_string();
                assert!(
                    scores.insert(id, v["score"].clone()).is_none(),
                    "scored twice"
                );
            }
        }
        assert_eq!(scores.len(), 10_000, "{file}: every payment scored once");
        assert!(alerts.len() > 50, "{file}: {} alerts", alerts.len());
        for (id, alert) in &alerts {
            assert_eq!(alert["score"], scores[id], "{file}: {id}'s score");
        }
        runs.push((alerts, scores));
    }
    assert!(
        runs[0] == runs[1],
        "Python and JavaScript agree on both outputs"
    );
}

/// Decimal amounts are compared exactly in every language: at 16 integer
/// digits a float cannot tell `…99.99` from the threshold `…99.98`.
#[test]
#[ignore = "needs componentize-py/js"]
fn python_and_javascript_rules_compare_decimal_amounts_exactly() {
    let row = |id: &str, amount: &str| {
        format!(
            r#"{{"txn_id":"{id}","card_id":"c-1","merchant_id":"m-1","amount":"{amount}","currency":"USD","country":"US","card_country":"US","ts":"2026-12-07T09:30:00Z"}}"#
        )
    };
    let rows = [
        row("e-1", "9999999999999999.99"),
        row("e-2", "9999999999999999.98"),
        row("e-3", "-9999999999999999.99"),
    ];
    let config = r#"{ alert_threshold = 0.5, rules = [
      { rule = "amount_above", threshold = "9999999999999999.98", weight = 0.5 } ] }"#;
    let host = polyglot_host();
    let run = |operator: &Path| {
        let dir = tempfile::tempdir().unwrap();
        crate::common::write_input_file(dir.path(), 0, (rows.join("\n") + "\n").as_bytes());
        let toml = crate::common::pipeline_toml(dir.path(), operator, config, "", "").replace(
            weir_connectors::generator::payments::SCHEMA_TOML,
            weir_connectors::generator::payments::TYPED_SCHEMA_TOML,
        );
        run_to_end(dir.path(), &toml, &host).1
    };
    let rust = run(&crate::common::guest("fraud_rules"));
    assert_eq!(rust.keys().collect::<Vec<_>>(), ["e-1"], "{rust:?}");
    assert_eq!(rust["e-1"]["amount"], "9999999999999999.99");
    for (language, file) in [
        ("Python", "fraud_rules_py.wasm"),
        ("JavaScript", "fraud_rules_js.wasm"),
    ] {
        assert_eq!(run(&polyglot(file)), rust, "{language}");
    }
}
