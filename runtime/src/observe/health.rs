//! Whether a pipeline keeps up, by the rule of the issue and of Spark's
//! docs: an epoch that takes longer than the trigger interval while rows
//! arrive faster than they are processed means the backlog grows. One slow
//! epoch is noise (a compaction, a cold cache); the same verdict over the
//! last [`WINDOW`] epochs, or a source lag that grew over each of them, is
//! a trend.

use crate::progress::EpochProgress;
use serde::Serialize;

/// Epochs a trend must hold over.
pub const WINDOW: usize = 3;

/// The verdict shown on the dashboard and in `weir status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// No epoch has run yet.
    NoData,
    /// Epochs fit in the trigger interval, or the lag is not growing.
    KeepingUp,
    /// The newest epoch broke the rule; not yet a trend.
    AtRisk,
    /// The rule held over the last [`WINDOW`] epochs, or the lag grew.
    BacklogGrowing,
}

/// A verdict and the figures it rests on.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    pub verdict: Verdict,
    /// One sentence a person can act on.
    pub reason: String,
}

/// Judges the newest records (oldest first).
pub fn assess(recent: &[&EpochProgress]) -> Health {
    let fresh: Vec<&EpochProgress> = recent.iter().copied().filter(|p| !p.replay).collect();
    let Some(last) = fresh.last() else {
        return Health {
            verdict: Verdict::NoData,
            reason: "no epoch has run yet".into(),
        };
    };
    let window = &fresh[fresh.len().saturating_sub(WINDOW)..];
    let full = window.len() == WINDOW;
    let lags: Vec<u64> = window
        .iter()
        .filter_map(|p| p.backlog.map(|b| b.pending))
        .collect();
    let lag_grows = full && lags.len() == WINDOW && lags.windows(2).all(|w| w[1] > w[0]);
    let behind = |p: &EpochProgress| p.falling_behind();
    let interval = last.trigger_interval_ms.unwrap_or(0);
    if full && window.iter().all(|p| behind(p)) {
        return Health {
            verdict: Verdict::BacklogGrowing,
            reason: format!(
                "the last {WINDOW} epochs each took longer than the {interval} ms trigger \
                 interval while rows arrived faster than they were processed \
                 ({:.0} rows/s in, {:.0} rows/s processed)",
                last.input_rows_per_sec, last.processed_rows_per_sec
            ),
        };
    }
    if lag_grows {
        let unit = last.backlog.map_or("units", |b| b.unit.as_str());
        return Health {
            verdict: Verdict::BacklogGrowing,
            reason: format!(
                "the source's lag grew over the last {WINDOW} epochs ({} → {} {unit})",
                lags[0],
                lags[WINDOW - 1]
            ),
        };
    }
    if behind(last) {
        return Health {
            verdict: Verdict::AtRisk,
            reason: format!(
                "epoch {} took {:.0} ms, longer than the {interval} ms trigger interval, while \
                 rows arrived faster than they were processed",
                last.epoch,
                last.total.as_secs_f64() * 1e3
            ),
        };
    }
    Health {
        verdict: Verdict::KeepingUp,
        reason: match last.trigger_interval_ms {
            Some(i) => format!(
                "epoch {} took {:.0} ms of its {i} ms trigger interval",
                last.epoch,
                last.total.as_secs_f64() * 1e3
            ),
            None => format!(
                "epoch {} finished; the source's lag is not growing",
                last.epoch
            ),
        },
    }
}
