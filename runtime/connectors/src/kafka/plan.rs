//! Planning Kafka epochs, free of any client: from where each partition
//! stands and what the broker holds, decide the `[start, end)` range of
//! every partition for the next epoch. Kept pure so it is tested without a
//! broker.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A topic-partition.
pub type Tp = (String, i32);

/// One partition's slice of an epoch: offsets `start..end`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRange {
    pub topic: String,
    pub partition: i32,
    pub start: i64,
    pub end: i64,
}

/// The WAL form of a Kafka source's range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaRange {
    pub partitions: Vec<PartitionRange>,
}

/// Records that aged out of retention before they were read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loss {
    pub tp: Tp,
    /// First offset we wanted.
    pub wanted: i64,
    /// First offset the broker still has.
    pub available: i64,
}

/// Plans the next ranges.
///
/// `positions` is the next offset to read per known partition; `watermarks`
/// is `(low, high)` per partition the broker reports (new partitions start
/// at their low watermark). With `max_offsets` the total is capped and
/// spread over partitions in proportion to their backlog. Returns the
/// non-empty ranges (in topic-partition order) and the losses found;
/// with `fail_on_data_loss` a loss is an error instead.
pub fn plan(
    positions: &BTreeMap<Tp, i64>,
    watermarks: &BTreeMap<Tp, (i64, i64)>,
    max_offsets: Option<u64>,
    fail_on_data_loss: bool,
) -> Result<(Vec<PartitionRange>, Vec<Loss>)> {
    let mut losses = Vec::new();
    let mut spans: Vec<(Tp, i64, i64)> = Vec::new();
    for (tp, &(low, high)) in watermarks {
        let wanted = positions.get(tp).copied().unwrap_or(low);
        let start = if wanted < low {
            losses.push(Loss {
                tp: tp.clone(),
                wanted,
                available: low,
            });
            low
        } else if wanted > high {
            // The partition holds fewer records than we already read: the
            // topic was deleted and recreated, or truncated.
            losses.push(Loss {
                tp: tp.clone(),
                wanted,
                available: high,
            });
            high
        } else {
            wanted
        };
        spans.push((tp.clone(), start, high));
    }
    if fail_on_data_loss {
        if let Some(l) = losses.first() {
            bail!(
                "data loss on {}-{}: offset {} was planned next but the broker now starts at {} \
                 (retention deleted records, or the topic was recreated). Set \
                 `source.fail_on_data_loss = false` to skip ahead and log how many were lost.",
                l.tp.0,
                l.tp.1,
                l.wanted,
                l.available
            );
        }
    }
    let backlog: u64 = spans.iter().map(|(_, s, e)| (e - s).max(0) as u64).sum();
    let budget = max_offsets.unwrap_or(u64::MAX).min(backlog);
    let mut shares: Vec<u64> = spans
        .iter()
        .map(|(_, s, e)| {
            let avail = (e - s).max(0) as u64;
            if backlog == 0 {
                0
            } else {
                ((avail as u128 * budget as u128) / backlog as u128) as u64
            }
        })
        .collect();
    // Hand out what rounding left over, in partition order.
    let mut left = budget - shares.iter().sum::<u64>();
    for (share, (_, s, e)) in shares.iter_mut().zip(&spans) {
        let room = (e - s).max(0) as u64 - *share;
        let extra = room.min(left);
        *share += extra;
        left -= extra;
    }
    let ranges = spans
        .into_iter()
        .zip(shares)
        .filter(|(_, share)| *share > 0)
        .map(|((tp, start, _), share)| PartitionRange {
            topic: tp.0,
            partition: tp.1,
            start,
            end: start + share as i64,
        })
        .collect();
    Ok((ranges, losses))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> Tp {
        ("payments".to_string(), p)
    }

    fn marks(v: &[(i32, i64, i64)]) -> BTreeMap<Tp, (i64, i64)> {
        v.iter().map(|&(p, l, h)| (tp(p), (l, h))).collect()
    }

    #[test]
    fn new_partitions_start_at_their_low_watermark() {
        let (r, loss) = plan(
            &BTreeMap::new(),
            &marks(&[(0, 0, 10), (1, 5, 7)]),
            None,
            true,
        )
        .unwrap();
        assert!(loss.is_empty());
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].start, r[0].end), (0, 10));
        assert_eq!((r[1].start, r[1].end), (5, 7));
    }

    #[test]
    fn caught_up_partitions_plan_nothing() {
        let pos = BTreeMap::from([(tp(0), 10), (tp(1), 7)]);
        let (r, _) = plan(&pos, &marks(&[(0, 0, 10), (1, 5, 7)]), None, true).unwrap();
        assert!(r.is_empty());
    }

    #[test]
    fn max_offsets_is_spread_by_backlog_and_used_exactly() {
        let pos = BTreeMap::from([(tp(0), 0), (tp(1), 0), (tp(2), 0)]);
        let (r, _) = plan(
            &pos,
            &marks(&[(0, 0, 900), (1, 0, 100), (2, 0, 1)]),
            Some(101),
            true,
        )
        .unwrap();
        let total: i64 = r.iter().map(|x| x.end - x.start).sum();
        assert_eq!(total, 101);
        assert!(r[0].end - r[0].start >= 90, "{r:?}");
        for x in &r {
            assert!(x.end <= [900, 100, 1][x.partition as usize]);
        }
    }

    #[test]
    fn data_loss_fails_or_skips() {
        let pos = BTreeMap::from([(tp(0), 3)]);
        let m = marks(&[(0, 10, 20)]);
        let err = plan(&pos, &m, None, true).unwrap_err().to_string();
        assert!(
            err.contains("payments-0") && err.contains("offset 3"),
            "{err}"
        );
        let (r, loss) = plan(&pos, &m, None, false).unwrap();
        assert_eq!(
            loss,
            vec![Loss {
                tp: tp(0),
                wanted: 3,
                available: 10
            }]
        );
        assert_eq!((r[0].start, r[0].end), (10, 20));
    }
}
