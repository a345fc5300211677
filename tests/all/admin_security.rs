//! The admin API as a door to production: HTTPS (certificates made by the
//! test with openssl, read again when they change), client certificates,
//! named tokens with scopes from a tokens file that is read again when it
//! changes, a client sending wrong tokens slowed down while the pipeline
//! keeps scoring, and the audit trail of who changed what, across a
//! restart and a SIGKILL.

use crate::common::Running;
use crate::hot_swap::{ok, sandbox_wasm, swap_pipeline, wait_committed, write_file, TOKEN};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;
use weir_test_support::tls::Pki;

/// `weir token new --name NAME --scope SCOPE --file FILE`: the token.
fn new_token(file: &Path, name: &str, scope: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["token", "new", "--name", name, "--scope", scope, "--file"])
        .arg(file)
        .output()
        .unwrap();
    ok(&out);
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(token.starts_with("weir_") && token.len() == 69, "{token}");
    let file_text = std::fs::read_to_string(file).unwrap();
    assert!(!file_text.contains(&token), "the file keeps digests only");
    token
}

/// A `weir` admin command against the `swap` pipeline at `url`, trusting
/// `ca` (if any), with `token`.
fn weir(url: &str, ca: Option<&Path>, token: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weir"));
    cmd.args(args)
        .args(["--pipeline", "swap", "--admin", url])
        .env("WEIR_ADMIN_TOKEN", token)
        .env("WEIR_LOG", "warn")
        .env_remove("WEIR_ADMIN_CA_FILE");
    if let Some(ca) = ca {
        cmd.env("WEIR_ADMIN_CA_FILE", ca);
    }
    cmd.output().unwrap()
}

