//! `cargo bench -p weir-cli --bench recovery`: how long a real-time
//! pipeline takes, after a crash, to commit the epoch it was in — however
//! many parts that epoch had logged.
//!
//! A real tansu broker on 127.0.0.1 (started and stopped here) holds the
//! payments. `weir run` reads them in real-time mode with parts of at most
//! 10 records (`max_offsets_per_trigger`) and a checkpoint interval no run
//! reaches, and is SIGKILLed once its part log holds the parts wanted: the
//! epoch is logged, never committed. The restart is timed from `open` to
//! the moment `commits/0` is written (the replay of every logged part, then
//! the sink and the commit).
//!
//! The baseline, in the same run and on the same broker: the same logged
//! parts read back one fetch each (what a replay did before the source
//! read them together; timed over the first 50 parts and scaled, at about
//! a quarter second a part), against [`Source::read_each`] in the engine's
//! chunks of 256.

use weir_test_support::broker;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use weir_connectors::connector::{SourceConnector, SourceContext};
use weir_connectors::kafka::plan::KafkaRange;
use weir_connectors::kafka::KafkaSourceConfig;
use weir_core::source::Source;
use weir_engine::config::PipelineConfig;
use weir_host::WasmHost;

const TOPIC: &str = "parts";
const PER_PART: u64 = 10;
/// Parts per read together, as the engine reads a replay's parts.
const READ_TOGETHER: usize = 256;
/// Parts timed one fetch each (about 0.25 s a part on tansu): the rest of
/// the epoch's parts would cost the same each, so the total is scaled up.
const ONE_EACH_SAMPLE: usize = 50;

fn source_table(bootstrap: &str) -> String {
    format!(
        "bootstrap_servers = \"{bootstrap}\"\ntopics = [\"{TOPIC}\"]\n\
         max_offsets_per_trigger = {PER_PART}\ntimeout = \"5s\"\n{}",
        weir_connectors::generator::payments::SCHEMA_TOML
    )
}

fn pipeline_toml(dir: &Path, bootstrap: &str) -> String {
    let demo = weir_cli::demo::pipeline_toml(1, weir_cli::demo::DemoOperator::Rules);
    let ops = &demo[demo.find("[operator]").unwrap()..demo.find("[sink]").unwrap()];
    format!(
        "name = \"recovery-bench\"\ncheckpoint = \"{dir}/checkpoint\"\n\
         [trigger]\nmode = \"real-time\"\ncheckpoint_interval = \"1h\"\n\
         [source]\nkind = \"kafka\"\n{source}\n{ops}\n\
         [sink]\nkind = \"files\"\npath = \"{dir}/alerts\"\n",
        dir = dir.display(),
        source = source_table(bootstrap),
        ops = ops.replace(
            "fraud_rules.wasm",
            &format!("{}/fraud_rules.wasm", weir_cli::GUEST_DIR)
        ),
    )
}

/// Whole lines in the part log of epoch 0 (a torn last line does not count).
fn logged(dir: &Path) -> usize {
    std::fs::read(dir.join("checkpoint/offsets/0.parts"))
        .map(|t| t.iter().filter(|&&b| b == b'\n').count())
        .unwrap_or(0)
}

/// `weir run` until epoch 0 has logged `parts` parts, then SIGKILL.
fn crash_with_parts(dir: &Path, file: &Path, parts: usize) -> usize {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["run", "--quiet"])
        .arg(file)
        .env("WEIR_CACHE_DIR", dir.join("cache"))
        .env("WEIR_LOG", "error")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while logged(dir) < parts {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "only {} parts logged",
            logged(dir)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!dir.join("checkpoint/commits/0").exists());
    logged(dir)
}

/// Opens the crashed pipeline and runs it until epoch 0 commits (the
/// component is compiled before: `main` warms the host's cache).
fn restart_to_commit(file: &Path, host: &WasmHost) -> (Duration, u64) {
    let cfg = PipelineConfig::load(file).unwrap();
    let started = Instant::now();
    let opts = weir_engine::OpenOptions {
        ephemeral_checkpoint_ok: true,
        ..Default::default()
    };
    let mut pipeline = weir_engine::open(&cfg, host, opts).unwrap();
    let stop = AtomicBool::new(false);
    let (mut took, mut rows) = (None, 0);
    pipeline
        .run(host, &stop, &mut |p| {
            if p.epoch == 0 {
                took = Some(started.elapsed());
                rows = p.rows_in;
                stop.store(true, Ordering::Relaxed);
            }
        })
        .unwrap();
    (took.expect("epoch 0 committed"), rows)
}

