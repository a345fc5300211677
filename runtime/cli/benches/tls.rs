//! `cargo bench -p weir-cli --bench tls`: what TLS costs, measured against
//! the same thing in the clear in the same run.
//!
//! 1. The admin API: `GET /v1/pipelines/NAME` (status) requests per second
//!    on one kept-alive connection and with a new connection per request
//!    (a TLS handshake each), over HTTP with one token and over HTTPS with
//!    a tokens file.
//! 2. A pipeline, Kafka → fraud-rules (every payment an alert) →
//!    PostgreSQL: in the clear; Kafka over TLS and PostgreSQL with
//!    `sslmode=verify-full`; and Kafka with a SCRAM-SHA-512 login over TLS.
//!    The test broker has no TLS listener of its own, so its TLS is
//!    stunnel in front of it: an extra proxy hop a TLS-native broker does
//!    not have, so the Kafka figures are an upper bound of TLS's cost.
//!
//! Services are real (tansu, stunnel, PostgreSQL) on 127.0.0.1, started
//! and stopped here; certificates are made with openssl.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use weir_admin::{AdminServer, AdminSettings};
use weir_cli::demo::{self, DemoOperator, DemoOptions};
use weir_engine::config::{AdminConfig, AdminTlsConfig, PipelineConfig};
use weir_engine::OpenOptions;
use weir_host::WasmHost;
use weir_test_support::broker::Broker;
use weir_test_support::pg::PgServer;
use weir_test_support::tls::Pki;

const KEEP_ALIVE_REQUESTS: usize = 3_000;
const NEW_CONNECTION_REQUESTS: usize = 500;
const RECORDS: usize = 100_000;
const TOKEN: &str = "bench-token-0123456789";

fn main() {
    let pki = Pki::new("weir-bench-ca", &["localhost"]);
    admin_api(&pki);
    pipelines(&pki);
}

/// Requests per second of `requests` status calls with `client`.
fn rate(client: &reqwest::blocking::Client, url: &str, token: &str, requests: usize) -> f64 {
    let started = Instant::now();
    for _ in 0..requests {
        let r = client
            .get(url)
            .bearer_auth(token)
            .send()
            .expect("a status call");
        assert_eq!(r.status(), 200);
        r.bytes().expect("the body");
    }
    requests as f64 / started.elapsed().as_secs_f64()
}

fn admin_api(pki: &Pki) {
    let dir = tempfile::tempdir().unwrap();
    let file = demo::prepare(
        dir.path(),
        &DemoOptions {
            dir: None,
            payments: 1_000,
            files: 1,
            files_per_epoch: 1,
            seed: 7,
            operator: DemoOperator::Rules,
            mode: demo::DemoMode::MicroBatch,
        },
    )
    .unwrap();
    let cfg = PipelineConfig::load(&file).unwrap();
    let host = WasmHost::new(None).unwrap();
    let pipeline = weir_engine::open(
        &cfg,
        &host,
        OpenOptions {
            ephemeral_checkpoint_ok: true,
            ..Default::default()
        },
    )
    .unwrap();
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        weir_admin::tokens::entry("bench", weir_admin::tokens::Scope::Read, TOKEN),
    )
    .unwrap();
    let plain = AdminConfig {
        listen: "127.0.0.1:0".into(),
        token: Some(TOKEN.into()),
        ..AdminConfig::default()
    };
    let https = AdminConfig {
        listen: "127.0.0.1:0".into(),
        tokens_file: Some(tokens),
        tls: Some(AdminTlsConfig {
            cert_file: pki.server_cert(),
            key_file: pki.server_key(),
            client_ca_file: None,
        }),
        ..AdminConfig::default()
    };
    let ca = reqwest::Certificate::from_pem(&std::fs::read(pki.ca()).unwrap()).unwrap();
    println!("Admin API: status calls per second, one client (same run)\n");
    println!("| API | kept-alive connection | new connection each | kept-alive vs HTTP | new-connection vs HTTP |");
    println!("|---|---|---|---|---|");
    let mut base = None;
    for (name, admin) in [("HTTP, one token", plain), ("HTTPS, tokens file", https)] {
        let settings = AdminSettings::resolve(&admin).unwrap();
        let server =
            AdminServer::start(settings, pipeline.control(), pipeline.telemetry(), None).unwrap();
        let url = format!(
            "{}/v1/pipelines/{}",
            server.url().replace("127.0.0.1", "localhost"),
            cfg.name
        );
        let builder = || {
            reqwest::blocking::Client::builder()
                .use_rustls_tls()
                .add_root_certificate(ca.clone())
        };
        let kept = builder().build().unwrap();
        // Warm up (connection, first status read).
        rate(&kept, &url, TOKEN, 50);
        let kept_rate = rate(&kept, &url, TOKEN, KEEP_ALIVE_REQUESTS);
        let fresh = builder().pool_max_idle_per_host(0).build().unwrap();
        let fresh_rate = rate(&fresh, &url, TOKEN, NEW_CONNECTION_REQUESTS);
        let (k0, f0) = *base.get_or_insert((kept_rate, fresh_rate));
        println!(
            "| {name} | {kept_rate:.0}/s | {fresh_rate:.0}/s | {:.2} | {:.2} |",
            kept_rate / k0,
            fresh_rate / f0
        );
    }
}

