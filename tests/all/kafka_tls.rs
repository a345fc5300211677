//! The Kafka source and sink over TLS: a real TLS endpoint (stunnel) in
//! front of the test broker, certificates made by the test.

use crate::common::broker::Broker;
use crate::common::guest;
use crate::kafka::{open_err, payments};
use weir_test_support::tls::Pki;

/// `tls = { … }` for a pipeline section, from `(key, path)` pairs.
fn tls_table(entries: &[(&str, &std::path::Path)]) -> String {
    let keys: Vec<String> = entries
        .iter()
        .map(|(k, p)| format!("{k} = \"{}\"", p.display()))
        .collect();
    format!("tls = {{ {} }}", keys.join(", "))
}

/// Kafka `payments` → echo → Kafka `alerts`, both through `bootstrap`
/// with the `source_tls` and `sink_tls` lines.
fn pipeline(dir: &std::path::Path, bootstrap: &str, source_tls: &str, sink_tls: &str) -> String {
    format!(
        r#"name = "kafka-tls"
checkpoint = "{dir}/checkpoint"
[trigger]
mode = "available-now"
[source]
kind = "kafka"
bootstrap_servers = "{bootstrap}"
topics = ["payments"]
timeout = "3s"
{source_tls}
{schema}
[operator]
path = "{op}"
config = {{ mode = "echo" }}
[sink]
kind = "kafka"
bootstrap_servers = "{bootstrap}"
topic = "alerts"
key_column = "txn_id"
timeout = "5s"
{sink_tls}
"#,
        dir = dir.display(),
        op = guest("sandbox_tests").display(),
        schema = weir_connectors::generator::payments::SCHEMA_TOML,
    )
}

#[test]
#[ignore = "needs tansu"]
fn source_and_sink_over_mutual_tls_carry_every_record() {
    let pki = Pki::new("weir-test-ca", &["localhost"]);
    let broker = Broker::start_tls(&pki, true);
    broker.create_topic("payments", 2);
    broker.create_topic("alerts", 1);
    broker.produce("payments", &payments(300), |i| (i % 2) as i32);
    let dir = tempfile::tempdir().unwrap();
    let tls = tls_table(&[
        ("ca_file", &pki.ca()),
        ("cert_file", &pki.client_cert()),
        ("key_file", &pki.client_key()),
    ]);
    let toml = pipeline(dir.path(), &broker.bootstrap(), &tls, &tls);
    let epochs = crate::common::run_epochs(dir.path(), &toml).unwrap();
    let rows: u64 = epochs.iter().map(|e| e.rows_in).sum();
    assert_eq!(rows, 300);
    let alerts = broker.consume_all("alerts");
    assert_eq!(alerts.len(), 300);

    // Without a client certificate the endpoint refuses the handshake.
    let dir = tempfile::tempdir().unwrap();
    let no_cert = tls_table(&[("ca_file", &pki.ca())]);
    let err = open_err(
        dir.path(),
        &pipeline(dir.path(), &broker.bootstrap(), &no_cert, ""),
    );
    assert!(err.contains(&broker.bootstrap()), "{err}");
}

#[test]
#[ignore = "needs tansu"]
fn a_wrong_authority_or_host_name_is_refused_naming_the_broker_and_the_cause() {
    let pki = Pki::new("weir-test-ca", &["localhost"]);
    let broker = Broker::start_tls(&pki, false);
    broker.create_topic("payments", 1);

    let other = Pki::new("some-other-ca", &["localhost"]);
    let dir = tempfile::tempdir().unwrap();
    let wrong_ca = tls_table(&[("ca_file", &other.ca())]);
    let err = open_err(
        dir.path(),
        &pipeline(dir.path(), &broker.bootstrap(), &wrong_ca, ""),
    );
    assert!(err.contains(&broker.bootstrap()), "names the broker: {err}");
    assert!(err.contains("certificate verify failed"), "says why: {err}");

    let elsewhere = Pki::new("weir-test-ca", &["broker.elsewhere.example"]);
    let broker = Broker::start_tls(&elsewhere, false);
    broker.create_topic("payments", 1);
    let dir = tempfile::tempdir().unwrap();
    let right_ca = tls_table(&[("ca_file", &elsewhere.ca())]);
    let err = open_err(
        dir.path(),
        &pipeline(dir.path(), &broker.bootstrap(), &right_ca, ""),
    );
    assert!(err.contains(&broker.bootstrap()), "names the broker: {err}");
    assert!(err.contains("certificate verify failed"), "says why: {err}");

    // Plaintext to a TLS endpoint fails too (no silent fallback).
    let dir = tempfile::tempdir().unwrap();
    let err = open_err(
        dir.path(),
        &pipeline(dir.path(), &broker.bootstrap(), "", ""),
    );
    assert!(err.contains(&broker.bootstrap()), "{err}");
}

#[test]
#[ignore = "needs tansu"]
fn a_scram_login_over_tls_reads_and_writes_and_a_wrong_password_is_refused() {
    let pki = Pki::new("weir-test-ca", &["localhost"]);
    let broker = Broker::start_sasl_ssl_users(
        &pki,
        &[
            ("scram512", "weir-fraud", "correct-horse-battery"),
            ("scram256", "weir-fraud-256", "correct-horse-battery"),
        ],
        &[("payments", 2), ("alerts", 1)],
    );
    broker.produce("payments", &payments(120), |i| (i % 2) as i32);
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("kafka-password");
    std::fs::write(&password, "correct-horse-battery\n").unwrap();
    let login_as = |mechanism: &str, user: &str, password: &std::path::Path| {
        format!(
            "{}\nsasl = {{ mechanism = \"{mechanism}\", username = \"{user}\", password = {{ file = \"{}\" }} }}",
            tls_table(&[("ca_file", &pki.ca())]),
            password.display()
        )
    };
    let security = |password: &std::path::Path| login_as("SCRAM-SHA-512", "weir-fraud", password);
    let login = security(&password);
    let toml = pipeline(dir.path(), &broker.bootstrap(), &login, &login);
    let epochs = crate::common::run_epochs(dir.path(), &toml).unwrap();
    assert_eq!(epochs.iter().map(|e| e.rows_in).sum::<u64>(), 120);
    assert_eq!(broker.consume_all("alerts").len(), 120);

    // SCRAM-SHA-256, another user: a pipeline of its own reads them all again.
    let dir256 = tempfile::tempdir().unwrap();
    let login = login_as("SCRAM-SHA-256", "weir-fraud-256", &password);
    let toml = pipeline(dir256.path(), &broker.bootstrap(), &login, &login);
    let epochs = crate::common::run_epochs(dir256.path(), &toml).unwrap();
    assert_eq!(epochs.iter().map(|e| e.rows_in).sum::<u64>(), 120);
    assert_eq!(broker.consume_all("alerts").len(), 240);

    let dir = tempfile::tempdir().unwrap();
    let wrong = dir.path().join("kafka-password");
    std::fs::write(&wrong, "not-the-password").unwrap();
    let login = security(&wrong);
    let toml = pipeline(dir.path(), &broker.bootstrap(), &login, &login);
    let err = open_err(dir.path(), &toml);
    assert!(err.contains(&broker.bootstrap()), "names the broker: {err}");
    assert!(err.contains("SASL authentication error"), "says why: {err}");
    assert!(!err.contains("not-the-password"), "never the secret: {err}");
}