/// The logged parts' ranges read one fetch each (timed over the first
/// [`ONE_EACH_SAMPLE`], scaled to all), and together.
fn read_back(dir: &Path, bootstrap: &str) -> (Duration, Duration) {
    let parts = weir_core::parts::PartLog::new(dir.join("checkpoint/offsets"))
        .read(0)
        .unwrap();
    let ranges: Vec<KafkaRange> = parts
        .iter()
        .map(|p| serde_json::from_value(p.range.clone()).unwrap())
        .collect();
    let config: KafkaSourceConfig = toml::from_str(&source_table(bootstrap)).unwrap();
    let ctx = SourceContext {
        pipeline: "recovery-bench",
        batch_rows: 8192,
        partition: None,
        checkpoint: Path::new("unused: no registry"),
    };
    let mut source = config.open(&ctx).unwrap();
    let sample = &ranges[..ranges.len().min(ONE_EACH_SAMPLE)];
    let one_each = |source: &mut weir_connectors::kafka::KafkaSource| {
        let t = Instant::now();
        let rows: usize = sample
            .iter()
            .map(|r| rows_of(&source.read(r).unwrap()))
            .sum();
        (t.elapsed(), rows)
    };
    let together = |source: &mut weir_connectors::kafka::KafkaSource| {
        let t = Instant::now();
        let rows: usize = ranges
            .chunks(READ_TOGETHER)
            .flat_map(|chunk| source.read_each(chunk).unwrap())
            .map(|input| rows_of(&input))
            .sum();
        (t.elapsed(), rows)
    };
    // Each way twice, in alternation, so neither gets the warmer broker.
    let (mut each, mut all) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        each.push(one_each(&mut source));
        all.push(together(&mut source));
    }
    assert_eq!(all[0].1, all[1].1);
    assert_eq!(
        all[0].1 as u64,
        ranges.len() as u64 * PER_PART,
        "every record read"
    );
    let best = |v: &[(Duration, usize)]| v.iter().map(|(t, _)| *t).min().unwrap();
    let per_part = best(&each) / sample.len() as u32;
    (per_part * ranges.len() as u32, best(&all))
}

fn rows_of(input: &weir_core::source::EpochInput) -> usize {
    input.batches.iter().map(|b| b.num_rows()).sum()
}

fn main() {
    let broker = broker::Broker::start();
    let host = WasmHost::new(None).unwrap();
    let wasm = std::fs::read(format!("{}/fraud_rules.wasm", weir_cli::GUEST_DIR)).unwrap();
    host.load(&wasm, weir_host::Grants::default()).unwrap();
    let sizes = [100usize, 1_000, 3_000];
    let records = *sizes.last().unwrap() as u64 * PER_PART + 1_000;
    broker.create_topic(TOPIC, 3);
    weir_cli::feed::feed(&weir_cli::feed::FeedOptions {
        bootstrap_servers: broker.bootstrap(),
        topic: TOPIC.into(),
        payments: records,
        rate: None,
        seed: 21,
        start: 0,
    })
    .unwrap();

    println!(
        "\nreal-time recovery: restart to the commit of an epoch killed with N logged parts \
         ({PER_PART} records each, 3 partitions, tansu on SQLite)\n"
    );
    println!(
        "| logged parts | records replayed | restart → commits/0 | parts read one fetch each (from {ONE_EACH_SAMPLE} timed) | read together ({READ_TOGETHER} a fetch) | one each / together |"
    );
    println!("|---|---|---|---|---|---|");
    for parts in sizes {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pipeline.toml");
        std::fs::write(&file, pipeline_toml(dir.path(), &broker.bootstrap())).unwrap();
        let logged = crash_with_parts(dir.path(), &file, parts);
        let (each, together) = read_back(dir.path(), &broker.bootstrap());
        let (restart, rows) = restart_to_commit(&file, &host);
        println!(
            "| {logged} | {rows} | {:.2} s | {:.2} s | {:.3} s | {:.0}x |",
            restart.as_secs_f64(),
            each.as_secs_f64(),
            together.as_secs_f64(),
            each.as_secs_f64() / together.as_secs_f64()
        );
    }
}
