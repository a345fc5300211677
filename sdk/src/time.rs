//! Timestamps and dates as the host's columns carry them: counts since
//! 1970-01-01, with a unit; no clock, no time-zone database.

use crate::bindings::weir::operator::types as wit;
use std::fmt;

pub(crate) fn from_wit(unit: wit::TimeUnit) -> TimeUnit {
    match unit {
        wit::TimeUnit::Second => TimeUnit::Second,
        wit::TimeUnit::Millisecond => TimeUnit::Millisecond,
        wit::TimeUnit::Microsecond => TimeUnit::Microsecond,
        wit::TimeUnit::Nanosecond => TimeUnit::Nanosecond,
    }
}

pub(crate) fn to_wit(unit: TimeUnit) -> wit::TimeUnit {
    match unit {
        TimeUnit::Second => wit::TimeUnit::Second,
        TimeUnit::Millisecond => wit::TimeUnit::Millisecond,
        TimeUnit::Microsecond => wit::TimeUnit::Microsecond,
        TimeUnit::Nanosecond => wit::TimeUnit::Nanosecond,
    }
}

/// The unit of a timestamp's count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeUnit {
    /// Seconds.
    Second,
    /// Milliseconds.
    Millisecond,
    /// Microseconds.
    Microsecond,
    /// Nanoseconds.
    Nanosecond,
}

impl TimeUnit {
    /// Units in one second.
    pub fn per_second(self) -> i64 {
        match self {
            TimeUnit::Second => 1,
            TimeUnit::Millisecond => 1_000,
            TimeUnit::Microsecond => 1_000_000,
            TimeUnit::Nanosecond => 1_000_000_000,
        }
    }
}

/// An instant: `count` `unit`s since 1970-01-01T00:00:00Z. Compared by
/// instant, so `1 s == 1000 ms`.
#[derive(Debug, Clone, Copy)]
pub struct Timestamp {
    /// The count.
    pub count: i64,
    /// Its unit.
    pub unit: TimeUnit,
}

impl Timestamp {
    /// Nanoseconds since the epoch, exact for every unit.
    pub fn as_nanos(self) -> i128 {
        i128::from(self.count) * i128::from(1_000_000_000 / self.unit.per_second())
    }

    /// Milliseconds since the epoch (rounded toward negative infinity for
    /// finer units), the unit of epoch times and watermarks.
    pub fn as_millis(self) -> i64 {
        match self.unit {
            TimeUnit::Second => self.count.saturating_mul(1_000),
            TimeUnit::Millisecond => self.count,
            TimeUnit::Microsecond => self.count.div_euclid(1_000),
            TimeUnit::Nanosecond => self.count.div_euclid(1_000_000),
        }
    }
}

impl PartialEq for Timestamp {
    fn eq(&self, other: &Timestamp) -> bool {
        self.as_nanos() == other.as_nanos()
    }
}

impl Eq for Timestamp {}

impl Ord for Timestamp {
    fn cmp(&self, other: &Timestamp) -> std::cmp::Ordering {
        self.as_nanos().cmp(&other.as_nanos())
    }
}

impl PartialOrd for Timestamp {
    fn partial_cmp(&self, other: &Timestamp) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::hash::Hash for Timestamp {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_nanos().hash(state);
    }
}

impl fmt::Display for Timestamp {
    /// RFC 3339 in UTC with the unit's digits: `2026-12-07T09:30:00.250Z`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per = self.unit.per_second();
        let (seconds, fraction) = (self.count.div_euclid(per), self.count.rem_euclid(per));
        let (days, of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
        let (y, m, d) = civil(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
            of_day / 3600,
            of_day % 3600 / 60,
            of_day % 60
        )?;
        match self.unit {
            TimeUnit::Second => {}
            TimeUnit::Millisecond => write!(f, ".{fraction:03}")?,
            TimeUnit::Microsecond => write!(f, ".{fraction:06}")?,
            TimeUnit::Nanosecond => write!(f, ".{fraction:09}")?,
        }
        f.write_str("Z")
    }
}

/// A calendar date: days since 1970-01-01.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date(pub i32);

impl Date {
    /// Year, month (1–12) and day (1–31), proleptic Gregorian.
    pub fn ymd(self) -> (i64, u32, u32) {
        civil(i64::from(self.0))
    }
}

impl fmt::Display for Date {
    /// `2026-12-07`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, m, d) = self.ymd();
        write!(f, "{y:04}-{m:02}-{d:02}")
    }
}

/// The civil date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_and_dates_print_as_rfc_3339() {
        let t = |count, unit| Timestamp { count, unit }.to_string();
        assert_eq!(t(0, TimeUnit::Second), "1970-01-01T00:00:00Z");
        assert_eq!(
            t(1_796_635_800_250, TimeUnit::Millisecond),
            "2026-12-07T09:30:00.250Z"
        );
        assert_eq!(t(-1, TimeUnit::Microsecond), "1969-12-31T23:59:59.999999Z");
        assert_eq!(
            t(951_782_400_000_000_001, TimeUnit::Nanosecond),
            "2000-02-29T00:00:00.000000001Z"
        );
        assert_eq!(Date(20_429).to_string(), "2025-12-07");
        assert_eq!(Date(-719_468).to_string(), "0000-03-01");
        let ts = Timestamp {
            count: -1,
            unit: TimeUnit::Microsecond,
        };
        assert_eq!(ts.as_millis(), -1);
    }
}