/// Kafka `payments` → fraud-rules alerting on every payment → PostgreSQL.
fn pipeline_toml(
    dir: &std::path::Path,
    bootstrap: &str,
    kafka_security: &str,
    pg_url: &str,
) -> String {
    format!(
        r#"name = "tls-bench"
checkpoint = "{dir}/checkpoint"
[trigger]
mode = "available-now"
[source]
kind = "kafka"
bootstrap_servers = "{bootstrap}"
topics = ["payments"]
max_offsets_per_trigger = 20000
{kafka_security}
{schema}
[operator]
path = "{guests}/fraud_rules.wasm"
config = {{ alert_threshold = 0.5, rules = [ {{ rule = "amount_above", threshold = 0.0, weight = 1.0 }} ] }}
[sink]
kind = "postgres"
url = "{pg_url}"
table = "alerts"
"#,
        dir = dir.display(),
        schema = weir_connectors::generator::payments::SCHEMA_TOML,
        guests = weir_cli::GUEST_DIR,
    )
}

fn payments() -> Vec<Vec<u8>> {
    (0..RECORDS as u64)
        .map(|i| {
            serde_json::to_vec(&weir_connectors::generator::payments::payment(11, i).0).unwrap()
        })
        .collect()
}

/// Runs the pipeline to the end; its time.
fn run(toml: &str, dir: &std::path::Path, host: &WasmHost) -> Duration {
    let cfg = PipelineConfig::parse(toml, dir).unwrap();
    let mut p = weir_engine::open(
        &cfg,
        host,
        OpenOptions {
            ephemeral_checkpoint_ok: true,
            ..Default::default()
        },
    )
    .unwrap();
    let started = Instant::now();
    let summary = p.run(host, &AtomicBool::new(false), &mut |_| {}).unwrap();
    assert_eq!(summary.rows_in, RECORDS as u64);
    started.elapsed()
}

fn pipelines(pki: &Pki) {
    let host = WasmHost::new(None).unwrap();
    let records = payments();
    let ca = pki.ca();
    let verify_full = |pg: &PgServer| {
        format!(
            "postgresql://{}:{}@localhost:{}/postgres?sslmode=verify-full&sslrootcert={}",
            weir_test_support::pg::USER,
            weir_test_support::pg::PASSWORD,
            pg.port,
            ca.display()
        )
    };
    let password = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(password.path(), "bench-password").unwrap();
    let tls = format!("tls = {{ ca_file = \"{}\" }}", ca.display());
    let sasl = format!(
        "{tls}\nsasl = {{ mechanism = \"SCRAM-SHA-512\", username = \"bench\", password = {{ file = \"{}\" }} }}",
        password.path().display()
    );
    println!("\nPipeline: Kafka → fraud-rules (every payment an alert) → PostgreSQL, {RECORDS} payments (same run)\n");
    println!("| Kafka | PostgreSQL | time | payments/s | vs clear |");
    println!("|---|---|---|---|---|");
    let mut base = None;
    for (kafka, postgres) in [
        ("plaintext", "plaintext"),
        ("TLS (stunnel)", "verify-full"),
        ("SCRAM-SHA-512 over TLS (stunnel)", "verify-full"),
    ] {
        // (A broker that requires logins gets its topics before it does.)
        let broker = match kafka {
            "plaintext" => Broker::start(),
            "TLS (stunnel)" => Broker::start_tls(pki, false),
            _ => Broker::start_sasl_ssl(pki, "bench", "bench-password", &[("payments", 3)]),
        };
        if !kafka.starts_with("SCRAM") {
            broker.create_topic("payments", 3);
        }
        broker.produce("payments", &records, |i| (i % 3) as i32);
        let pg = match postgres {
            "plaintext" => PgServer::start(),
            _ => PgServer::start_tls(pki, false),
        };
        let (security, url) = match kafka {
            "plaintext" => ("", pg.url("postgres")),
            "TLS (stunnel)" => (tls.as_str(), verify_full(&pg)),
            _ => (sasl.as_str(), verify_full(&pg)),
        };
        let dir = tempfile::tempdir().unwrap();
        let took = run(
            &pipeline_toml(dir.path(), &broker.bootstrap(), security, &url),
            dir.path(),
            &host,
        );
        assert_eq!(pg.count("SELECT count(*) FROM alerts") as usize, RECORDS);
        let per_s = RECORDS as f64 / took.as_secs_f64();
        let b = *base.get_or_insert(per_s);
        println!(
            "| {kafka} | {postgres} | {:.2} s | {per_s:.0} | {:.2} |",
            took.as_secs_f64(),
            per_s / b
        );
    }
}
