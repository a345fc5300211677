//! Secrets never leak: a pipeline that logs in to Kafka with SCRAM over TLS
//! (password from a file), writes to PostgreSQL over `verify-full`
//! (password in the connection string from the environment), and serves
//! its admin API over HTTPS with named tokens runs, is deployed to, is
//! sent wrong tokens and is started with wrong passwords. Every secret is
//! distinctive (new each run); none may appear in anything the runs
//! printed (debug logs included), wrote (checkpoint, output, compile
//! cache) or answered (status, progress, audit, metrics, versions).

use crate::common::broker::Broker;
use crate::common::pg::PgServer;
use crate::kafka::payments;
use std::path::{Path, PathBuf};
use std::process::Command;
use weir_test_support::tls::Pki;

/// A value no file or message holds by chance.
fn distinctive(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{what}-{nanos:09}-leakcheck")
}

/// Kafka (SCRAM over TLS) → echo → PostgreSQL (`verify-full`), admin API
/// over HTTPS with `tokens`.
fn pipeline(
    dir: &Path,
    broker: &Broker,
    pki: &Pki,
    password_file: &Path,
    tokens: &Path,
) -> PathBuf {
    let toml = format!(
        r#"name = "secrets"
checkpoint = "{dir}/checkpoint"
[trigger]
mode = "processing-time"
interval = "100ms"
[source]
kind = "kafka"
bootstrap_servers = "{bootstrap}"
topics = ["payments"]
timeout = "3s"
tls = {{ ca_file = "{ca}" }}
sasl = {{ mechanism = "SCRAM-SHA-512", username = "weir-fraud", password = {{ file = "{password}" }} }}
{schema}
[operator]
path = "{op}"
config = {{ mode = "echo" }}
[sink]
kind = "postgres"
url_env = "WEIR_TEST_PG_URL"
table = "alerts"
[admin]
listen = "127.0.0.1:0"
tokens_file = "{tokens}"
[admin.tls]
cert_file = "{cert}"
key_file = "{key}"
"#,
        dir = dir.display(),
        bootstrap = broker.bootstrap(),
        ca = pki.ca().display(),
        password = password_file.display(),
        op = crate::common::guest("sandbox_tests").display(),
        schema = weir_connectors::generator::payments::SCHEMA_TOML,
        tokens = tokens.display(),
        cert = pki.server_cert().display(),
        key = pki.server_key().display(),
    );
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, toml).unwrap();
    path
}

/// `weir ARGS` with `env`; everything it printed, and whether it succeeded.
fn weir(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .envs(env.iter().copied())
        .env("WEIR_LOG", "debug")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Every file under `root` but `except`, as (path, bytes).
fn files(root: &Path, except: &[&Path]) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if !except.contains(&path.as_path()) {
                if let Ok(bytes) = std::fs::read(&path) {
                    found.push((path, bytes));
                }
            }
        }
    }
    found
}

/// A child process killed if the test fails before it stops it.
struct KillOnDrop(Option<std::process::Child>);

