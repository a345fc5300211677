//! Injected I/O faults at the named boundaries of the epoch protocol, so
//! that tests can check the rule "an epoch is retried only from a state it
//! can be retried from" at every boundary, in every mode, without relying
//! on a disk filling up at the right moment.
//!
//! A fault is armed for one checkpoint (so tests running side by side in
//! one process do not hit each other's), one [`FaultPoint`], optionally one
//! epoch, and a number of hits; each hit returns an ordinary
//! [`std::io::Error`] that the engine handles like any other storage fault.
//! Outside tests nothing is armed and [`hit`] is one relaxed atomic load.
//!
//! `weir run` also arms faults from `WEIR_FAULTS` (e.g.
//! `WEIR_FAULTS=state-committed@4*3,snapshot*1`: the boundary, `@epoch` or
//! any epoch, `*times` or once), for trying a recovery by hand.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// A boundary between two phases of an epoch where a fault can be injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    /// Before `offsets/N` is written.
    Offsets,
    /// After `offsets/N`, before the input is read.
    OffsetsWritten,
    /// Before the sink is written (a micro-batch epoch's output, a
    /// real-time epoch's part or its end).
    Sink,
    /// After the sink has the epoch, before the state commit.
    SinkWritten,
    /// After the state commit, before `commits/N`.
    StateCommitted,
    /// After `commits/N`, before the source is told and the snapshot.
    CommitsWritten,
    /// Before a state snapshot is taken.
    Snapshot,
    /// Before the logs are compacted.
    Compaction,
    /// Before a real-time part the operator failed on is written as
    /// deferred (only an epoch with such a part passes it).
    Defer,
}

impl FaultPoint {
    /// Every point, in the order an epoch passes them.
    pub const ALL: [FaultPoint; 8] = [
        FaultPoint::Offsets,
        FaultPoint::OffsetsWritten,
        FaultPoint::Sink,
        FaultPoint::SinkWritten,
        FaultPoint::StateCommitted,
        FaultPoint::CommitsWritten,
        FaultPoint::Snapshot,
        FaultPoint::Compaction,
    ];

    /// The point's name in `WEIR_FAULTS` and in the injected error.
    pub fn name(self) -> &'static str {
        match self {
            FaultPoint::Offsets => "offsets",
            FaultPoint::OffsetsWritten => "offsets-written",
            FaultPoint::Sink => "sink",
            FaultPoint::SinkWritten => "sink-written",
            FaultPoint::StateCommitted => "state-committed",
            FaultPoint::CommitsWritten => "commits-written",
            FaultPoint::Snapshot => "snapshot",
            FaultPoint::Compaction => "compaction",
            FaultPoint::Defer => "defer",
        }
    }

    /// Every point: [`FaultPoint::ALL`] and those only some epochs pass.
    fn every() -> impl Iterator<Item = FaultPoint> {
        FaultPoint::ALL.into_iter().chain([FaultPoint::Defer])
    }

    fn named(name: &str) -> Option<FaultPoint> {
        FaultPoint::every().find(|p| p.name() == name)
    }
}

/// One armed fault.
#[derive(Debug, Clone)]
struct Armed {
    /// The checkpoint it applies to; `None`: every checkpoint.
    scope: Option<PathBuf>,
    point: FaultPoint,
    epoch: Option<u64>,
    remaining: u32,
}

static ANY_ARMED: AtomicBool = AtomicBool::new(false);
static ARMED: Mutex<Vec<Armed>> = Mutex::new(Vec::new());
static FROM_ENV: std::sync::Once = std::sync::Once::new();

/// Arms a fault: the next `times` hits of `point` (in `epoch`, or any
/// epoch) by the pipeline whose checkpoint is `checkpoint` fail.
pub fn arm(checkpoint: &Path, point: FaultPoint, epoch: Option<u64>, times: u32) {
    push(Armed {
        scope: Some(checkpoint.to_path_buf()),
        point,
        epoch,
        remaining: times,
    });
}

/// Disarms every fault of `checkpoint`, hit or not.
pub fn disarm(checkpoint: &Path) {
    let mut armed = ARMED.lock().unwrap_or_else(|p| p.into_inner());
    armed.retain(|a| a.scope.as_deref() != Some(checkpoint));
}

