//! The progress bar of `weir run` for `available-now` and `once` pipelines
//! (backfills): how much of what the source had waiting is done, at what
//! rate, and when it will be finished. The total is not known up front —
//! the source reports what is still waiting each time it plans — so the
//! bar's length is "done + still waiting" and may grow while new data
//! arrives. Drawn on stderr only when stderr is a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use weir_core::progress::EpochProgress;
use weir_core::source::BacklogUnit;

/// Done and total of a backfill, in the source's unit.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Backfill {
    pub unit: Option<BacklogUnit>,
    /// Units planned by the epochs so far.
    pub done: u64,
    /// `done` plus what the source still has waiting.
    pub total: u64,
    /// Input rows of the epochs so far (the unit may be bytes).
    pub rows: u64,
}

impl Backfill {
    /// Takes in one finished epoch. Replays (which do not plan) count their
    /// rows but move neither done nor total.
    pub fn update(&mut self, p: &EpochProgress) {
        self.rows += p.rows_in;
        if let Some(b) = p.backlog {
            self.unit = Some(b.unit);
            self.done += b.planned;
            self.total = self.done + b.pending;
        }
    }

    /// Share done, 0.0..=1.0 (1.0 when nothing was waiting).
    pub fn fraction(&self) -> f64 {
        if self.total == 0 {
            1.0
        } else {
            self.done as f64 / self.total as f64
        }
    }
}

/// A [`Backfill`] drawn as an `indicatif` bar.
pub struct BackfillBar {
    bar: ProgressBar,
    state: Backfill,
    styled: bool,
}

impl Default for BackfillBar {
    fn default() -> Self {
        Self::new()
    }
}

impl BackfillBar {
    /// A bar on stderr, hidden when stderr is not a terminal.
    pub fn new() -> Self {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} waiting for the first epoch")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        BackfillBar {
            bar,
            state: Backfill::default(),
            styled: false,
        }
    }

    /// Whether the bar is drawn (stderr is a terminal).
    pub fn visible(&self) -> bool {
        !self.bar.is_hidden()
    }

    /// Advances the bar by one epoch; `line` is printed above it.
    pub fn epoch(&mut self, p: &EpochProgress, line: Option<String>) {
        self.state.update(p);
        if !self.styled {
            if let Some(unit) = self.state.unit {
                let amounts = match unit {
                    BacklogUnit::Bytes => {
                        "{binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec})"
                    }
                    BacklogUnit::Records => "{human_pos}/{human_len} records ({per_sec})",
                };
                let template = format!(
                    "[{{elapsed_precise}}] {{wide_bar}} {{percent:>3}}% {amounts} ETA {{eta}} {{msg}}"
                );
                if let Ok(style) = ProgressStyle::with_template(&template) {
                    self.bar.set_style(style);
                    self.styled = true;
                }
            }
        }
        self.bar.set_length(self.state.total);
        self.bar.set_position(self.state.done);
        let rate = self.state.rows as f64 / self.bar.elapsed().as_secs_f64().max(1e-3);
        self.bar.set_message(format!(
            "epoch {} · {} rows · {:.0} rows/s",
            p.epoch, self.state.rows, rate
        ));
        if let Some(line) = line {
            self.bar.println(line);
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_core::source::Backlog;

    fn epoch(n: u64, rows: u64, backlog: Option<(u64, u64)>) -> EpochProgress {
        let mut p = EpochProgress::sample(n);
        p.rows_in = rows;
        p.replay = backlog.is_none();
        p.backlog = backlog.map(|(planned, pending)| Backlog {
            unit: BacklogUnit::Records,
            planned,
            pending,
            pending_files: None,
            changed_files: None,
        });
        p
    }

    #[test]
    fn done_and_total_follow_what_the_source_reports() {
        let mut b = Backfill::default();
        assert_eq!(b.fraction(), 1.0, "nothing waiting is done");
        b.update(&epoch(0, 7, None));
        assert_eq!(
            (b.done, b.total, b.rows),
            (0, 0, 7),
            "a replay plans nothing"
        );
        b.update(&epoch(1, 100, Some((100, 300))));
        assert_eq!((b.done, b.total), (100, 400));
        assert_eq!(b.fraction(), 0.25);
        // New data arrived meanwhile: the total grows.
        b.update(&epoch(2, 100, Some((100, 250))));
        assert_eq!((b.done, b.total, b.rows), (200, 450, 207));
        b.update(&epoch(3, 250, Some((250, 0))));
        assert_eq!(b.fraction(), 1.0);
        assert_eq!(b.unit, Some(BacklogUnit::Records));
    }
}
