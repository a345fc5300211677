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

    /// Decodes what [`Buffered::encode`] wrote, or what the builds before
    /// typed amounts wrote (`None` if it is neither).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let mut r = Reader(bytes);
        let len = u32::from_le_bytes(r.take()?) as usize;
        let txn_id = std::str::from_utf8(r.bytes(len)?).ok()?.to_string();
        if r.0.len() == LEGACY_TAIL {
            return Self::decode_legacy(txn_id, r);
        }
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

    /// The layout before typed amounts: amount (f64, NaN for none), ts,
    /// score and fired bits, 8 bytes each, after the txn_id. Its length
    /// after the txn_id (32) is none of the current layout's (26, 34, 44),
    /// so the two are told apart by length: window state written by an
    /// older build of the operator still closes.
    fn decode_legacy(txn_id: String, mut r: Reader<'_>) -> Option<Self> {
        let amount = f64::from_le_bytes(r.take()?);
        Some(Buffered {
            txn_id,
            amount: (!amount.is_nan()).then_some(Amount::Float(amount)),
            precision: 0,
            ts: i64::from_le_bytes(r.take()?),
            ts_typed: false,
            score: f64::from_le_bytes(r.take()?),
            fired: u64::from_le_bytes(r.take()?),
        })
    }
}

/// Bytes after the txn_id in the layout before typed amounts.
const LEGACY_TAIL: usize = 32;

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

    #[test]
    fn a_payment_buffered_by_an_older_build_still_decodes() {
        let mut old = Vec::new();
        old.extend_from_slice(&3u32.to_le_bytes());
        old.extend_from_slice(b"t-9");
        for word in [
            12.5f64.to_le_bytes(),
            77i64.to_le_bytes(),
            0.5f64.to_le_bytes(),
        ] {
            old.extend_from_slice(&word);
        }
        old.extend_from_slice(&0b11u64.to_le_bytes());
        assert_eq!(
            Buffered::decode(&old),
            Some(Buffered {
                txn_id: "t-9".into(),
                amount: Some(Amount::Float(12.5)),
                precision: 0,
                ts: 77,
                ts_typed: false,
                score: 0.5,
                fired: 0b11,
            })
        );
        for amount in [
            None,
            Some(Amount::Float(1.0)),
            Some(Amount::Exact("1.00".parse().unwrap())),
        ] {
            let b = Buffered {
                txn_id: "t-9".into(),
                amount,
                precision: 18,
                ts: 1,
                ts_typed: true,
                score: 0.0,
                fired: 0,
            };
            assert_ne!(
                b.encode().len(),
                old.len(),
                "no current layout has the old length"
            );
        }
    }
}
