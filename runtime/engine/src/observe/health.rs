//! Whether a pipeline keeps up, by the rule of the issue and of Spark's
//! docs: an epoch that takes longer than the trigger interval while rows
//! arrive faster than they are processed means the backlog grows. One slow
//! epoch is noise (a compaction, a cold cache); the same verdict over the
//! last [`WINDOW`] epochs, or a source lag that grew over each of them, is
//! a trend.

use serde::{Deserialize, Serialize};
use weir_core::progress::EpochProgress;

/// Epochs a trend must hold over.
pub const WINDOW: usize = 3;

/// The verdict shown on the dashboard and in `weir status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use weir_core::source::{Backlog, BacklogUnit};

    /// An epoch of a 1 s trigger that took `ms` with rows arriving at
    /// `input` and processed at `processed` rows/s, `pending` records left.
    fn epoch(n: u64, ms: u64, input: f64, processed: f64, pending: u64) -> EpochProgress {
        let mut p = EpochProgress::sample(n);
        p.trigger_interval_ms = Some(1_000);
        p.total = Duration::from_millis(ms);
        p.input_rows_per_sec = input;
        p.processed_rows_per_sec = processed;
        p.backlog = Some(Backlog {
            unit: BacklogUnit::Records,
            planned: 10,
            pending,
            pending_files: None,
            changed_files: None,
        });
        p
    }

    fn verdict(epochs: &[EpochProgress]) -> Verdict {
        assess(&epochs.iter().collect::<Vec<_>>()).verdict
    }

    #[test]
    fn the_rule_must_hold_over_the_window_to_be_a_trend() {
        assert_eq!(verdict(&[]), Verdict::NoData);
        let fast = |n| epoch(n, 200, 900.0, 5_000.0, 0);
        let slow = |n| epoch(n, 1_500, 2_000.0, 1_000.0, 0);
        assert_eq!(verdict(&[fast(0), fast(1), fast(2)]), Verdict::KeepingUp);
        assert_eq!(verdict(&[fast(0), fast(1), slow(2)]), Verdict::AtRisk);
        assert_eq!(verdict(&[fast(0), slow(1), slow(2)]), Verdict::AtRisk);
        assert_eq!(
            verdict(&[slow(0), slow(1), slow(2)]),
            Verdict::BacklogGrowing
        );
        // Slow, but rows arrive slower than they are processed: catching up.
        let catching_up = |n| epoch(n, 1_500, 500.0, 1_000.0, 0);
        let all = [catching_up(0), catching_up(1), catching_up(2)];
        assert_eq!(verdict(&all), Verdict::KeepingUp);
        // Replays do not count.
        let mut replayed = slow(3);
        replayed.replay = true;
        assert_eq!(
            verdict(&[fast(0), fast(1), fast(2), replayed]),
            Verdict::KeepingUp
        );
    }

    #[test]
    fn a_lag_growing_over_the_window_is_a_growing_backlog() {
        let lag = |n, pending| epoch(n, 200, 900.0, 5_000.0, pending);
        assert_eq!(
            verdict(&[lag(0, 10), lag(1, 20), lag(2, 30)]),
            Verdict::BacklogGrowing
        );
        assert_eq!(
            verdict(&[lag(0, 10), lag(1, 30), lag(2, 20)]),
            Verdict::KeepingUp
        );
        assert_eq!(verdict(&[lag(0, 10), lag(1, 20)]), Verdict::KeepingUp);
        // Without a trigger interval only the lag counts.
        let mut now = [lag(0, 5), lag(1, 5), epoch(2, 9_000, 9e9, 1.0, 5)];
        now[2].trigger_interval_ms = None;
        assert_eq!(verdict(&now), Verdict::KeepingUp);
    }
}
