//! Workers: several `weir run` processes of one pipeline file (`[cluster]`)
//! share its work, on one machine or many, with no coordinator of Weir's
//! own.
//!
//! - **The unit is a source partition.** Each Kafka partition is run as a
//!   pipeline of its own ([`partition`]): its checkpoint under
//!   `partitions/<p>/` in the object store, its own epochs, and its own
//!   keyed state, which moves with it (payments are keyed by card, so a
//!   card's state lives with its partition, as in Kafka Streams).
//! - **Ownership** comes from Kafka's consumer-group protocol
//!   ([`weir_connectors::kafka::group`]): the workers join one group, and
//!   the coordinator deals the partitions out. A partition a worker is
//!   given is pulled from the object store and resumed; one taken away is
//!   stopped before the group hands it on.
//! - **Fencing**: a worker that takes a partition over first takes a new
//!   owner generation in the sink ([`weir_core::sink::Sink::fence`]), so
//!   a worker that lost it without noticing (paused past its session
//!   timeout, cut off from the network) has its late writes refused; the
//!   object store's conditional creates keep two workers from recording
//!   the same epoch differently. Either conflict stops the loser's run of
//!   that partition ([`partition::Ended::Conflict`]).
//!
//! See `docs/cluster.md` for running workers and what a takeover costs.

pub mod partition;
pub mod plane;
pub mod roster;
mod telemetry;

pub use telemetry::WorkerTelemetry;

use crate::config::{ClusterConfig, PipelineConfig};
use crate::observe::workers::{PartitionEpoch, PartitionRecord, WorkerRecord};
use crate::versions::Control;
use anyhow::{Context, Result};
use partition::{Ended, OnEpoch, PartitionRun};
use plane::ClusterPlane;
use roster::{Roster, PUBLISH_EVERY};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use weir_connectors::kafka::group::{GroupSettings, Membership, Ownership};
use weir_connectors::kafka::security::ClientSecurity;
use weir_connectors::kafka::KafkaSourceConfig;
use weir_core::clock::now_ms;
use weir_host::WasmHost;

/// How often the worker serves the group and looks after its partitions.
const TEND_EVERY: Duration = Duration::from_millis(100);

/// How often the worker looks for changes to the shared operator registry.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// How long a partition whose run failed (not a conflict) waits before the
/// worker runs it again, if it still owns it.
const RETRY_FAILED_AFTER: Duration = Duration::from_secs(5);

/// Runs this process as worker `worker` of the cluster `cfg` describes
/// until `stop` is set; `on_epoch` sees every committed epoch of every
/// partition it runs. Leaves the group on the way out.
pub fn run_worker(
    cfg: &PipelineConfig,
    host: &WasmHost,
    worker: &str,
    stop: &AtomicBool,
    on_epoch: OnEpoch,
) -> Result<()> {
    Worker::open(cfg, host, worker, on_epoch)?.run(stop)
}

/// A worker of a cluster, open but not yet in the group: its control
/// plane and figures can be served (the admin API) before it takes
/// partitions.
pub struct Worker {
    name: String,
    /// The pipeline file's `[cluster]`.
    cluster: ClusterConfig,
    kafka: KafkaSourceConfig,
    /// The source's TLS and SASL, secrets read, for the group member.
    security: ClientSecurity,
    topic: String,
    partitions: Arc<Partitions>,
    plane: ClusterPlane,
    roster: Roster,
    admin_url: Mutex<Option<String>>,
    started_ms: i64,
    _lock: CacheLock,
}

impl Worker {
    /// Opens worker `worker` of the cluster `cfg` describes: takes its
    /// cache, opens the cluster's control plane (registering the pipeline
    /// file's operator there), and gets ready to run partitions.
    pub fn open(
        cfg: &PipelineConfig,
        host: &WasmHost,
        worker: &str,
        on_epoch: OnEpoch,
    ) -> Result<Self> {
        let cluster = cfg
            .cluster
            .as_ref()
            .context("the pipeline file has no `[cluster]`")?;
        let kafka = KafkaSourceConfig::of(&*cfg.source)
            .context("a cluster's source must be a Kafka topic")?;
        let topic = kafka
            .topics
            .first()
            .context("`source.topics` is empty")?
            .clone();
        let security = kafka.security().resolve()?;
        let cache = worker_cache(cfg.checkpoint.dir(), worker)?;
        let lock = CacheLock::take(&cache)?;
        let plane = ClusterPlane::open(cfg, host, &cache)?;
        let roster = Roster::new(
            plane.mirror.remote().clone(),
            &cluster.group,
            worker,
            cluster.session_timeout,
        );
        let partitions = Arc::new(Partitions {
            cfg: cfg.clone(),
            cache,
            host: host.clone(),
            control: plane.control.clone(),
            on_epoch,
            settle: cluster.session_timeout,
            runs: Mutex::new(BTreeMap::new()),
        });
        Ok(Worker {
            name: worker.to_string(),
            cluster: cluster.clone(),
            topic,
            kafka,
            security,
            partitions,
            plane,
            roster,
            admin_url: Mutex::new(None),
            started_ms: now_ms(),
            _lock: lock,
        })
    }

