//! A buffered payment, as kept in its window's list until the window
//! closes: what the alert needs, and the rules' verdict computed on
//! arrival. Free of SDK types, so it is tested natively.

/// One payment waiting for its window's final count.
#[derive(Debug, Clone, PartialEq)]
pub struct Buffered {
    pub txn_id: String,
    pub amount: Option<f64>,
    pub ts: i64,
    /// The configured rules' score and fired bits.
    pub score: f64,
    pub fired: u64,
}

impl Buffered {
    /// The stored form: txn_id length (u32 LE) and bytes, then amount
    /// (NaN for none), ts, score and fired bits, 8 bytes each.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.txn_id.len() + 32);
        out.extend_from_slice(&(self.txn_id.len() as u32).to_le_bytes());
        out.extend_from_slice(self.txn_id.as_bytes());
        out.extend_from_slice(&self.amount.unwrap_or(f64::NAN).to_le_bytes());
        out.extend_from_slice(&self.ts.to_le_bytes());
        out.extend_from_slice(&self.score.to_le_bytes());
        out.extend_from_slice(&self.fired.to_le_bytes());
        out
    }

    /// Decodes what [`Buffered::encode`] wrote (`None` if it is not that).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
        let txn_id = std::str::from_utf8(bytes.get(4..4 + len)?)
            .ok()?
            .to_string();
        let word = |i: usize| -> Option<[u8; 8]> {
            bytes
                .get(4 + len + i * 8..4 + len + i * 8 + 8)?
                .try_into()
                .ok()
        };
        let amount = f64::from_le_bytes(word(0)?);
        Some(Buffered {
            txn_id,
            amount: (!amount.is_nan()).then_some(amount),
            ts: i64::from_le_bytes(word(1)?),
            score: f64::from_le_bytes(word(2)?),
            fired: u64::from_le_bytes(word(3)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffered_payment_round_trips() {
        let b = Buffered {
            txn_id: "t-1".into(),
            amount: Some(12.5),
            ts: -3,
            score: 0.25,
            fired: 0b101,
        };
        assert_eq!(Buffered::decode(&b.encode()), Some(b.clone()));
        let none = Buffered { amount: None, ..b };
        assert_eq!(Buffered::decode(&none.encode()), Some(none));
        assert_eq!(Buffered::decode(b"\x09\x00\x00\x00ab"), None);
    }
}