fn failed(out: &Output) -> String {
    assert!(!out.status.success(), "expected a failure");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `curl` with `args`; returns (HTTP status, body).
fn curl(args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "-o", "-", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl (on the base image)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// The v2 component and its config, for deploys.
fn v2(dir: &Path, config: &str) -> (PathBuf, PathBuf) {
    let wasm = dir.join("v2.wasm");
    std::fs::write(&wasm, crate::common::variant(&sandbox_wasm(), "v2")).unwrap();
    let cfg = dir.join(format!("v2-{}.json", config.len()));
    std::fs::write(&cfg, config).unwrap();
    (wasm, cfg)
}

/// Waits until `check` holds (the API reads its files again every second).
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} took over 20 s"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A pipeline whose admin API serves HTTPS with the tokens of `tokens`.
fn https_pipeline(dir: &Path, pki: &Pki, tokens: &Path, more_tls: &str) -> PathBuf {
    let v1 = crate::common::guest("sandbox_tests");
    let admin = format!(
        "tokens_file = \"{}\"\n[admin.tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\n{more_tls}",
        tokens.display(),
        pki.server_cert().display(),
        pki.server_key().display()
    );
    swap_pipeline(dir, &v1, r#"{ mode = "echo", tag = "v1" }"#, &admin)
}

#[test]
fn https_with_scoped_tokens_rotated_without_restart_and_wrong_tokens_slowed() {
    let pki = Pki::new("weir-admin-test-ca", &["localhost"]);
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tokens = d.join("tokens.toml");
    let read = new_token(&tokens, "dashboard", "read");
    let ci = new_token(&tokens, "ci", "deploy");
    let oncall = new_token(&tokens, "oncall", "admin");
    let pipeline = https_pipeline(d, &pki, &tokens, "");
    let ckpt = d.join("checkpoint");
    // WEIR_ADMIN_TOKEN set for the server too: with a tokens file it is
    // not a way in.
    let run = Running::start(&pipeline, &ckpt, cache.path(), TOKEN, &[]);
    assert!(run.url.starts_with("https://127.0.0.1:"), "{}", run.url);
    let url = run.url.replace("127.0.0.1", "localhost");
    let ca = pki.ca();
    let ca_arg = ca.to_str().unwrap();
    write_file(d, 0, 10);
    wait_committed(&ckpt, 10);

    // Reading needs `read`; changing needs more, named in the refusal.
    let status = ok(&weir(&url, Some(&ca), &read, &["status"]));
    assert!(status.contains("active   version 1"), "{status}");
    let (wasm, cfg) = v2(d, r#"{"mode":"echo","tag":"v2"}"#);
    let deploy = [
        "deploy",
        wasm.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
    ];
    let refused = failed(&weir(&url, Some(&ca), &read, &deploy));
    assert!(
        refused.contains("token `dashboard` has scope `read`"),
        "{refused}"
    );
    assert!(refused.contains("needs scope `deploy`"), "{refused}");
    let bearer = |t: &str| format!("Authorization: Bearer {t}");
    let rollback_url = format!("{url}/v1/pipelines/swap/rollback");
    let (code, body) = curl(&[
        "--cacert",
        ca_arg,
        "-X",
        "POST",
        "-H",
        &bearer(&read),
        &rollback_url,
    ]);
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("needs scope `admin`"), "{body}");
    let deployed = ok(&weir(&url, Some(&ca), &ci, &deploy));
    assert!(deployed.contains("version 2"), "{deployed}");
    let (code, body) = curl(&[
        "--cacert",
        ca_arg,
        "-X",
        "POST",
        "-H",
        &bearer(&ci),
        &rollback_url,
    ]);
    assert_eq!(code, 403, "a deploy token cannot roll back: {body}");
    let rolled = ok(&weir(&url, Some(&ca), &oncall, &["rollback"]));
    assert!(rolled.contains("version 1 is active"), "{rolled}");
    // The dashboard's data and /metrics with a read token.
    let (code, metrics) = curl(&[
        "--cacert",
        ca_arg,
        "-H",
        &bearer(&read),
        &format!("{url}/metrics"),
    ]);
    assert_eq!(code, 200, "{metrics}");
    assert!(metrics.contains("weir_epochs_total"), "{metrics}");
    let (code, _) = curl(&["--cacert", ca_arg, &format!("{url}/dashboard")]);
    assert_eq!(code, 200);

    // Not HTTPS, or a server this client does not trust: refused.
    let (code, _) = curl(&[&format!("{}/v1/health", url.replace("https", "http"))]);
    assert_ne!(code, 200, "plain HTTP is not served");
    let untrusted = failed(&weir(&url, None, &read, &["status"]));
    assert!(untrusted.contains("certificate"), "{untrusted}");

    // Rotation: a new deploy token works within seconds, and removing the
    // old one's entry revokes it; the process is the same throughout.
    // (Asked from 127.0.0.3: the wrong tokens before the file is read
    // again count towards that address's backoff, not 127.0.0.1's.)
    let pid = run.pid();
    let trusting = |from: &str| {
        reqwest::blocking::Client::builder()
            .add_root_certificate(
                reqwest::Certificate::from_pem(&std::fs::read(&ca).unwrap()).unwrap(),
            )
            .local_address(from.parse::<std::net::IpAddr>().unwrap())
            .build()
            .unwrap()
    };
    let rotator = trusting("127.0.0.3");
    let status_with = |token: &str| {
        rotator
            .get(format!("{url}/v1/pipelines/swap/versions"))
            .bearer_auth(token)
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    let ci2 = new_token(&tokens, "ci-2", "deploy");
    eventually("the new token to be accepted", || status_with(&ci2) == 200);
    let kept: String = std::fs::read_to_string(&tokens)
        .unwrap()
        .split("[[token]]")
        .filter(|entry| !entry.contains("name = \"ci\"\n"))
        .collect::<Vec<_>>()
        .join("[[token]]");
    std::fs::write(&tokens, kept).unwrap();
    eventually("the removed token to be refused", || {
        status_with(&ci) == 401
    });
    assert_eq!(status_with(&ci2), 200, "the others stay");
    assert_eq!(run.pid(), pid);

    // 1,000 requests with wrong tokens from one address: after five, the
    // address waits (429, Retry-After) without its tokens being checked;
    // the pipeline keeps scoring; another address is served at once.
    let client = trusting("127.0.0.1");
    let (mut unauthorised, mut throttled) = (0, 0);
    for i in 0..1000 {
        if i % 100 == 0 {
            write_file(d, 1 + i / 100, 10);
        }
        let r = client
            .get(format!("{url}/v1/pipelines/swap"))
            .bearer_auth(format!("weir_guess_{i}"))
            .send()
            .unwrap();
        match r.status().as_u16() {
            401 => unauthorised += 1,
            429 => {
                assert!(r.headers().get("retry-after").is_some());
                throttled += 1;
            }
            other => panic!("request {i}: {other}"),
        }
    }
    assert!((5..50).contains(&unauthorised), "{unauthorised} checked");
    assert_eq!(unauthorised + throttled, 1000);
    wait_committed(&ckpt, 110);
    let blocked = client
        .get(format!("{url}/v1/pipelines/swap"))
        .bearer_auth(&read)
        .send()
        .unwrap();
    assert_eq!(blocked.status(), 429, "the address still waits");
    let elsewhere = trusting("127.0.0.2");
    let metrics = elsewhere
        .get(format!("{url}/metrics"))
        .bearer_auth(&read)
        .send()
        .unwrap();
    assert_eq!(metrics.status(), 200, "another address is served");
    let metrics = metrics.text().unwrap();
    let counter = |name: &str| -> u64 {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {metrics}"))
    };
    assert!(counter("weir_admin_auth_failures_total") >= unauthorised);
    assert!(counter("weir_admin_auth_throttled_total") >= throttled);
    assert_eq!(run.pid(), pid);
    run.interrupt();
}

#[test]
fn client_certificates_are_required_when_asked_and_a_renewed_certificate_is_served() {
    let pki = Pki::new("weir-admin-test-ca", &["localhost"]);
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The server's files are copies the test replaces, as a renewal does.
    let (cert, key) = (d.join("admin.pem"), d.join("admin.key"));
    std::fs::copy(pki.server_cert(), &cert).unwrap();
    std::fs::copy(pki.server_key(), &key).unwrap();
    let tokens = d.join("tokens.toml");
    let read = new_token(&tokens, "dashboard", "read");
    let v1 = crate::common::guest("sandbox_tests");
    let admin = format!(
        "tokens_file = \"{}\"\n[admin.tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\n\
         client_ca_file = \"{}\"\n",
        tokens.display(),
        cert.display(),
        key.display(),
        pki.ca().display()
    );
    let pipeline = swap_pipeline(d, &v1, r#"{ mode = "echo", tag = "v1" }"#, &admin);
    let run = Running::start(&pipeline, &d.join("checkpoint"), cache.path(), TOKEN, &[]);
    let url = run.url.replace("127.0.0.1", "localhost");
    let ca = pki.ca();

    let refused = failed(&weir(&url, Some(&ca), &read, &["versions"]));
    assert!(refused.contains("cannot reach the admin API"), "{refused}");
    let with_cert = |ca: &Path| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_weir"));
        cmd.args(["versions", "--pipeline", "swap", "--admin", &url])
            .env("WEIR_ADMIN_TOKEN", &read)
            .env("WEIR_ADMIN_CA_FILE", ca)
            .env("WEIR_ADMIN_CLIENT_CERT", pki.client_cert())
            .env("WEIR_ADMIN_CLIENT_KEY", pki.client_key())
            .env("WEIR_LOG", "warn");
        cmd.output().unwrap()
    };
    ok(&with_cert(&ca));

    // A renewed certificate from another authority: served from the next
    // connection on, without a restart.
    let renewed = Pki::new("weir-admin-renewed-ca", &["localhost"]);
    std::fs::copy(renewed.server_key(), d.join("new.key")).unwrap();
    std::fs::copy(renewed.server_cert(), d.join("new.pem")).unwrap();
    // Key first, then the certificate (each by a rename): in between the
    // pair does not match, and the API keeps the one before.
    std::fs::rename(d.join("new.key"), &key).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    ok(&with_cert(&ca));
    std::fs::rename(d.join("new.pem"), &cert).unwrap();
    eventually("the renewed certificate to be served", || {
        !with_cert(&ca).status.success()
    });
    ok(&with_cert(&renewed.ca()));
    run.interrupt();
}

/// The `weir audit --json` entries of the pipeline at `url`.
fn audit(url: &str, token: &str) -> Vec<Value> {
    let out = weir(url, None, token, &["audit", "--json"]);
    serde_json::from_str(&ok(&out)).unwrap()
}

/// (action, by) of each entry.
fn actions(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_string(),
                e["by"]["name"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn the_audit_trail_names_every_change_once_and_survives_a_restart_and_a_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tokens = d.join("tokens.toml");
    let ci = new_token(&tokens, "ci", "deploy");
    let oncall = new_token(&tokens, "oncall", "admin");
    let v1 = crate::common::guest("sandbox_tests");
    let pipeline = swap_pipeline(
        d,
        &v1,
        r#"{ mode = "echo", tag = "v1" }"#,
        &format!("tokens_file = \"{}\"", tokens.display()),
    );
    // A short deadline, so a looping version is rolled back automatically.
    let text = std::fs::read_to_string(&pipeline)
        .unwrap()
        .replace(r#"deadline = "60s""#, r#"deadline = "500ms""#);
    std::fs::write(&pipeline, text).unwrap();
    let ckpt = d.join("checkpoint");
    let run = Running::start(&pipeline, &ckpt, cache.path(), TOKEN, &[]);
    let url = run.url.clone();
    write_file(d, 0, 10);
    wait_committed(&ckpt, 10);

    let (wasm, echo) = v2(d, r#"{"mode":"echo","tag":"v2"}"#);
    let (_, tag3) = v2(d, r#"{"mode":"echo","tag":"v3-shadow"}"#);
    let (_, looping) = v2(d, r#"{"mode":"loop"}"#);
    let deploy = |cfg: &Path, extra: &[&str]| {
        let mut args = vec![
            "deploy",
            wasm.to_str().unwrap(),
            "--config",
            cfg.to_str().unwrap(),
        ];
        args.extend(extra);
        ok(&weir(&url, None, &ci, &args));
    };
    deploy(&echo, &[]); // register 2, activate 2
    deploy(&tag3, &["--shadow", "--key", "txn_id"]); // register 3, shadow 3
    ok(&weir(&url, None, &oncall, &["rollback"])); // 2 -> 1
    deploy(&looping, &[]); // register 4, activate 4
    write_file(d, 1, 10);
    write_file(d, 2, 10);
    wait_committed(&ckpt, 30);
    let trail = audit(&url, &ci);
    let ours: Vec<(String, String)> = actions(&trail)
        .into_iter()
        .filter(|(action, _)| action != "register")
        .collect();
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        ours,
        vec![
            pair("activate", "pipeline-file"),
            pair("activate", "ci"),
            pair("shadow", "ci"),
            pair("rollback", "oncall"),
            pair("activate", "ci"),
            pair("auto-rollback", "engine"),
        ],
        "{trail:#?}"
    );
    let registered = actions(&trail)
        .iter()
        .filter(|(a, by)| a == "register" && by == "ci")
        .count();
    assert_eq!(registered, 3, "{trail:#?}");
    let rollback = trail.iter().find(|e| e["action"] == "rollback").unwrap();
    assert!(
        rollback["by"]["client"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:"),
        "{rollback}"
    );
    assert_eq!(rollback["version"], 1);
    assert_eq!(rollback["replaced"], 2);
    assert_eq!(
        rollback["digest"],
        crate::hot_swap::digest(&sandbox_wasm()).as_str()
    );
    assert!(rollback["replaced_digest"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    let text = ok(&weir(&url, None, &ci, &["audit"]));
    assert!(
        text.contains("auto-rollback") && text.contains("oncall"),
        "{text}"
    );

    // SIGKILL, then the checkpoint alone, then a restart: the same trail.
    run.kill();
    let offline = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["checkpoint", "audit", "--json"])
        .arg(&ckpt)
        .output()
        .unwrap();
    let offline: Vec<Value> = serde_json::from_str(&ok(&offline)).unwrap();
    assert_eq!(offline, trail);
    let run = Running::start(&pipeline, &ckpt, cache.path(), TOKEN, &[]);
    assert_eq!(audit(&run.url, &ci), trail, "a restart adds nothing");
    run.interrupt();
}