    /// The cluster's control plane as this worker holds it: what its admin
    /// API deploys, rolls back and reports through.
    pub fn control(&self) -> Arc<Control> {
        self.plane.control.clone()
    }

    /// The figures of the partitions this worker runs, for its admin API.
    pub fn telemetry(&self) -> Arc<WorkerTelemetry> {
        Arc::new(WorkerTelemetry::new(
            self.partitions.clone(),
            &self.partitions.cfg.name,
            self.started_ms,
        ))
    }

    /// This worker's cache directory.
    pub fn cache(&self) -> &Path {
        &self.partitions.cache
    }

    /// Announces this worker's admin API in its record.
    pub fn set_admin_url(&self, url: &str) {
        if let Ok(mut slot) = self.admin_url.lock() {
            *slot = Some(url.to_string());
        }
    }

    /// Joins the group and runs the partitions it is given until `stop` is
    /// set; then stops them (each finishes its epoch), leaves the group and
    /// withdraws its record.
    pub fn run(&self, stop: &AtomicBool) -> Result<()> {
        let settings = GroupSettings {
            brokers: self.kafka.brokers(&self.security),
            group: &self.cluster.group,
            topic: &self.topic,
            member: &format!("weir-{}", self.name),
            session_timeout: self.cluster.session_timeout,
            heartbeat_interval: self.cluster.heartbeat_interval(),
            assignment: self.cluster.assignment.librdkafka(),
        };
        let member = Membership::join(&settings, self.partitions.clone())?;
        tracing::info!(
            pipeline = %self.partitions.cfg.name,
            worker = %self.name,
            group = %self.cluster.group,
            topic = %self.topic,
            "worker joined the group; waiting for partitions"
        );
        std::thread::scope(|scope| {
            scope.spawn(|| self.keep_house(stop));
            while !stop.load(Ordering::Relaxed) {
                member.poll(TEND_EVERY);
                self.partitions.tend(&member.owned());
            }
        });
        tracing::info!(
            worker = %self.name,
            "stopping: every partition's current epoch finishes first"
        );
        self.partitions.stop_all();
        drop(member);
        if let Err(e) = self.roster.withdraw() {
            tracing::warn!("could not withdraw this worker's record: {e:#}");
        }
        Ok(())
    }

    /// Until `stop`: follows the shared registry, and renews this worker's
    /// record and reads the others' for `weir status`.
    fn keep_house(&self, stop: &AtomicBool) {
        let mut published: Option<Instant> = None;
        while !stop.load(Ordering::Relaxed) {
            if let Err(e) = self.plane.control.follow() {
                tracing::warn!("reading the cluster's operator registry: {e:#}");
            }
            if published.is_none_or(|at| at.elapsed() >= PUBLISH_EVERY) {
                published = Some(Instant::now());
                if let Err(e) = self.roster.publish(&self.record()) {
                    tracing::warn!("{e:#}");
                }
                match self.roster.read() {
                    Ok(status) => self.plane.control.set_cluster(status),
                    Err(e) => tracing::warn!("reading the workers' records: {e:#}"),
                }
            }
            sleep_unless_stopped(FOLLOW_EVERY, stop);
        }
    }

    fn record(&self) -> WorkerRecord {
        WorkerRecord {
            worker: self.name.clone(),
            admin_url: self.admin_url.lock().ok().and_then(|u| u.clone()),
            pid: std::process::id(),
            started_ms: self.started_ms,
            updated_ms: now_ms(),
            partitions: self.partitions.records(),
        }
    }
}

/// Sleeps `d`, waking early once `stop` is set.
fn sleep_unless_stopped(d: Duration, stop: &AtomicBool) {
    let until = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        std::thread::sleep(TEND_EVERY.min(until.saturating_duration_since(Instant::now())));
    }
}

