//! Helpers shared by the integration tests: guest components, pipeline files
//! and generated input.
#![allow(dead_code)]

pub use weir_test_support::{broker, browser, guests, pg, s3, worker};

use std::path::{Path, PathBuf};

/// `wasm` with a custom section appended: the same code under another
/// digest, i.e. a new version as far as the registry and the WAL go.
pub fn variant(wasm: &[u8], name: &str) -> Vec<u8> {
    fn leb(out: &mut Vec<u8>, mut n: usize) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let mut payload = Vec::new();
    leb(&mut payload, name.len());
    payload.extend_from_slice(name.as_bytes());
    payload.extend_from_slice(b"a test variant");
    let mut out = wasm.to_vec();
    out.push(0);
    leb(&mut out, payload.len());
    out.extend(payload);
    out
}

/// Path of a bundled guest component (built by runtime/build.rs).
pub fn guest(name: &str) -> PathBuf {
    guests::guest(name)
}

/// Writes `count` generated payments per file into `dir/input`.
pub fn write_input(dir: &Path, seed: u64, files: u64, per_file: u64) {
    for f in 0..files {
        write_payments(dir, seed, f, f * per_file..(f + 1) * per_file);
    }
}

/// Writes generated payments `range` as input file number `n`
/// (`dir/input/payments-<n>.jsonl`), dated so that the file source takes
/// files in the order of `n` (it orders by modification time, then name).
pub fn write_payments(dir: &Path, seed: u64, n: u64, range: std::ops::Range<u64>) {
    let bytes = weir_connectors::generator::payments::json_lines(
        seed,
        range.start,
        range.end - range.start,
    );
    write_input_file(dir, n, &bytes);
}

/// Writes `bytes` as input file number `n`, dated like [`write_payments`].
/// The file appears whole and already dated (written and dated beside the
/// input directory, then renamed into it): a running pipeline never plans
/// half a file.
pub fn write_input_file(dir: &Path, n: u64, bytes: &[u8]) {
    let (input, staging) = (dir.join("input"), dir.join("input-staging"));
    std::fs::create_dir_all(&input).unwrap();
    std::fs::create_dir_all(&staging).unwrap();
    let name = format!("payments-{n:04}.jsonl");
    std::fs::write(staging.join(&name), bytes).unwrap();
    date_as_input(&staging.join(&name), n);
    std::fs::rename(staging.join(&name), input.join(&name)).unwrap();
}

/// Dates `path` as input file number `n` (the file source takes files in
/// the order of their modification time).
pub fn date_as_input(path: &Path, n: u64) {
    let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000 + n);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

/// Opens and runs the pipeline of `toml` to its end on a new host; returns
/// the progress of every epoch.
pub fn run_epochs(
    dir: &Path,
    toml: &str,
) -> anyhow::Result<Vec<weir_core::progress::EpochProgress>> {
    let host = weir_host::WasmHost::new(None)?;
    let mut p = open_pipeline(dir, toml, &host)?;
    let mut epochs = Vec::new();
    p.run(
        &host,
        &std::sync::atomic::AtomicBool::new(false),
        &mut |e| epochs.push(e.clone()),
    )?;
    Ok(epochs)
}

/// A pipeline file over `dir/input` → `dir/out` with the given operator.
pub fn pipeline_toml(
    dir: &Path,
    operator: &Path,
    operator_config: &str,
    extra_source: &str,
    extra_operator: &str,
) -> String {
    format!(
        r#"name = "test"
checkpoint = "{dir}/checkpoint"
[trigger]
mode = "available-now"
[source]
kind = "files"
path = "{dir}/input"
max_files_per_trigger = 1
{schema}
{extra_source}
[operator]
path = "{op}"
{extra_operator}
config = {operator_config}
[sink]
kind = "files"
path = "{dir}/out"
"#,
        dir = dir.display(),
        op = operator.display(),
        schema = weir_connectors::generator::payments::SCHEMA_TOML,
    )
}

