//! Event→emit latency: for every output row, the time from its event (the
//! row's event-time column: a source timestamp, the generator's generation
//! time) to the moment the sink acknowledged it. Measured by the product in
//! every epoch — not only by a benchmark — and reported as percentiles in
//! progress records, `/metrics`, `weir status` and the dashboard.
//!
//! [`Histogram`] is log-linear, HdrHistogram-style: exact below 32 µs, then
//! 16 buckets per power of two (at most 6.25% relative error), so p99 and
//! p99.9 of millions of rows fit in a few hundred counters.

use serde::{Deserialize, Serialize};

/// Sub-buckets per power of two (4 bits of precision).
const SUB: usize = 16;
/// Buckets: enough for any `u64` (`u64::MAX` lands in the last, 975).
const BUCKETS: usize = 61 * SUB;

/// Latencies in microseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    max_us: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            count: 0,
            max_us: 0,
        }
    }
}

fn index(us: u64) -> usize {
    if us < 2 * SUB as u64 {
        return us as usize;
    }
    let bits = 63 - us.leading_zeros() as usize; // ≥ 5
    let shift = bits - 4;
    shift * SUB + (us >> shift) as usize
}

/// The largest value in bucket `i`.
fn upper(i: usize) -> u64 {
    if i < 2 * SUB {
        return i as u64;
    }
    let shift = i / SUB - 1;
    let next = ((i - shift * SUB) as u128 + 1) << shift;
    (next - 1).min(u128::from(u64::MAX)) as u64
}

impl Histogram {
    /// Counts one row that waited `us` microseconds.
    pub fn record(&mut self, us: u64) {
        self.counts[index(us).min(BUCKETS - 1)] += 1;
        self.count += 1;
        self.max_us = self.max_us.max(us);
    }

    /// Adds another histogram's rows.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.count += other.count;
        self.max_us = self.max_us.max(other.max_us);
    }

    /// Rows counted.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The `q` quantile (0..=1) in microseconds: the upper end of the
    /// bucket holding it, never above the largest value seen.
    pub fn quantile_us(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return upper(i).min(self.max_us);
            }
        }
        self.max_us
    }

    /// Rows at or below `us` microseconds (for cumulative Prometheus
    /// buckets; exact when `us` is a bucket boundary, else rounded down to one).
    pub fn count_at_most(&self, us: u64) -> u64 {
        self.counts
            .iter()
            .enumerate()
            .take_while(|(i, _)| upper(*i) <= us)
            .map(|(_, c)| c)
            .sum()
    }

    /// The non-empty buckets: the largest value each holds (µs) and its
    /// count, ascending.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (upper(i).min(self.max_us), c))
    }

    /// The percentiles a progress record carries (`None` without rows).
    pub fn summary(&self) -> Option<LatencySummary> {
        (self.count > 0).then(|| LatencySummary {
            rows: self.count,
            p50_ms: self.quantile_us(0.5) as f64 / 1e3,
            p99_ms: self.quantile_us(0.99) as f64 / 1e3,
            p999_ms: self.quantile_us(0.999) as f64 / 1e3,
            max_ms: self.max_us as f64 / 1e3,
        })
    }
}

/// Event→emit latency of one epoch's output rows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Output rows measured (those with an event time).
    pub rows: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest value in bucket `i`.
    fn lower(i: usize) -> u64 {
        if i < 2 * SUB {
            return i as u64;
        }
        let shift = i / SUB - 1;
        (((i - shift * SUB) as u128) << shift).min(u128::from(u64::MAX)) as u64
    }

    #[test]
    fn buckets_are_contiguous_and_tight() {
        for i in 0..BUCKETS - 1 {
            assert_eq!(upper(i) + 1, lower(i + 1), "bucket {i}");
        }
        assert_eq!(index(u64::MAX), BUCKETS - 1);
        assert_eq!(upper(BUCKETS - 1), u64::MAX);
        for v in [
            0,
            1,
            31,
            32,
            33,
            1_000,
            1_999,
            123_456,
            10_000_000_000,
            u64::MAX,
        ] {
            let i = index(v);
            assert!(lower(i) <= v && v <= upper(i), "{v} in bucket {i}");
            assert!((upper(i) - lower(i)) as f64 <= v as f64 / 16.0 + 1.0, "{v}");
        }
    }

    #[test]
    fn quantiles_of_a_known_distribution() {
        let mut h = Histogram::default();
        for us in 1..=10_000 {
            h.record(us);
        }
        let p50 = h.quantile_us(0.5) as f64;
        let p99 = h.quantile_us(0.99) as f64;
        assert!((p50 - 5_000.0).abs() / 5_000.0 < 0.07, "{p50}");
        assert!((p99 - 9_900.0).abs() / 9_900.0 < 0.07, "{p99}");
        assert_eq!(h.quantile_us(1.0), 10_000);
        let s = h.summary().unwrap();
        assert_eq!((s.rows, s.max_ms), (10_000, 10.0));
        let mut twice = h.clone();
        twice.merge(&h);
        assert_eq!(twice.count(), 20_000);
        assert_eq!(twice.quantile_us(0.5), h.quantile_us(0.5));
        assert_eq!(h.count_at_most(u64::MAX), 10_000);
        assert_eq!(Histogram::default().summary(), None);
    }
}