impl KillOnDrop {
    fn get(&mut self) -> &mut std::process::Child {
        self.0.as_mut().expect("the child is still held")
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Rows in the sink's table (none before the sink made it).
fn alerts(pg: &PgServer) -> i64 {
    match pg.count("SELECT count(*) FROM pg_tables WHERE tablename = 'alerts'") {
        0 => 0,
        _ => pg.count("SELECT count(*) FROM alerts"),
    }
}

fn holds(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
#[ignore = "needs tansu and PostgreSQL"]
fn no_secret_appears_in_logs_output_checkpoint_metrics_or_status() {
    let kafka_password = distinctive("kafkaPw");
    let kafka_wrong = distinctive("kafkaWrong");
    let pg_password = distinctive("pgPw");
    let pg_wrong = distinctive("pgWrong");
    let wrong_token = distinctive("weir_guessedToken");

    let pki = Pki::new("weir-test-ca", &["localhost"]);
    let broker = Broker::start_sasl_ssl(&pki, "weir-fraud", &kafka_password, &[("payments", 2)]);
    broker.produce("payments", &payments(100), |i| (i % 2) as i32);
    let pg = PgServer::start_tls(&pki, false);
    pg.execute(&format!("ALTER ROLE weir PASSWORD '{pg_password}'"));
    let pg_url = |password: &str| {
        format!(
            "postgresql://weir:{password}@localhost:{}/postgres?sslmode=verify-full&sslrootcert={}",
            pg.port,
            pki.ca().display()
        )
    };

    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let d = dir.path();
    let secrets_dir = tempfile::tempdir().unwrap();
    let password_file = secrets_dir.path().join("kafka-password");
    std::fs::write(&password_file, format!("{kafka_password}\n")).unwrap();
    let tokens = d.join("tokens.toml");
    let token = |name: &str, scope: &str| {
        let (ok, text) = weir(
            &[
                "token",
                "new",
                "--name",
                name,
                "--scope",
                scope,
                "--file",
                tokens.to_str().unwrap(),
            ],
            &[],
        );
        assert!(ok, "{text}");
        text.lines().next().unwrap().trim().to_string()
    };
    let (read, deploy) = (token("dashboard", "read"), token("ci", "deploy"));
    let pipeline = pipeline(d, &broker, &pki, &password_file, &tokens);
    let mut printed = String::new();

    // The run, with debug logs, to a file.
    let log = d.join("run.log");
    let child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["run"])
        .arg(&pipeline)
        .env("WEIR_TEST_PG_URL", pg_url(&pg_password))
        .env("WEIR_CACHE_DIR", cache.path())
        .env("WEIR_LOG", "debug")
        .stdout(std::fs::File::create(d.join("run.out")).unwrap())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(Some(child));
    let url_file = d.join("checkpoint/admin-url");
    crate::common::wait_for("the admin API", || {
        assert!(
            child.get().try_wait().unwrap().is_none(),
            "{}",
            std::fs::read_to_string(&log).unwrap()
        );
        url_file.exists()
    });
    let url = std::fs::read_to_string(&url_file)
        .unwrap()
        .trim()
        .replace("127.0.0.1", "localhost");
    crate::common::wait_for("100 rows in PostgreSQL", || alerts(&pg) >= 100);

    let ca = pki.ca();
    let admin = |args: &[&str], token: &str| {
        let mut all = args.to_vec();
        all.extend(["--pipeline", "secrets", "--admin", &url]);
        let (_, text) = weir(
            &all,
            &[
                ("WEIR_ADMIN_TOKEN", token),
                ("WEIR_ADMIN_CA_FILE", ca.to_str().unwrap()),
            ],
        );
        text
    };
    let v2 = d.join("v2.wasm");
    let v1 = std::fs::read(crate::common::guest("sandbox_tests")).unwrap();
    std::fs::write(&v2, crate::common::variant(&v1, "v2")).unwrap();
    let deployed = admin(&["deploy", v2.to_str().unwrap()], &deploy);
    assert!(deployed.contains("version 2"), "{deployed}");
    let refused = admin(&["deploy", v2.to_str().unwrap()], &read);
    assert!(refused.contains("needs scope `deploy`"), "{refused}");
    printed += &(deployed + &refused);
    for _ in 0..10 {
        printed += &admin(&["status"], &wrong_token);
    }
    assert!(printed.contains("wrong bearer token"), "{printed}");
    broker.produce("payments", &payments(200)[100..], |i| (i % 2) as i32);
    crate::common::wait_for("200 rows in PostgreSQL", || alerts(&pg) >= 200);
    for args in [&["status"][..], &["versions"], &["audit", "--json"]] {
        printed += &admin(args, &read);
    }
    let client = reqwest::blocking::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(&ca).unwrap()).unwrap())
        .local_address("127.0.0.2".parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap();
    for path in [
        "/metrics",
        "/v1/pipelines/secrets",
        "/v1/pipelines/secrets/progress",
        "/v1/pipelines/secrets/history",
        "/v1/pipelines/secrets/versions",
        "/v1/whoami",
    ] {
        let r = client
            .get(format!("{url}{path}"))
            .bearer_auth(&read)
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        printed += &r.text().unwrap();
    }
    // SAFETY: signalling our own child process.
    let mut child = child.0.take().unwrap();
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert!(child.wait().unwrap().success());
    let (ok, text) = weir(
        &["checkpoint", "show", d.join("checkpoint").to_str().unwrap()],
        &[],
    );
    assert!(ok, "{text}");
    printed += &text;

    // Wrong passwords: refused, and the refusal does not repeat them.
    let wrong = tempfile::tempdir().unwrap();
    std::fs::write(&password_file, format!("{kafka_wrong}\n")).unwrap();
    let p = self::pipeline(wrong.path(), &broker, &pki, &password_file, &tokens);
    let (ok, text) = weir(
        &["run", p.to_str().unwrap()],
        &[("WEIR_TEST_PG_URL", &pg_url(&pg_password))],
    );
    assert!(!ok && text.contains("SASL authentication error"), "{text}");
    printed += &text;
    std::fs::write(&password_file, format!("{kafka_password}\n")).unwrap();
    let wrong_pg = tempfile::tempdir().unwrap();
    let p = self::pipeline(wrong_pg.path(), &broker, &pki, &password_file, &tokens);
    let (ok, text) = weir(
        &["run", p.to_str().unwrap()],
        &[("WEIR_TEST_PG_URL", &pg_url(&pg_wrong))],
    );
    assert!(
        !ok && text.contains("password authentication failed"),
        "{text}"
    );
    printed += &text;

    // The scan: it finds a secret where one is (the password file), so
    // it would find one anywhere else.
    let secrets = [
        ("the Kafka password", &kafka_password),
        ("the wrong Kafka password", &kafka_wrong),
        ("the PostgreSQL password", &pg_password),
        ("the wrong PostgreSQL password", &pg_wrong),
        ("the read token", &read),
        ("the deploy token", &deploy),
        ("the wrong token", &wrong_token),
    ];
    assert!(holds(
        &std::fs::read(&password_file).unwrap(),
        &kafka_password
    ));
    let mut written = files(d, &[]);
    written.extend(files(cache.path(), &[]));
    written.extend(files(wrong.path(), &[]));
    written.extend(files(wrong_pg.path(), &[]));
    assert!(written.iter().any(|(p, _)| p.ends_with("run.log")));
    assert!(written.len() > 20, "{} files", written.len());
    for (what, secret) in secrets {
        assert!(
            !printed.contains(secret.as_str()),
            "{what} was printed or answered"
        );
        for (path, bytes) in &written {
            assert!(!holds(bytes, secret), "{what} is in {}", path.display());
        }
    }
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.len() > 10_000, "debug logs were written");
    eprintln!(
        "scanned {} files ({} bytes) and {} bytes of output for {} secrets",
        written.len(),
        written.iter().map(|(_, b)| b.len()).sum::<usize>(),
        printed.len(),
        secrets.len()
    );
}
