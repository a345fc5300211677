//! A replayed real-time epoch's parts read with one fetch, not one each.
//!
//! A real-time epoch logs a part for every poll that found records (a few
//! records each, hundreds of parts per epoch). Read one by one, every part
//! cost a fetch of its own (assign, poll, unassign: ~0.2 s against a
//! broker), so the replay of an 800-part epoch after a crash took minutes
//! while no epoch could commit. The parts of one epoch follow each other in
//! every partition, so a replay fetches, per partition, the span from the
//! first part's start to the last part's end once, and deals the records
//! back to the parts: each gets exactly the records a read of it alone
//! would, in the same order.

use super::plan::{KafkaRange, PartitionRange, Tp};
use super::source::Fetched;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// What to fetch for `parts`: per partition, one span from the lowest
/// start to the highest end of its ranges.
pub(crate) fn spans(parts: &[KafkaRange]) -> Vec<PartitionRange> {
    let mut by_tp: BTreeMap<Tp, (i64, i64)> = BTreeMap::new();
    for r in parts.iter().flat_map(|p| &p.partitions) {
        if r.end <= r.start {
            continue;
        }
        let span = by_tp
            .entry((r.topic.clone(), r.partition))
            .or_insert((r.start, r.end));
        span.0 = span.0.min(r.start);
        span.1 = span.1.max(r.end);
    }
    by_tp
        .into_iter()
        .map(|((topic, partition), (start, end))| PartitionRange {
            topic,
            partition,
            start,
            end,
        })
        .collect()
}

/// `records`, one fetch of [`spans`] of `parts` (each partition's in
/// offset order), dealt back to the parts: part by part, range by range
/// in the part's order, as reading each part alone returns them.
pub(crate) fn split(parts: &[KafkaRange], records: Vec<Fetched>) -> Vec<Vec<Fetched>> {
    let mut by_tp: HashMap<Tp, VecDeque<Fetched>> = HashMap::new();
    for r in records {
        by_tp
            .entry((r.topic.clone(), r.partition))
            .or_default()
            .push_back(r);
    }
    parts
        .iter()
        .map(|part| {
            let mut out = Vec::new();
            for r in &part.partitions {
                let Some(queue) = by_tp.get_mut(&(r.topic.clone(), r.partition)) else {
                    continue;
                };
                while queue.front().is_some_and(|f| f.offset < r.start) {
                    queue.pop_front();
                }
                while let Some(f) = queue.pop_front() {
                    if f.offset >= r.end {
                        queue.push_front(f);
                        break;
                    }
                    out.push(f);
                }
            }
            out
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(partition: i32, start: i64, end: i64) -> PartitionRange {
        PartitionRange {
            topic: "t".into(),
            partition,
            start,
            end,
        }
    }

    fn offsets(part: &[Fetched]) -> Vec<(i32, i64)> {
        part.iter().map(|f| (f.partition, f.offset)).collect()
    }

    #[test]
    fn parts_get_the_records_a_read_of_each_alone_would() {
        let parts = vec![
            KafkaRange {
                partitions: vec![range(0, 0, 2), range(1, 5, 6)],
            },
            KafkaRange {
                partitions: vec![range(1, 6, 8)],
            },
            KafkaRange {
                partitions: vec![range(0, 2, 3), range(1, 8, 8)],
            },
        ];
        assert_eq!(spans(&parts), vec![range(0, 0, 3), range(1, 5, 8)]);
        // One fetch: each partition's records in offset order, with a gap
        // (offset 7 compacted away).
        let fetched = [(0, 0), (0, 1), (0, 2), (1, 5), (1, 6)]
            .into_iter()
            .map(|(p, o)| Fetched::at("t", p, o))
            .collect();
        let split = split(&parts, fetched);
        assert_eq!(offsets(&split[0]), vec![(0, 0), (0, 1), (1, 5)]);
        assert_eq!(offsets(&split[1]), vec![(1, 6)]);
        assert_eq!(offsets(&split[2]), vec![(0, 2)]);
    }
}
