//! The `/metrics` endpoint's figures in Prometheus' text format, through
//! the `prometheus-client` crate: counters that only grow (rows, epochs,
//! dead letters, log events), histograms of epoch and phase durations, and
//! gauges of the newest epoch (rates, lag, state size, watermark, version).
//! Every series carries a `pipeline` label. Counters start at zero with the
//! process, as Prometheus expects; history across restarts lives in
//! [`super::history`].

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::LazyLock;
use weir_core::progress::EpochProgress;
use weir_core::source::Backlog;

type FloatGauge = Gauge<f64, AtomicU64>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabel {
    phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabel {
    task: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutputLabel {
    output: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UnitLabel {
    unit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct LevelLabel {
    pub level: &'static str,
}

/// Warnings and errors logged by the process (see [`super::recent`]);
/// process-wide because the log is.
pub(super) static LOG_EVENTS: LazyLock<Family<LevelLabel, Counter>> =
    LazyLock::new(Family::default);

fn seconds() -> Histogram {
    // 1 ms … ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The metrics of one pipeline.
pub struct Metrics {
    registry: Registry,
    epochs: Counter,
    replayed: Counter,
    failures: Counter,
    isolated: Counter,
    rollbacks: Counter,
    rows_in: Counter,
    rows_out: Counter,
    dead_letters: Counter,
    late_rows: Counter,
    duplicates: Counter,
    epoch_seconds: Histogram,
    latency_seconds: Histogram,
    phase_seconds: Family<PhaseLabel, Histogram, fn() -> Histogram>,
    input_rate: FloatGauge,
    processed_rate: FloatGauge,
    last_epoch: Gauge,
    backlog: Family<UnitLabel, Gauge>,
    backlog_files: Gauge,
    state_keys: Gauge,
    state_bytes: Gauge,
    watermark: FloatGauge,
    version: Gauge,
    trigger_interval: FloatGauge,
    backlog_growing: Gauge,
    task_rows_in: Family<TaskLabel, Counter>,
    task_rows_out: Family<TaskLabel, Counter>,
    task_operator_seconds: Family<TaskLabel, Counter<f64, AtomicU64>>,
    named_output_rows: Family<OutputLabel, Counter>,
    lookup_refresh_failures: Counter,
}

impl Metrics {
    /// Metrics labelled `pipeline="<pipeline>"` (and `partition="<p>"`
    /// for a cluster's partition).
    pub fn new(pipeline: &str, partition: Option<i32>) -> Self {
        let mut m = Metrics {
            registry: Registry::default(),
            epochs: Counter::default(),
            replayed: Counter::default(),
            failures: Counter::default(),
            isolated: Counter::default(),
            rollbacks: Counter::default(),
            rows_in: Counter::default(),
            rows_out: Counter::default(),
            dead_letters: Counter::default(),
            late_rows: Counter::default(),
            duplicates: Counter::default(),
            epoch_seconds: seconds(),
            // 0.25 ms … ~2 min.
            latency_seconds: Histogram::new(exponential_buckets(0.000_25, 2.0, 20)),
            phase_seconds: Family::new_with_constructor(seconds as fn() -> Histogram),
            input_rate: FloatGauge::default(),
            processed_rate: FloatGauge::default(),
            last_epoch: Gauge::default(),
            backlog: Family::default(),
            backlog_files: Gauge::default(),
            state_keys: Gauge::default(),
            state_bytes: Gauge::default(),
            watermark: FloatGauge::default(),
            version: Gauge::default(),
            trigger_interval: FloatGauge::default(),
            backlog_growing: Gauge::default(),
            task_rows_in: Family::default(),
            task_rows_out: Family::default(),
            task_operator_seconds: Family::default(),
            named_output_rows: Family::default(),
            lookup_refresh_failures: Counter::default(),
        };
        let mut r = m
            .registry
            .sub_registry_with_prefix("weir")
            .sub_registry_with_label(("pipeline".into(), pipeline.to_string().into()));
        if let Some(p) = partition {
            r = r.sub_registry_with_label(("partition".into(), p.to_string().into()));
        }
        r.register("epochs", "Epochs committed", m.epochs.clone());
        r.register(
            "event_to_emit_latency_seconds",
            "Output rows by time from their event (the [event_time] column) to the sink's acknowledgement",
            m.latency_seconds.clone(),
        );
        r.register(
            "replayed_epochs",
            "Epochs re-run after a restart (planned by an earlier run, never committed)",
            m.replayed.clone(),
        );
        r.register(
            "epoch_failures",
            "Failed attempts at an epoch (continuous pipelines retry them with backoff)",
            m.failures.clone(),
        );
        r.register(
            "isolated_records",
            "Records the operator failed on, set aside to the dead-letter output",
            m.isolated.clone(),
        );
        r.register(
            "operator_rollbacks",
            "Automatic rollbacks of a new operator version that failed where the one before did not",
            m.rollbacks.clone(),
        );
        r.register("input_rows", "Rows read from the source", m.rows_in.clone());
        r.register(
            "output_rows",
            "Rows of the operator's default output written to its sinks",
            m.rows_out.clone(),
        );
        r.register(
            "lookup_refresh_failures",
            "Refreshes of `[[lookup]]` tables that failed and kept the version before",
            m.lookup_refresh_failures.clone(),
        );
        r.register(
            "named_output_rows",
            "Rows the operator emitted to each named output (`scores`)",
            m.named_output_rows.clone(),
        );
        r.register(
            "dead_letters",
            "Malformed input records set aside",
            m.dead_letters.clone(),
        );
        r.register(
            "late_rows",
            "Rows older than their epoch's watermark",
            m.late_rows.clone(),
        );
        r.register(
            "duplicate_rows",
            "Rows dropped by the host's dedup",
            m.duplicates.clone(),
        );
        r.register(
            "epoch_duration_seconds",
            "Wall time of an epoch, from planning to commit",
            m.epoch_seconds.clone(),
        );
        r.register(
            "epoch_phase_duration_seconds",
            "Wall time of each phase of an epoch (plan = the source's latest offsets)",
            m.phase_seconds.clone(),
        );
        r.register(
            "input_rows_per_second",
            "Rows arriving per second in the newest epoch",
            m.input_rate.clone(),
        );
        r.register(
            "processed_rows_per_second",
            "Rows processed per second in the newest epoch",
            m.processed_rate.clone(),
        );
        r.register("last_epoch", "Newest committed epoch", m.last_epoch.clone());
        r.register(
            "source_backlog",
            "Available at the source but not yet planned (Kafka: records; files: bytes)",
            m.backlog.clone(),
        );
        r.register(
            "source_backlog_files",
            "Files available but not yet planned",
            m.backlog_files.clone(),
        );
        r.register(
            "state_keys",
            "Keys in the state store",
            m.state_keys.clone(),
        );
        r.register(
            "state_size_bytes",
            "Approximate size of the state store",
            m.state_bytes.clone(),
        );
        r.register(
            "watermark_seconds",
            "Event-time watermark of the newest epoch (Unix seconds)",
            m.watermark.clone(),
        );
        r.register(
            "operator_version",
            "Registry number of the operator version the newest epoch ran",
            m.version.clone(),
        );
        r.register(
            "trigger_interval_seconds",
            "The processing-time trigger's interval (0 for once / available-now)",
            m.trigger_interval.clone(),
        );
        r.register(
            "backlog_growing",
            "1 while the backlog grows (see the dashboard's verdict)",
            m.backlog_growing.clone(),
        );
        r.register(
            "task_input_rows",
            "Rows each task's operator instance got (with `parallelism` above 1)",
            m.task_rows_in.clone(),
        );
        r.register(
            "task_output_rows",
            "Rows each task's operator instance produced",
            m.task_rows_out.clone(),
        );
        r.register(
            "task_operator_seconds",
            "Time each task's operator instance ran (instance, process, timers)",
            m.task_operator_seconds.clone(),
        );
        m.registry.sub_registry_with_prefix("weir").register(
            "log_events",
            "Warnings and errors logged",
            LOG_EVENTS.clone(),
        );
        m
    }

    /// Counts a committed epoch.
    pub fn epoch(&self, p: &EpochProgress) {
        self.epochs.inc();
        if p.replay {
            self.replayed.inc();
        }
        self.rows_in.inc_by(p.rows_in);
        self.rows_out.inc_by(p.rows_out);
        self.dead_letters.inc_by(p.dead_letters);
        self.late_rows.inc_by(p.late_rows);
        self.duplicates.inc_by(p.duplicates);
        self.epoch_seconds.observe(p.total.as_secs_f64());
        if let Some(h) = &p.latency_histogram {
            for (upper_us, count) in h.buckets() {
                for _ in 0..count {
                    self.latency_seconds.observe(upper_us as f64 / 1e6);
                }
            }
        }
        self.lookup_refresh_failures
            .inc_by(p.lookup_refresh_failures);
        for (output, rows) in &p.named_rows {
            self.named_output_rows
                .get_or_create(&OutputLabel {
                    output: output.clone(),
                })
                .inc_by(*rows);
        }
        for t in &p.tasks {
            let task = TaskLabel { task: t.task };
            self.task_rows_in.get_or_create(&task).inc_by(t.rows_in);
            self.task_rows_out.get_or_create(&task).inc_by(t.rows_out);
            self.task_operator_seconds
                .get_or_create(&task)
                .inc_by(t.operator.as_secs_f64());
        }
        for (phase, d) in p.phases.named() {
            self.phase_seconds
                .get_or_create(&PhaseLabel { phase })
                .observe(d.as_secs_f64());
        }
        self.input_rate.set(p.input_rows_per_sec);
        self.processed_rate.set(p.processed_rows_per_sec);
        self.last_epoch.set(p.epoch as i64);
        self.state_keys.set(p.state_keys as i64);
        self.state_bytes.set(p.state_bytes as i64);
        if let Some(w) = p.watermark_ms {
            self.watermark.set(w as f64 / 1e3);
        }
        if let Some(v) = p.operator_version {
            self.version.set(i64::from(v));
        }
        self.trigger_interval
            .set(p.trigger_interval_ms.unwrap_or(0) as f64 / 1e3);
    }

    /// Sets the source's lag.
    pub fn backlog(&self, b: &Backlog) {
        self.backlog
            .get_or_create(&UnitLabel {
                unit: b.unit.as_str(),
            })
            .set(b.pending as i64);
        if let Some(files) = b.pending_files {
            self.backlog_files.set(files as i64);
        }
    }

    /// Counts a failed epoch.
    pub fn failure(&self) {
        self.failures.inc();
    }

    /// Counts records the operator failed on.
    pub fn isolated(&self, n: u64) {
        self.isolated.inc_by(n);
    }

    /// Counts an automatic rollback.
    pub fn rolled_back(&self) {
        self.rollbacks.inc();
    }

    /// Sets the backlog verdict.
    pub fn backlog_growing(&self, growing: bool) {
        self.backlog_growing.set(i64::from(growing));
    }

    /// The text exposition (`text/plain; version=0.0.4` compatible
    /// OpenMetrics text).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!("encoding metrics failed: {e}");
        }
        out
    }
}

/// Several registries' text expositions as one: a cluster worker's
/// `/metrics` over the partitions it runs. Each metric family is written
/// once (its `# HELP`/`# TYPE` from the first text that has it) with the
/// samples of every text; a sample already written (a process-wide series
/// every registry carries) is not repeated.
pub fn merge(texts: &[String]) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut families: std::collections::HashMap<String, (Vec<String>, Vec<String>)> =
        std::collections::HashMap::new();
    let mut seen = std::collections::HashSet::new();
    for text in texts {
        let mut current: Option<String> = None;
        for line in text.lines() {
            if line == "# EOF" {
                continue;
            }
            if let Some(rest) = line
                .strip_prefix("# HELP ")
                .or_else(|| line.strip_prefix("# TYPE "))
                .or_else(|| line.strip_prefix("# UNIT "))
            {
                let name = rest.split(' ').next().unwrap_or_default().to_string();
                let family = families.entry(name.clone()).or_insert_with(|| {
                    order.push(name.clone());
                    (Vec::new(), Vec::new())
                });
                if !family.0.iter().any(|h| h == line) && family.1.is_empty() {
                    family.0.push(line.to_string());
                }
                current = Some(name);
                continue;
            }
            let series = line.rsplit_once(' ').map_or(line, |(s, _)| s);
            if let Some(name) = &current {
                if seen.insert(series.to_string()) {
                    if let Some(family) = families.get_mut(name) {
                        family.1.push(line.to_string());
                    }
                }
            }
        }
    }
    let mut out = String::new();
    for name in &order {
        if let Some((headers, samples)) = families.get(name) {
            for line in headers.iter().chain(samples) {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out.push_str("# EOF\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_partitions_write_each_family_once_with_every_partition() {
        let texts: Vec<String> = [3, 5]
            .iter()
            .map(|&p| {
                let m = Metrics::new("w", Some(p));
                m.epoch(&EpochProgress::sample(1));
                m.encode()
            })
            .collect();
        let merged = merge(&texts);
        assert_eq!(merged.matches("# TYPE weir_epochs counter").count(), 1);
        assert!(merged.contains("weir_epochs_total{pipeline=\"w\",partition=\"3\"} 1"));
        assert!(merged.contains("weir_epochs_total{pipeline=\"w\",partition=\"5\"} 1"));
        assert_eq!(merged.matches("# EOF").count(), 1);
        assert!(merged.ends_with("# EOF\n"));
        let log_series = merged
            .lines()
            .filter(|l| l.starts_with("weir_log_events_total"))
            .count();
        let one = texts[0]
            .lines()
            .filter(|l| l.starts_with("weir_log_events_total"))
            .count();
        assert_eq!(log_series, one, "process-wide series are not repeated");
    }

    #[test]
    fn latency_histogram_counts_every_measured_row() {
        let m = Metrics::new("p", None);
        let mut p = EpochProgress::sample(0);
        let mut h = weir_core::latency::Histogram::default();
        for us in [300, 1_200, 1_900, 45_000] {
            h.record(us);
        }
        p.latency_histogram = Some(h);
        m.epoch(&p);
        m.epoch(&p);
        let text = m.encode();
        let line = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("no {name} in\n{text}"))
                .to_string()
        };
        assert!(line("weir_event_to_emit_latency_seconds_count").ends_with(" 8"));
        // 0.25 ms, 0.5, 1, 2 ms: the three fastest rows of each epoch.
        assert!(
            text.contains(
                "weir_event_to_emit_latency_seconds_bucket{le=\"0.002\",pipeline=\"p\"} 6"
            ) || text.contains(
                "weir_event_to_emit_latency_seconds_bucket{pipeline=\"p\",le=\"0.002\"} 6"
            ),
            "{text}"
        );
    }
}

#[cfg(test)]
mod task_tests {
    use super::*;
    use weir_core::progress::TaskProgress;

    #[test]
    fn each_task_has_its_own_series() {
        let m = Metrics::new("p", None);
        let mut p = EpochProgress::sample(0);
        p.tasks = (0..2)
            .map(|t| TaskProgress {
                task: t,
                rows_in: 100 + u64::from(t),
                rows_out: 3,
                operator: std::time::Duration::from_millis(250),
            })
            .collect();
        m.epoch(&p);
        m.epoch(&p);
        let text = m.encode();
        for want in [
            "weir_task_input_rows_total{pipeline=\"p\",task=\"0\"} 200",
            "weir_task_input_rows_total{pipeline=\"p\",task=\"1\"} 202",
            "weir_task_output_rows_total{pipeline=\"p\",task=\"1\"} 6",
            "weir_task_operator_seconds_total{pipeline=\"p\",task=\"0\"} 0.5",
        ] {
            assert!(text.contains(want), "no {want} in\n{text}");
        }
    }
}
