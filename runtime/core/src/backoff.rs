//! Waiting out an outage of a service the pipeline depends on (a Kafka
//! broker, a PostgreSQL server). Delays grow exponentially up to a cap and
//! carry random jitter, so that many pipelines that lost the same server do
//! not all reconnect in the same instant when it comes back; logging is
//! rate-limited so a long outage says what it waits for without flooding.

use rand::Rng;
use std::time::{Duration, Instant};

/// Retry pacing for one outage: create it at the first failure, call
/// [`Backoff::wait`] between attempts, drop it when an attempt succeeds.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
    max: Duration,
    attempts: u32,
    started: Instant,
    last_report: Option<Instant>,
}

impl Backoff {
    /// First delay `initial`, doubling up to `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            next: initial,
            max: max.max(initial),
            attempts: 0,
            started: Instant::now(),
            last_report: None,
        }
    }

    /// The pacing both outage waits use: 100 ms doubling up to 5 s.
    pub fn for_outage() -> Self {
        Self::new(Duration::from_millis(100), Duration::from_secs(5))
    }

    /// Failed attempts so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Time since the first failure.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The next delay: half of the current step plus a random part of the
    /// other half ("equal jitter"), so retries never bunch at zero.
    pub fn next_delay(&mut self) -> Duration {
        self.attempts += 1;
        let step = self.next;
        self.next = (self.next * 2).min(self.max);
        let half = step / 2;
        let jitter_us = rand::rng().random_range(0..=half.as_micros() as u64);
        half + Duration::from_micros(jitter_us)
    }

    /// Sleeps for [`Backoff::next_delay`].
    pub fn wait(&mut self) {
        std::thread::sleep(self.next_delay());
    }

    /// Sleeps for the next delay, but not past `deadline`; false if the
    /// deadline has passed (the caller gives up).
    pub fn wait_until(&mut self, deadline: Instant) -> bool {
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        std::thread::sleep(self.next_delay().min(deadline - now));
        true
    }

    /// Whether to log the failure now: the first one, then once per `every`.
    pub fn should_report(&mut self, every: Duration) -> bool {
        let due = self.last_report.is_none_or(|t| t.elapsed() >= every);
        if due {
            self.last_report = Some(Instant::now());
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_to_the_cap_with_jitter_inside_each_step() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(800));
        let steps = [100, 200, 400, 800, 800, 800];
        for step in steps {
            let d = b.next_delay();
            let step = Duration::from_millis(step);
            assert!(
                d >= step / 2 && d <= step,
                "{d:?} outside [{:?}, {step:?}]",
                step / 2
            );
        }
        assert_eq!(b.attempts(), steps.len() as u32);
    }

    #[test]
    fn reports_first_failure_then_rate_limits() {
        let mut b = Backoff::for_outage();
        assert!(b.should_report(Duration::from_secs(60)));
        assert!(!b.should_report(Duration::from_secs(60)));
        assert!(b.should_report(Duration::ZERO));
    }

    #[test]
    fn wait_until_gives_up_at_the_deadline() {
        let mut b = Backoff::for_outage();
        assert!(!b.wait_until(Instant::now()));
    }
}