/// The demo's rules as an inline TOML table.
pub const DEMO_RULES_INLINE: &str = r#"{ alert_threshold = 0.7, rules = [
  { rule = "amount_above", threshold = 2500.0, weight = 0.5 },
  { rule = "country_mismatch", weight = 0.4 },
  { rule = "merchant_in", merchants = ["m-0666", "m-0777", "m-0999"], weight = 0.7 },
  { rule = "currency_not_in", currencies = ["USD", "EUR", "GBP"], weight = 0.2 } ] }"#;

/// `fraud-velocity`'s config as an inline TOML table: two rules and "more
/// than 5 payments per card in 60 s".
pub const VELOCITY_CONFIG: &str = r#"{ alert_threshold = 0.7, rules = [
  { rule = "amount_above", threshold = 2500.0, weight = 0.5 },
  { rule = "country_mismatch", weight = 0.4 } ],
  velocity = { window_ms = 60000, max_payments = 5, weight = 0.7 } }"#;

/// The rows of the files sink under `dir/out`, sorted: the multiset that
/// neither the tasks' order nor the epochs' split changes.
pub fn sorted_rows(dir: &Path) -> Vec<String> {
    let mut rows: Vec<String> = sink_files(&dir.join("out"))
        .into_iter()
        .flat_map(|(_, b)| {
            String::from_utf8(b)
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    rows.sort();
    rows
}

/// The files sink's rows under `out` as JSON with sorted keys, sorted:
/// comparable whoever wrote them and however the epochs and tasks split
/// them.
pub fn canonical_rows(out: &Path) -> Vec<String> {
    let mut rows: Vec<String> = sink_files(out)
        .into_iter()
        .flat_map(|(_, bytes)| {
            String::from_utf8(bytes)
                .unwrap()
                .lines()
                .map(|l| {
                    serde_json::from_str::<serde_json::Value>(l)
                        .unwrap()
                        .to_string()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    rows.sort();
    rows
}

/// The values of the text column `name` across `batches`, in order (a
/// null fails the test).
pub fn utf8_values(batches: &[arrow_array::RecordBatch], name: &str) -> Vec<String> {
    batches
        .iter()
        .flat_map(|b| {
            let column = b.column_by_name(name).unwrap();
            let column = column
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .unwrap();
            column
                .iter()
                .map(|v| v.unwrap().to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Every output file of the sink, sorted by name, with its bytes.
pub fn sink_files(out: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(out)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl") && !n.starts_with('.'))
        .map(|n| {
            let bytes = std::fs::read(out.join(&n)).unwrap();
            (n, bytes)
        })
        .collect();
    files.sort();
    files
}

/// Parses `toml` (relative paths from `dir`) and opens the pipeline on `host`.
/// Tests use temp dirs, so the ephemeral-checkpoint warning is off.
pub fn open_pipeline(
    dir: &Path,
    toml: &str,
    host: &weir_host::WasmHost,
) -> anyhow::Result<weir_engine::pipeline::Pipeline> {
    let cfg = weir_engine::config::PipelineConfig::parse(toml, dir)?;
    weir_engine::open(
        &cfg,
        host,
        weir_engine::OpenOptions {
            ephemeral_checkpoint_ok: true,
            ..Default::default()
        },
    )
}

/// A finished command's stdout and stderr together, for assertions.
pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `weir run --quiet PIPELINE` with its own compile cache and quiet logs.
pub fn weir_run_quiet(pipeline: &Path, cache: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_weir"));
    cmd.args(["run", "--quiet"])
        .arg(pipeline)
        .env("WEIR_CACHE_DIR", cache)
        .env("WEIR_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd
}

/// Fails if a sink's directory `dir` holds a temp file (`.tmp-` in its
/// name): a write that a crash interrupted must be cleaned up or replaced.
pub fn assert_no_temp_files(dir: &Path) {
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}

/// The highest numbered entry of a WAL directory.
pub fn latest_entry(dir: &Path) -> Option<u64> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .max()
}

/// Runs `weir run PIPELINE` as a child and SIGKILLs it `kills` times at
/// moments chosen by the run's own progress, then lets it finish. Returns
/// the kills and how many of them left an epoch planned but not committed.
///
/// Lives are not bounded by wall-clock guesses (a busy machine made those
/// flaky): most lives wait until the child plans an epoch of its own (a new
/// `offsets/N`) and are killed a random fraction of one epoch later —
/// usually mid-epoch, so each life commits about one epoch. The others are
/// killed during start-up or recovery, before any progress, and once three
/// epochs or fewer are left only those remain, so the run cannot finish
/// before the kills are done. `clean_checkpoint` and `clean_time` are those
/// of the same pipeline run uninterrupted; re-running it (nothing left to
/// do) measures start-up.
pub fn kill_and_restart(
    pipeline: &Path,
    checkpoint: &Path,
    cache: &Path,
    clean: (&Path, &Path),
    clean_time: std::time::Duration,
    kills: usize,
) -> (usize, usize) {
    use rand::{Rng, SeedableRng};
    use std::time::{Duration, Instant};
    let (clean_pipeline, clean_checkpoint) = clean;
    let started = Instant::now();
    assert!(weir_run_quiet(clean_pipeline, cache)
        .status()
        .unwrap()
        .success());
    let startup = started.elapsed();
    let epochs = latest_entry(&clean_checkpoint.join("commits")).expect("clean run committed") + 1;
    assert!(
        epochs >= kills as u64,
        "{epochs} epochs are too few for {kills} kills"
    );
    let epoch_time = clean_time.saturating_sub(startup) / epochs as u32;
    let offsets = checkpoint.join("offsets");
    let committed = || latest_entry(&checkpoint.join("commits")).map_or(0, |n| n + 1);
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xC0FFEE);
    let (mut done, mut mid_epoch) = (0, 0);
    loop {
        let planned_before = latest_entry(&offsets);
        let left = epochs.saturating_sub(committed());
        let mut child = weir_run_quiet(pipeline, cache).spawn().unwrap();
        if done >= kills {
            assert!(child.wait().unwrap().success(), "final run failed");
            break;
        }
        // A progressing life commits one epoch, rarely two.
        let in_startup = left <= 3 || rng.random_bool(0.3);
        let delay = if in_startup {
            startup.mul_f64(rng.random_range(0.0..0.5))
        } else {
            let since = Instant::now();
            while latest_entry(&offsets) <= planned_before {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                assert!(since.elapsed() < Duration::from_secs(120), "no progress");
                std::thread::sleep(Duration::from_millis(1));
            }
            epoch_time.mul_f64(rng.random_range(0.0..0.5))
        };
        std::thread::sleep(delay);
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "run failed before it was killed");
            break;
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        done += 1;
        let planned = latest_entry(&offsets);
        if planned.is_some() && planned != latest_entry(&checkpoint.join("commits")) {
            mid_epoch += 1;
        }
    }
    eprintln!("{done} kills, {mid_epoch} between offsets/N and commits/N");
    (done, mid_epoch)
}

/// Kills per SIGKILL crash test: 20, or `WEIR_CRASH_KILLS` (e.g. 100 for a
/// long campaign by hand).
pub fn crash_kills() -> usize {
    std::env::var("WEIR_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

/// Epochs a crash test needs for [`crash_kills`] kills: its usual count,
/// or more when more kills are asked for (each life commits about one).
pub fn crash_epochs(usual: u64) -> u64 {
    usual.max(crash_kills() as u64 * 3 / 2 + 10)
}

/// The SIGKILL crash test's common part. `setup(dir, run)` writes a
/// pipeline into `dir` and returns its file; `run` is `"clean"` or
/// `"crashy"`, for pipelines that must write to different places (tables)
/// outside `dir`. The clean pipeline runs uninterrupted and timed; the
/// crashy one is killed at least `kills` times (see [`kill_and_restart`])
/// and must have had a kill between `offsets/N` and `commits/N`. Returns
/// both directories, for the caller to compare what the sinks hold.
pub fn uninterrupted_and_killed(
    setup: impl Fn(&Path, &str) -> PathBuf,
    kills: usize,
) -> (tempfile::TempDir, tempfile::TempDir) {
    let cache = tempfile::tempdir().unwrap();
    let clean = tempfile::tempdir().unwrap();
    let clean_pipeline = setup(clean.path(), "clean");
    let started = std::time::Instant::now();
    let run = weir_run_quiet(&clean_pipeline, cache.path())
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "the uninterrupted run failed ({}): {}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    let clean_time = started.elapsed();

    let crashy = tempfile::tempdir().unwrap();
    let pipeline = setup(crashy.path(), "crashy");
    let (done, mid_epoch) = kill_and_restart(
        &pipeline,
        &crashy.path().join("checkpoint"),
        cache.path(),
        (&clean_pipeline, &clean.path().join("checkpoint")),
        clean_time,
        kills,
    );
    assert!(done >= kills, "only {done} kills before the run finished");
    assert!(
        mid_epoch >= 1,
        "no kill landed between offsets/N and commits/N"
    );
    (clean, crashy)
}

/// Polls `done` every 20 ms; fails the test after a minute (a guard against
/// hangs, not a performance bound).
pub fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Input rows of all committed epochs in `checkpoint` (0 before it exists).
pub fn committed_rows(checkpoint: &Path) -> u64 {
    weir_core::checkpoint::Checkpoint::inspect(checkpoint)
        .and_then(|c| c.committed_rows())
        .unwrap_or(0)
}

/// A pipeline running on its own thread until the returned flag is set.
pub struct Background {
    pub stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: std::thread::JoinHandle<anyhow::Result<weir_engine::pipeline::RunSummary>>,
}

impl Background {
    /// Opens and runs the pipeline of `toml` on a new thread and host.
    pub fn start(dir: &Path, toml: String) -> Background {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (dir, flag) = (dir.to_path_buf(), stop.clone());
        let handle = std::thread::spawn(move || {
            let host = weir_host::WasmHost::new(None)?;
            let mut p = open_pipeline(&dir, &toml, &host)?;
            p.run(&host, &flag, &mut |_| {})
        });
        Background { stop, handle }
    }

    /// False once the pipeline has returned (finished or failed).
    pub fn is_running(&self) -> bool {
        !self.handle.is_finished()
    }

    /// Asks the pipeline to stop after its current epoch and waits for it.
    pub fn stop(self) -> anyhow::Result<weir_engine::pipeline::RunSummary> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle.join().expect("pipeline thread panicked")
    }
}

/// `weir run --quiet` on `pipeline` as a child process with its admin API
/// (the pipeline must set `[admin] listen`; port 0 is fine), killed if the
/// test fails.
pub struct Running {
    child: Option<std::process::Child>,
    pub url: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        // A failed test must not leave the pipeline running.
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Running {
    /// Starts it with `token` as `WEIR_ADMIN_TOKEN` and `extra` arguments,
    /// and waits for the admin API.
    pub fn start(
        pipeline: &Path,
        checkpoint: &Path,
        cache: &Path,
        token: &str,
        extra: &[&str],
    ) -> Running {
        let url_file = checkpoint.join("admin-url");
        let _ = std::fs::remove_file(&url_file);
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["run", "--quiet"])
            .args(extra)
            .arg(pipeline)
            .env("WEIR_ADMIN_TOKEN", token)
            .env("WEIR_CACHE_DIR", cache)
            .env("WEIR_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap();
        wait_for("the admin API", || {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("weir run exited before serving the admin API: {status}");
            }
            url_file.exists()
        });
        let url = std::fs::read_to_string(&url_file)
            .unwrap()
            .trim()
            .to_string();
        Running {
            child: Some(child),
            url,
        }
    }

    /// The process id of `weir run`.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, std::process::Child::id)
    }

    /// Stops the pipeline like Ctrl-C does (after the current epoch).
    pub fn interrupt(mut self) {
        let mut child = self.child.take().unwrap();
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        assert!(child.wait().unwrap().success(), "weir run failed");
    }

    /// SIGKILL: the process dies wherever it is.
    pub fn kill(mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
