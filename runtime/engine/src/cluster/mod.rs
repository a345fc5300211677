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

use crate::config::PipelineConfig;
use anyhow::{Context, Result};
use partition::{Ended, OnEpoch, PartitionRun};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weir_connectors::kafka::group::{GroupSettings, Membership, Ownership};
use weir_connectors::kafka::KafkaSourceConfig;
use weir_host::WasmHost;

/// How often the worker serves the group and looks after its partitions.
const TEND_EVERY: Duration = Duration::from_millis(100);

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
    let cluster = cfg
        .cluster
        .as_ref()
        .context("the pipeline file has no `[cluster]`")?;
    let kafka =
        KafkaSourceConfig::of(&*cfg.source).context("a cluster's source must be a Kafka topic")?;
    let topic = kafka.topics.first().context("`source.topics` is empty")?;
    let cache = worker_cache(&cfg.checkpoint, worker)?;
    let _lock = CacheLock::take(&cache)?;
    let partitions = Arc::new(Partitions {
        cfg: cfg.clone(),
        cache,
        host: host.clone(),
        on_epoch,
        settle: cluster.session_timeout,
        runs: Mutex::new(BTreeMap::new()),
    });
    let member_name = format!("weir-{worker}");
    let settings = GroupSettings {
        brokers: kafka.brokers(),
        group: &cluster.group,
        topic,
        member: &member_name,
        session_timeout: cluster.session_timeout,
        heartbeat_interval: cluster.heartbeat_interval(),
        assignment: cluster.assignment.librdkafka(),
    };
    let member = Membership::join(&settings, partitions.clone())?;
    tracing::info!(
        pipeline = %cfg.name,
        worker,
        group = %cluster.group,
        topic = %topic,
        "worker joined the group; waiting for partitions"
    );
    while !stop.load(Ordering::Relaxed) {
        member.poll(TEND_EVERY);
        partitions.tend(&member.owned());
    }
    tracing::info!(
        worker,
        "stopping: every partition's current epoch finishes first"
    );
    partitions.stop_all();
    drop(member);
    Ok(())
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
    on_epoch: OnEpoch,
    /// How long a conflicted partition waits before it runs again: a
    /// session timeout, after which a worker that lost the partition has
    /// been told so by the group.
    settle: Duration,
    runs: Mutex<BTreeMap<i32, PartitionRun>>,
}

impl Partitions {
    fn start(&self, runs: &mut BTreeMap<i32, PartitionRun>, p: i32) {
        match PartitionRun::start(&self.cfg, &self.cache, p, &self.host, self.on_epoch.clone()) {
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
