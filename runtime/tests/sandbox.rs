//! Real misbehaving guest components against the real wasmtime host: each is
//! stopped, reported with pipeline, epoch, digest and cause, and the same
//! host then runs the next pipeline normally.

mod common;

use common::{guest, pipeline_toml, sink_files, write_input};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::Duration;
use weir::engine::EpochFailed;
use weir::operator::{OperatorFailure, WasmHost};

/// Runs a sandbox-tests pipeline in `mode` on `host`; returns the run's error.
fn run_mode(host: &WasmHost, mode: &str, extra_operator: &str) -> anyhow::Result<()> {
    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 7, 2, 500);
    let toml = pipeline_toml(
        dir.path(),
        &guest("sandbox_tests"),
        &format!(r#"{{ mode = "{mode}" }}"#),
        "",
        extra_operator,
    );
    let mut p = common::open_pipeline(dir.path(), &toml, host)?;
    p.run(host, &AtomicBool::new(false), &mut |_| {})?;
    let out = sink_files(&dir.path().join("out"));
    assert_eq!(out.len(), 2, "echo writes one file per epoch");
    Ok(())
}

fn failure_of(err: anyhow::Error) -> (String, EpochFailed) {
    let text = format!("{err:#}");
    match err.downcast::<EpochFailed>() {
        Ok(f) => (text, f),
        Err(other) => panic!("expected an epoch failure, got: {other:#}"),
    }
}

/// Runs `f` on another thread and fails the test if it does not return:
/// a guest that is not stopped would otherwise hang the suite forever.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(120))
        .unwrap_or_else(|_| panic!("{what} was not stopped"))
}

#[test]
fn misbehaving_guests_fail_their_epoch_and_the_host_stays_healthy() {
    within("the misbehaving guests", || {
        let host = WasmHost::new(None).unwrap();

        let (text, f) = failure_of(run_mode(&host, "loop", r#"deadline = "300ms""#).unwrap_err());
        assert!(
            matches!(f.cause, OperatorFailure::Deadline(d) if d == Duration::from_millis(300)),
            "{text}"
        );
        assert_eq!((f.pipeline.as_str(), f.epoch), ("test", 0));
        assert!(f.digest.starts_with("sha256:"), "{text}");
        assert!(
            text.contains("pipeline `test` epoch 0: operator sha256:"),
            "{text}"
        );
        assert!(text.contains("deadline"), "{text}");
        run_mode(&host, "echo", "").expect("host healthy after a runaway loop");

        let (text, f) = failure_of(run_mode(&host, "bomb", r#"memory = "64MiB""#).unwrap_err());
        match f.cause {
            OperatorFailure::MemoryLimit { requested, limit } => {
                assert_eq!(limit, 64 << 20);
                assert!(requested > limit, "{text}");
            }
            other => panic!("expected a memory-limit failure, got {other}"),
        }
        run_mode(&host, "echo", "").expect("host healthy after a memory bomb");

        let (text, f) = failure_of(run_mode(&host, "trap", "").unwrap_err());
        assert!(matches!(f.cause, OperatorFailure::Trap { .. }), "{text}");
        assert!(text.contains("unreachable"), "{text}");
        run_mode(&host, "echo", "").expect("host healthy after a trap");

        let (text, f) = failure_of(run_mode(&host, "panic", "").unwrap_err());
        assert!(matches!(f.cause, OperatorFailure::Trap { .. }), "{text}");
        assert!(
            text.contains("sandbox-tests was told to panic"),
            "guest stderr is reported: {text}"
        );

        let (text, f) = failure_of(run_mode(&host, "fail", "").unwrap_err());
        assert!(matches!(f.cause, OperatorFailure::Failed(_)), "{text}");

        let (text, f) = failure_of(run_mode(&host, "bad-output", "").unwrap_err());
        assert!(
            matches!(f.cause, OperatorFailure::InvalidOutput(_)),
            "{text}"
        );
        assert!(text.contains("output column `b`"), "{text}");

        run_mode(&host, "echo", "").expect("host healthy at the end");
    });
}

#[test]
fn a_failed_epoch_is_not_committed() {
    let host = WasmHost::new(None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 7, 1, 100);
    let toml = pipeline_toml(
        dir.path(),
        &guest("sandbox_tests"),
        r#"{ mode = "fail" }"#,
        "",
        "",
    );
    let mut p = common::open_pipeline(dir.path(), &toml, &host).unwrap();
    assert!(p.run(&host, &AtomicBool::new(false), &mut |_| {}).is_err());
    let ck = dir.path().join("checkpoint");
    assert!(ck.join("offsets/0").exists());
    assert!(!ck.join("commits/0").exists());
}

#[test]
fn importing_the_filesystem_is_refused_at_load() {
    let host = WasmHost::new(None).unwrap();
    let wasm = std::fs::read(guest("sandbox_escape")).unwrap();
    let err = host
        .load(&wasm, Default::default())
        .err()
        .expect("must be refused");
    let text = format!("{err:#}");
    assert!(text.contains("wasi:filesystem/preopens"), "{text}");
    assert!(text.contains("does not grant"), "{text}");

    // Granting clocks does not open the filesystem.
    let grants = weir::operator::Grants {
        clocks: true,
        random: false,
    };
    let text = format!("{:#}", host.load(&wasm, grants).err().unwrap());
    assert!(
        text.contains("wasi:filesystem") && !text.contains("wall-clock"),
        "{text}"
    );
}

#[test]
fn a_module_that_is_not_a_component_is_refused() {
    let host = WasmHost::new(None).unwrap();
    // A core module (magic + version 1), not a component.
    let err = host
        .load(b"\0asm\x01\0\0\0", Default::default())
        .err()
        .unwrap();
    assert!(
        format!("{err:#}").contains("compiling the operator"),
        "{err:#}"
    );
}

#[test]
fn bad_operator_config_is_refused_before_any_epoch() {
    let host = WasmHost::new(None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_input(dir.path(), 7, 1, 10);
    let toml = pipeline_toml(
        dir.path(),
        &guest("fraud_rules"),
        r#"{ alert_threshold = 0.5, rules = [ { rule = "amount_abov", weight = 1.0 } ] }"#,
        "",
        "",
    );
    let err = common::open_pipeline(dir.path(), &toml, &host)
        .err()
        .unwrap();
    let text = format!("{err:#}");
    assert!(text.contains("rejected its configuration"), "{text}");
    assert!(text.contains("amount_abov"), "{text}");
    assert!(!dir.path().join("checkpoint/offsets/0").exists());
}

#[test]
fn compiled_components_are_cached_and_reused() {
    let cache = tempfile::tempdir().unwrap();
    let wasm = std::fs::read(guest("fraud_rules")).unwrap();
    let host = WasmHost::new(Some(cache.path().to_path_buf())).unwrap();
    let first = host.load(&wasm, Default::default()).unwrap();
    let artifacts: Vec<_> = walk(cache.path());
    assert_eq!(artifacts.len(), 1, "one artifact cached: {artifacts:?}");
    let second = WasmHost::new(Some(cache.path().to_path_buf()))
        .unwrap()
        .load(&wasm, Default::default())
        .unwrap();
    assert_eq!(first.digest(), second.digest());
    drop((first, second, host));
    // A corrupt artifact is ignored and rewritten, never fatal.
    std::fs::write(&artifacts[0], b"garbage").unwrap();
    WasmHost::new(Some(cache.path().to_path_buf()))
        .unwrap()
        .load(&wasm, Default::default())
        .unwrap();
    assert_ne!(std::fs::read(&artifacts[0]).unwrap(), b"garbage");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}
