//! Exact decimals: money is never a float.

use std::cmp::Ordering;
use std::fmt;

/// The largest number of digits a decimal column holds.
pub const MAX_PRECISION: u8 = 38;

/// An exact decimal number: `unscaled × 10^-scale` (`12.34` is 1234 at
/// scale 2). Arithmetic is exact or fails (`checked_*` give `None` past
/// 38 digits); comparison is by value, so `1.5 == 1.50`. The host's
/// `decimal(P,S)` columns read and write it exactly.
#[derive(Debug, Clone, Copy)]
pub struct Decimal {
    unscaled: i128,
    scale: u8,
}

const POW10: [i128; 39] = {
    let mut table = [1i128; 39];
    let mut i = 1;
    while i < 39 {
        table[i] = table[i - 1] * 10;
        i += 1;
    }
    table
};

impl Decimal {
    /// `unscaled × 10^-scale`; `None` if `scale` is over 38 or the value
    /// has more than 38 digits.
    pub fn new(unscaled: i128, scale: u8) -> Option<Decimal> {
        (scale <= MAX_PRECISION && unscaled.unsigned_abs() < POW10[38] as u128)
            .then_some(Decimal { unscaled, scale })
    }

    /// A value the host already checked against its column's precision.
    #[inline]
    pub(crate) fn checked_by_host(unscaled: i128, scale: u8) -> Decimal {
        Decimal { unscaled, scale }
    }

    /// An integer as a decimal with no fraction digits.
    pub fn from_i64(value: i64) -> Decimal {
        Decimal {
            unscaled: i128::from(value),
            scale: 0,
        }
    }

    /// The integer the decimal counts in units of `10^-scale`.
    pub fn unscaled(self) -> i128 {
        self.unscaled
    }

    /// Digits after the point.
    pub fn scale(self) -> u8 {
        self.scale
    }

    /// The same value with `scale` fraction digits; `None` if that would
    /// drop a non-zero digit or exceed 38 digits (no rounding, ever).
    pub fn rescale(self, scale: u8) -> Option<Decimal> {
        if scale >= self.scale {
            let factor = *POW10.get(usize::from(scale - self.scale))?;
            Decimal::new(self.unscaled.checked_mul(factor)?, scale)
        } else {
            let factor = POW10[usize::from(self.scale - scale)];
            (self.unscaled % factor == 0).then(|| Decimal {
                unscaled: self.unscaled / factor,
                scale,
            })
        }
    }

    fn aligned(self, other: Decimal) -> Option<(i128, i128, u8)> {
        let scale = self.scale.max(other.scale);
        Some((
            self.rescale(scale)?.unscaled,
            other.rescale(scale)?.unscaled,
            scale,
        ))
    }

    /// `self + other`, exact; `None` past 38 digits.
    pub fn checked_add(self, other: Decimal) -> Option<Decimal> {
        let (a, b, scale) = self.aligned(other)?;
        Decimal::new(a.checked_add(b)?, scale)
    }

    /// `self - other`, exact; `None` past 38 digits.
    pub fn checked_sub(self, other: Decimal) -> Option<Decimal> {
        let (a, b, scale) = self.aligned(other)?;
        Decimal::new(a.checked_sub(b)?, scale)
    }

    /// `self × other`, exact (the scales add); `None` past 38 digits.
    pub fn checked_mul(self, other: Decimal) -> Option<Decimal> {
        Decimal::new(
            self.unscaled.checked_mul(other.unscaled)?,
            self.scale.checked_add(other.scale)?,
        )
    }

    /// Whether the value is below zero.
    pub fn is_negative(self) -> bool {
        self.unscaled < 0
    }

    /// The nearest `f64` (for a model's features; never for money).
    pub fn to_f64(self) -> f64 {
        self.unscaled as f64 / POW10[usize::from(self.scale)] as f64
    }