/// Faults of `checkpoint` armed but not yet hit as often as armed.
pub fn pending(checkpoint: &Path) -> u32 {
    let armed = ARMED.lock().unwrap_or_else(|p| p.into_inner());
    armed
        .iter()
        .filter(|a| a.scope.as_deref() == Some(checkpoint))
        .map(|a| a.remaining)
        .sum()
}

fn push(a: Armed) {
    let mut armed = ARMED.lock().unwrap_or_else(|p| p.into_inner());
    armed.push(a);
    ANY_ARMED.store(true, Ordering::Release);
}

/// Arms the faults `spec` lists (`WEIR_FAULTS`'s syntax, see the module
/// docs) for every checkpoint of the process.
pub fn arm_from_spec(spec: &str) -> anyhow::Result<()> {
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (rest, times) = match item.split_once('*') {
            Some((rest, n)) => (rest, n.parse().map_err(|_| bad(item))?),
            None => (item, 1),
        };
        let (name, epoch) = match rest.split_once('@') {
            Some((name, e)) => (name, Some(e.parse().map_err(|_| bad(item))?)),
            None => (rest, None),
        };
        let point = FaultPoint::named(name).ok_or_else(|| bad(item))?;
        push(Armed {
            scope: None,
            point,
            epoch,
            remaining: times,
        });
    }
    Ok(())
}

fn bad(item: &str) -> anyhow::Error {
    let names: Vec<_> = FaultPoint::every().map(|p| p.name()).collect();
    anyhow::anyhow!(
        "WEIR_FAULTS: `{item}` is not `point[@epoch][*times]` with point one of {}",
        names.join(", ")
    )
}

/// Fails with an injected I/O error if a fault is armed for `point` of
/// `epoch` in the pipeline of `checkpoint`; otherwise does nothing.
pub fn hit(checkpoint: &Path, point: FaultPoint, epoch: u64) -> std::io::Result<()> {
    FROM_ENV.call_once(|| {
        if let Ok(spec) = std::env::var("WEIR_FAULTS") {
            if let Err(e) = arm_from_spec(&spec) {
                tracing::error!("{e:#}");
            }
        }
    });
    if !ANY_ARMED.load(Ordering::Acquire) {
        return Ok(());
    }
    let mut armed = ARMED.lock().unwrap_or_else(|p| p.into_inner());
    let found = armed.iter_mut().find(|a| {
        a.remaining > 0
            && a.point == point
            && a.epoch.is_none_or(|e| e == epoch)
            && a.scope.as_deref().is_none_or(|s| s == checkpoint)
    });
    let Some(fault) = found else {
        return Ok(());
    };
    fault.remaining -= 1;
    Err(std::io::Error::other(format!(
        "injected fault at `{}` of epoch {epoch}",
        point.name()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_armed_fault_fails_as_often_as_armed_and_only_its_checkpoint() {
        let (a, b) = (Path::new("/faults-test/a"), Path::new("/faults-test/b"));
        arm(a, FaultPoint::Sink, Some(3), 2);
        assert!(hit(a, FaultPoint::Sink, 2).is_ok(), "another epoch");
        assert!(hit(b, FaultPoint::Sink, 3).is_ok(), "another checkpoint");
        assert!(hit(a, FaultPoint::Snapshot, 3).is_ok(), "another point");
        assert_eq!(pending(a), 2);
        let e = hit(a, FaultPoint::Sink, 3).unwrap_err();
        assert!(e.to_string().contains("`sink` of epoch 3"), "{e}");
        assert!(hit(a, FaultPoint::Sink, 3).is_err());
        assert!(hit(a, FaultPoint::Sink, 3).is_ok(), "cleared");
        disarm(a);
        assert_eq!(pending(a), 0);
    }

    #[test]
    fn a_bad_spec_names_the_points() {
        let e = arm_from_spec("sink@x").unwrap_err().to_string();
        assert!(e.contains("state-committed"), "{e}");
        assert!(arm_from_spec("nowhere").is_err());
    }
}
