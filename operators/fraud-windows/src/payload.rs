//! A buffered payment, as kept in its window's list until the window
//! closes: what the alert needs, and the rules' verdict computed on
//! arrival. Free of Wasm types, so it is tested natively.

use crate::rules::Amount;
use weir_sdk::Decimal;

/// One payment waiting for its window's final count.
#[derive(Debug, Clone, PartialEq)]
pub struct Buffered {
    pub txn_id: String,
    pub amount: Option<Amount>,
    /// The precision of the decimal column the amount came from (0 for a
    /// float), so the alert's column has the input's type.
    pub precision: u8,
    /// Event time in Unix milliseconds.
    pub ts: i64,
    /// Whether `ts` came from a timestamp column (the alert then carries a
    /// `timestamp(ms, UTC)`) rather than int64 milliseconds.
    pub ts_typed: bool,
    /// The configured rules' score and fired bits.
    pub score: f64,
    pub fired: u64,
}

/// The amount's stored kinds.
const NO_AMOUNT: u8 = 0;
const FLOAT: u8 = 1;
const EXACT: u8 = 2;

impl Buffered {
    /// The stored form: txn_id length (u32 LE) and bytes; the amount's
    /// kind, then 8 bytes of float, or the precision, scale and 16 bytes of
    /// unscaled decimal; whether ts is typed; ts, score and fired bits, 8
    /// bytes each.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.txn_id.len() + 52);
        out.extend_from_slice(&(self.txn_id.len() as u32).to_le_bytes());
        out.extend_from_slice(self.txn_id.as_bytes());
        match self.amount {
            None => out.push(NO_AMOUNT),
            Some(Amount::Float(f)) => {
                out.push(FLOAT);
                out.extend_from_slice(&f.to_le_bytes());
            }
            Some(Amount::Exact(d)) => {
                out.extend_from_slice(&[EXACT, self.precision, d.scale()]);
                out.extend_from_slice(&d.unscaled().to_le_bytes());
            }
        }
        out.push(u8::from(self.ts_typed));
        out.extend_from_slice(&self.ts.to_le_bytes());
        out.extend_from_slice(&self.score.to_le_bytes());
        out.extend_from_slice(&self.fired.to_le_bytes());
        out
    }

    /// Decodes what [`Buffered::encode`] wrote (`None` if it is not that).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let mut r = Reader(bytes);
        let len = u32::from_le_bytes(r.take()?) as usize;
        let txn_id = std::str::from_utf8(r.bytes(len)?).ok()?.to_string();
        let [kind] = r.take()?;
        let (amount, precision) = match kind {
            NO_AMOUNT => (None, 0),
            FLOAT => (Some(Amount::Float(f64::from_le_bytes(r.take()?))), 0),
            EXACT => {
                let [precision, scale] = r.take()?;
                let unscaled = i128::from_le_bytes(r.take()?);
                let d = Decimal::new(unscaled, scale)?;
                (Some(Amount::Exact(d)), precision)
            }
            _ => return None,
        };
        let [ts_typed] = r.take()?;
        let b = Buffered {
            txn_id,
            amount,
            precision,
            ts_typed: ts_typed == 1,
            ts: i64::from_le_bytes(r.take()?),
            score: f64::from_le_bytes(r.take()?),
            fired: u64::from_le_bytes(r.take()?),
        };
        (r.0.is_empty() && ts_typed <= 1).then_some(b)
    }
}

/// Reads fixed-size pieces from the front of a byte string.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn bytes(&mut self, n: usize) -> Option<&[u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }

    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.bytes(N)?.try_into().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffered_payment_round_trips() {
        let b = Buffered {
            txn_id: "t-1".into(),
            amount: Some(Amount::Float(12.5)),
            precision: 0,
            ts: -3,
            ts_typed: false,
            score: 0.25,
            fired: 0b101,
        };
        assert_eq!(Buffered::decode(&b.encode()), Some(b.clone()));
        let none = Buffered {
            amount: None,
            ..b.clone()
        };
        assert_eq!(Buffered::decode(&none.encode()), Some(none));
        let exact = Buffered {
            amount: Some(Amount::Exact("-1234567890123456.78".parse().unwrap())),
            precision: 18,
            ts_typed: true,
            ..b
        };
        assert_eq!(Buffered::decode(&exact.encode()), Some(exact.clone()));
        let mut longer = exact.encode();
        longer.push(0);
        assert_eq!(Buffered::decode(&longer), None);
        assert_eq!(Buffered::decode(b"\x09\x00\x00\x00ab"), None);
    }
}