/// This worker's cache: `<checkpoint cache>/<worker>`. Workers on one
/// machine need names of their own.
fn worker_cache(root: &Path, worker: &str) -> Result<PathBuf> {
    if worker.is_empty()
        || !worker
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        || worker.starts_with('.')
    {
        anyhow::bail!("worker name `{worker}`: use letters, digits, `-`, `_` and `.` (not first)");
    }
    let dir = root.join(worker);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// The partitions this worker runs, shared by the poll loop and the
/// group's rebalance callbacks.
struct Partitions {
    cfg: PipelineConfig,
    cache: PathBuf,
    host: WasmHost,
    /// The cluster's control plane, which every partition follows.
    control: Arc<Control>,
    on_epoch: OnEpoch,
    /// How long a conflicted partition waits before it runs again: a
    /// session timeout, after which a worker that lost the partition has
    /// been told so by the group.
    settle: Duration,
    runs: Mutex<BTreeMap<i32, PartitionRun>>,
}

impl Partitions {
    fn start(&self, runs: &mut BTreeMap<i32, PartitionRun>, p: i32) {
        let control = self.control.clone();
        match PartitionRun::start(
            &self.cfg,
            &self.cache,
            p,
            &self.host,
            control,
            self.on_epoch.clone(),
        ) {
            Ok(run) => {
                runs.insert(p, run);
            }
            Err(e) => tracing::error!(partition = p, "cannot start partition {p}: {e:#}"),
        }
    }

    /// Runs again the owned partitions whose runs ended (after a pause
    /// that depends on why), and starts owned ones that are not running.
    fn tend(&self, owned: &BTreeSet<i32>) {
        let Ok(mut runs) = self.runs.lock() else {
            return;
        };
        let mut again = Vec::new();
        for (&p, run) in runs.iter_mut() {
            let Some((how, at)) = run.ended() else {
                continue;
            };
            let wait = match how {
                Ended::Stopped => Duration::ZERO,
                Ended::Conflict(_) => self.settle,
                Ended::Failed(_) => RETRY_FAILED_AFTER,
            };
            if at.elapsed() >= wait && owned.contains(&p) {
                again.push(p);
            }
        }
        for p in &again {
            tracing::info!(
                partition = p,
                "running partition {p} again: this worker still owns it"
            );
            runs.remove(p);
        }
        self.start_missing(&mut runs, owned);
    }

    /// Starts the partitions of `owned` that have no run.
    fn start_missing(&self, runs: &mut BTreeMap<i32, PartitionRun>, owned: &BTreeSet<i32>) {
        for &p in owned {
            if !runs.contains_key(&p) {
                self.start(runs, p);
            }
        }
    }

    /// Stops the runs of `partitions`: all are told at once, then each is
    /// waited for (an epoch in flight finishes or fails first).
    fn stop(&self, partitions: &BTreeSet<i32>) {
        let Ok(mut runs) = self.runs.lock() else {
            return;
        };
        let stopping: Vec<(i32, PartitionRun)> = partitions
            .iter()
            .filter_map(|p| runs.remove(p).map(|run| (*p, run)))
            .inspect(|(_, run)| run.tell_to_stop())
            .collect();
        for (p, run) in stopping {
            let how = run.stop();
            tracing::info!(partition = p, "partition {p} stopped ({how:?})");
        }
    }

    /// What the worker's record says of each partition it runs.
    fn records(&self) -> Vec<PartitionRecord> {
        let Ok(mut runs) = self.runs.lock() else {
            return Vec::new();
        };
        runs.iter_mut()
            .map(|(&partition, run)| PartitionRecord {
                partition,
                state: run.state(),
                last_epoch: run
                    .telemetry()
                    .and_then(|t| t.report(None, 1).epochs.pop())
                    .map(|e| PartitionEpoch {
                        epoch: e.epoch,
                        version: e.operator_version,
                        rows_in: e.rows_in,
                        rows_out: e.rows_out,
                        finished_ms: e.finished_ms,
                    }),
            })
            .collect()
    }

    /// The figures of the partitions that have opened.
    fn telemetries(&self) -> Vec<(i32, Arc<crate::observe::Telemetry>)> {
        let Ok(runs) = self.runs.lock() else {
            return Vec::new();
        };
        runs.iter()
            .filter_map(|(&p, run)| run.telemetry().map(|t| (p, t)))
            .collect()
    }

    fn stop_all(&self) {
        let all: BTreeSet<i32> = self
            .runs
            .lock()
            .map(|r| r.keys().copied().collect())
            .unwrap_or_default();
        self.stop(&all);
    }
}

impl Ownership for Partitions {
    fn assigned(&self, partitions: &BTreeSet<i32>) {
        if let Ok(mut runs) = self.runs.lock() {
            self.start_missing(&mut runs, partitions);
        }
    }

    fn revoked(&self, partitions: &BTreeSet<i32>) {
        self.stop(partitions);
    }
}

/// An exclusive lock on a worker's cache, held while the worker runs: two
/// workers with one name on one machine would share RocksDB directories.
struct CacheLock {
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl CacheLock {
    fn take(dir: &Path) -> Result<Self> {
        use nix::fcntl::{Flock, FlockArg};
        let path = dir.join(".lock");
        let file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => Ok(CacheLock { _lock: lock }),
            Err((_, errno)) => anyhow::bail!(
                "another worker on this machine uses the cache {} ({errno}); give each worker a \
                 name of its own (`weir run --worker NAME`)",
                dir.display()
            ),
        }
    }
}