    /// Whole part and fraction (truncated toward zero, same sign), the
    /// fraction at scale `scale` (≥ `self.scale`): exact for every value.
    fn parts(self, scale: u8) -> (i128, i128) {
        let factor = POW10[usize::from(self.scale)];
        let fraction = (self.unscaled % factor) * POW10[usize::from(scale - self.scale)];
        (self.unscaled / factor, fraction)
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Decimal) -> Ordering {
        // One column's values share a scale: compare the integers. (i128
        // division is a library call in Wasm, so `parts` is the slow path.)
        if self.scale == other.scale {
            return self.unscaled.cmp(&other.unscaled);
        }
        let scale = self.scale.max(other.scale);
        let widened = |d: &Decimal| d.unscaled.checked_mul(POW10[usize::from(scale - d.scale)]);
        match (widened(self), widened(other)) {
            (Some(a), Some(b)) => a.cmp(&b),
            _ => self.parts(scale).cmp(&other.parts(scale)),
        }
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Decimal) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Decimal {
    fn eq(&self, other: &Decimal) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Decimal {}

impl fmt::Display for Decimal {
    /// Plain notation with exactly `scale` fraction digits: `-0.05`, `12.30`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.unscaled.unsigned_abs().to_string();
        let scale = usize::from(self.scale);
        let sign = if self.unscaled < 0 { "-" } else { "" };
        if scale == 0 {
            return write!(f, "{sign}{digits}");
        }
        let padded = format!("{digits:0>width$}", width = scale + 1);
        let (whole, fraction) = padded.split_at(padded.len() - scale);
        write!(f, "{sign}{whole}.{fraction}")
    }
}

/// Why text is not a decimal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseDecimalError(String);

impl fmt::Display for ParseDecimalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` is not a decimal number", self.0)
    }
}

impl std::error::Error for ParseDecimalError {}

impl std::str::FromStr for Decimal {
    type Err = ParseDecimalError;

    /// `12.34`, `-0.5`, `7`, `+1.0`: the scale is the number of digits
    /// written after the point. No exponents, no rounding.
    fn from_str(text: &str) -> Result<Decimal, ParseDecimalError> {
        let bad = || ParseDecimalError(text.chars().take(64).collect());
        let (negative, body) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let (whole, fraction) = body.split_once('.').unwrap_or((body, ""));
        let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() && fraction.is_empty() || !digits_only(whole) || !digits_only(fraction)
        {
            return Err(bad());
        }
        let scale = u8::try_from(fraction.len()).map_err(|_| bad())?;
        let mut unscaled: i128 = 0;
        for b in whole.bytes().chain(fraction.bytes()) {
            unscaled = unscaled
                .checked_mul(10)
                .and_then(|u| u.checked_add(i128::from(b - b'0')))
                .ok_or_else(bad)?;
        }
        Decimal::new(if negative { -unscaled } else { unscaled }, scale).ok_or_else(bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> Decimal {
        text.parse().unwrap()
    }

    #[test]
    fn arithmetic_is_exact_and_compares_by_value() {
        assert_eq!(d("0.1").checked_add(d("0.2")).unwrap(), d("0.3"));
        assert_eq!(d("0.1").checked_add(d("0.2")).unwrap().to_string(), "0.3");
        assert_eq!(d("1.5"), d("1.50"));
        assert!(d("-1.5") < d("-1.2") && d("-0.5") < d("0.3") && d("10") > d("9.999"));
        assert_eq!(d("19.99").checked_mul(d("3")).unwrap().to_string(), "59.97");
        assert_eq!(
            d("5.00").checked_sub(d("7.25")).unwrap().to_string(),
            "-2.25"
        );
        assert_eq!(d("-0.05").to_string(), "-0.05");
        assert_eq!(d("12.30").rescale(1).unwrap().to_string(), "12.3");
        assert_eq!(d("12.34").rescale(1), None);
        let big = Decimal::new(POW10[38] - 1, 0).unwrap();
        assert_eq!(big.checked_add(d("1")), None);
        assert!(big > Decimal::new(POW10[38] - 1, 38).unwrap());
        for bad in ["", ".", "-", "1e5", "1.2.3", "abc", " 1"] {
            assert!(bad.parse::<Decimal>().is_err(), "{bad}");
        }
        assert_eq!(d(".5").to_string(), "0.5");
        assert_eq!(d("5.").to_string(), "5");
    }
}
