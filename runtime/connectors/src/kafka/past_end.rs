//! Records a broker serves past the end it reports.
//!
//! A micro-batch epoch is planned up to each partition's high watermark, the
//! end of the log the broker reports. A broker that reports an end short of
//! its log (tansu's in-memory storage does, by a few records after a burst of
//! produces) leaves the last records unplanned while the backlog says 0, and
//! nothing would tell the user. A fetch of an epoch's range usually gets the
//! records just past the range in the same response; the source notes the
//! highest offset it was served, and a partition whose reported end stays
//! below it is logged as a warning and counted in the backlog. Those records
//! are not planned: the broker's end is what a range is checked against,
//! and a correct broker never serves past it.

use super::marks::Watermarks;
use super::plan::Tp;
use std::collections::BTreeMap;

/// What the source has been served past the broker's reported ends.
#[derive(Default)]
pub(crate) struct PastEnd {
    /// Per partition, one past the highest offset a fetch was served.
    served_end: BTreeMap<Tp, i64>,
    /// Per partition, the `served_end` already warned of.
    warned: BTreeMap<Tp, i64>,
    /// Per partition, the end the broker reported last.
    reported: BTreeMap<Tp, i64>,
}

/// One partition whose broker served records past its reported end.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Shortfall {
    pub tp: Tp,
    /// The high watermark the broker reports.
    pub reported: i64,
    /// One past the highest offset it served.
    pub served: i64,
}

impl Shortfall {
    fn records(&self) -> u64 {
        (self.served - self.reported).max(0) as u64
    }

    fn message(&self) -> String {
        format!(
            "Kafka partition {}-{} served records up to offset {} but reports its end (high \
             watermark) as {}: {} records are not planned until the reported end moves past \
             them. A correct broker never does this; one that under-reports its high watermark \
             (tansu's in-memory storage does) silently drops them from micro-batch epochs.",
            self.tp.0,
            self.tp.1,
            self.served - 1,
            self.reported,
            self.records()
        )
    }
}

impl PastEnd {
    /// Notes what a fetch was served: one past the highest offset, per
    /// partition.
    pub fn note(&mut self, served: &BTreeMap<Tp, i64>) {
        for (tp, &end) in served {
            let seen = self.served_end.entry(tp.clone()).or_insert(end);
            *seen = (*seen).max(end);
        }
    }

    /// Warns once of each partition whose reported end (in `marks`) is
    /// below what it served, and returns how many records that leaves out
    /// (for the backlog).
    pub fn check(&mut self, marks: &Watermarks) -> u64 {
        for (tp, &(_, high)) in marks {
            // An end that went back (the topic recreated, a new leader not
            // caught up) or reached what was served: what was seen before
            // says nothing about the log now.
            let went_back = self
                .reported
                .insert(tp.clone(), high)
                .is_some_and(|was| high < was);
            let caught_up = self
                .served_end
                .get(tp)
                .is_some_and(|&served| high >= served);
            if went_back || caught_up {
                self.served_end.remove(tp);
                self.warned.remove(tp);
            }
        }
        let found = shortfalls(&self.served_end, marks);
        for s in &found {
            if self.warned.get(&s.tp) != Some(&s.served) {
                tracing::warn!("{}", s.message());
                self.warned.insert(s.tp.clone(), s.served);
            }
        }
        found.iter().map(Shortfall::records).sum()
    }
}

/// The partitions whose `served_end` lies past the end `marks` reports.
pub(crate) fn shortfalls(served_end: &BTreeMap<Tp, i64>, marks: &Watermarks) -> Vec<Shortfall> {
    served_end
        .iter()
        .filter_map(|(tp, &served)| {
            let &(_, reported) = marks.get(tp)?;
            (served > reported).then(|| Shortfall {
                tp: tp.clone(),
                reported,
                served,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> Tp {
        ("payments".to_string(), p)
    }

    #[test]
    fn records_past_the_reported_end_are_a_shortfall_until_the_end_moves() {
        let seen = BTreeMap::from([(tp(0), 6721), (tp(1), 6619), (tp(2), 10)]);
        let marks = Watermarks::from([(tp(0), (0, 6716)), (tp(1), (0, 6619)), (tp(2), (0, 9))]);
        let found = shortfalls(&seen, &marks);
        assert_eq!(
            found,
            vec![
                Shortfall {
                    tp: tp(0),
                    reported: 6716,
                    served: 6721
                },
                Shortfall {
                    tp: tp(2),
                    reported: 9,
                    served: 10
                }
            ]
        );
        let m = found[0].message();
        assert!(
            m.contains("payments-0")
                && m.contains("offset 6720")
                && m.contains("as 6716: 5 records"),
            "{m}"
        );
        let moved = Watermarks::from([(tp(0), (0, 6721)), (tp(2), (0, 12))]);
        assert!(shortfalls(&seen, &moved).is_empty());
    }

    #[test]
    fn an_end_that_catches_up_or_goes_back_forgets_what_was_served() {
        let mut past = PastEnd::default();
        past.note(&BTreeMap::from([(tp(0), 100)]));
        assert_eq!(past.check(&Watermarks::from([(tp(0), (0, 95))])), 5);
        // The topic recreated: its new log says nothing of the old one's.
        assert_eq!(past.check(&Watermarks::from([(tp(0), (0, 3))])), 0);
        past.note(&BTreeMap::from([(tp(0), 10)]));
        assert_eq!(past.check(&Watermarks::from([(tp(0), (0, 8))])), 2);
        assert_eq!(past.check(&Watermarks::from([(tp(0), (0, 10))])), 0);
        assert_eq!(past.check(&Watermarks::from([(tp(0), (0, 9))])), 0);
    }
}
