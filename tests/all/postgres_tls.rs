//! The PostgreSQL sink and query lookups over TLS, against a test cluster
//! started with `ssl = on` that takes TCP connections only over TLS, with
//! certificates the test makes (`openssl`).

use crate::common::pg::{PgServer, PASSWORD, USER};
use crate::common::{guest, write_input};
use arrow_schema::{DataType, Field, Schema};
use std::path::Path;
use std::sync::Arc;
use weir_connectors::lookup::postgres::query_table;
use weir_connectors::postgres::table::TableName;
use weir_connectors::postgres::{PostgresSink, PostgresSinkSettings};
use weir_test_support::tls::Pki;

/// A connection string to `host` (a name or 127.0.0.1) with `tls`, the
/// libpq parameters after `?`.
fn url(pg: &PgServer, host: &str, tls: &str) -> String {
    format!(
        "postgresql://{USER}:{PASSWORD}@{host}:{}/postgres?{tls}",
        pg.port
    )
}

/// `sslmode=MODE&sslrootcert=CA`.
fn verify(mode: &str, ca: &Path) -> String {
    format!("sslmode={mode}&sslrootcert={}", ca.display())
}

/// Opening a sink on `url`: the error, all its causes.
fn sink_err(url: &str) -> String {
    let table = TableName {
        schema: "public".into(),
        table: "alerts".into(),
    };
    let mut s = PostgresSinkSettings::new(url, table, "q-tls");
    s.timeout = std::time::Duration::from_secs(2);
    match PostgresSink::new(s) {
        Ok(_) => panic!("expected {url} to be refused"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
#[ignore = "needs PostgreSQL"]
fn the_sink_and_a_query_lookup_connect_with_verify_full_and_a_client_certificate() {
    let pki = Pki::new("weir-test-ca", &["localhost"]);
    let pg = PgServer::start_tls(&pki, true);
    let tls = format!(
        "{}&sslcert={}&sslkey={}",
        verify("verify-full", &pki.ca()),
        pki.client_cert().display(),
        pki.client_key().display()
    );
    let url = url(&pg, "localhost", &tls);

    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 5, 2, 100);
    let files_sink = format!("kind = \"files\"\npath = \"{}/out\"", dir.path().display());
    let alert_all = r#"{ alert_threshold = 0.5, rules = [ { rule = "amount_above", threshold = 0.0, weight = 1.0 } ] }"#;
    let toml = crate::common::pipeline_toml(dir.path(), &guest("fraud_rules"), alert_all, "", "")
        .replace(
            &files_sink,
            &format!("kind = \"postgres\"\nurl = \"{url}\"\ntable = \"alerts\""),
        );
    let epochs = crate::common::run_epochs(dir.path(), &toml).unwrap();
    assert_eq!(epochs.len(), 2);
    assert_eq!(pg.count("SELECT count(*) FROM alerts"), 200);

    let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, true)]));
    let batch = query_table(&url, "SELECT count(*) AS n FROM alerts", &schema).unwrap();
    assert_eq!(batch.num_rows(), 1);

    // The server asks for a client certificate: without one, refused.
    let err = sink_err(&url.replace(
        &format!(
            "&sslcert={}&sslkey={}",
            pki.client_cert().display(),
            pki.client_key().display()
        ),
        "",
    ));
    assert!(err.contains("requires a valid client certificate"), "{err}");
}

#[test]
#[ignore = "needs PostgreSQL"]
fn a_wrong_authority_a_wrong_host_or_no_tls_is_refused_with_the_reason() {
    let pki = Pki::new("weir-test-ca", &["localhost"]);
    let pg = PgServer::start_tls(&pki, false);

    let other = Pki::new("some-other-ca", &["localhost"]);
    let err = sink_err(&url(&pg, "localhost", &verify("verify-full", &other.ca())));
    assert!(err.contains("certificate verify failed"), "wrong CA: {err}");

    // The certificate names localhost, not 127.0.0.1: verify-full refuses,
    // verify-ca (which checks only the authority) connects.
    let err = sink_err(&url(&pg, "127.0.0.1", &verify("verify-full", &pki.ca())));
    assert!(err.contains("IP address mismatch"), "wrong host: {err}");
    assert!(err.contains("127.0.0.1"), "{err}");
    let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, true)]));
    // verify-ca trusts sslrootcert alone, as libpq does, not the system's
    // authorities (OpenSSL's SSL_CERT_FILE here trusts the server's).
    std::env::set_var("SSL_CERT_FILE", pki.ca());
    let err = sink_err(&url(&pg, "127.0.0.1", &verify("verify-ca", &other.ca())));
    assert!(
        err.contains("certificate verify failed"),
        "system CAs: {err}"
    );
    let ca_only = url(&pg, "127.0.0.1", &verify("verify-ca", &pki.ca()));
    query_table(&ca_only, "SELECT 1::bigint AS n", &schema).unwrap();

    // The server takes TCP only over TLS: plaintext is refused.
    let err = sink_err(&url(&pg, "localhost", "sslmode=disable"));
    assert!(err.contains("no encryption"), "plaintext: {err}");

    // A pipeline that requires TLS never talks to a server without it.
    let plain = PgServer::start();
    let err = sink_err(&url(&plain, "localhost", "sslmode=require"));
    assert!(err.contains("TLS"), "a server without TLS: {err}");
}
