//! One card's recent payments in event time, as kept in state: the event
//! times (Unix ms) of its payments in the last window, ascending, as
//! little-endian i64s. Free of SDK types, so it is tested natively.

/// A card's payment times within the window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Window {
    times: Vec<i64>,
}

impl Window {
    /// Decodes a stored value; trailing bytes that do not make a whole
    /// timestamp are ignored (the value is only ever written by `encode`).
    #[inline]
    pub fn decode(bytes: &[u8]) -> Self {
        Window {
            times: bytes
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect(),
        }
    }

    /// The stored form.
    #[inline]
    pub fn encode(&self) -> Vec<u8> {
        self.times.iter().flat_map(|t| t.to_le_bytes()).collect()
    }

    /// Records a payment at `t` and returns how many of the card's payments
    /// fall in `(t - window_ms, t]`, this one included. Times the window has
    /// left behind (older than the newest minus the window) are dropped.
    #[inline]
    pub fn record(&mut self, t: i64, window_ms: i64) -> usize {
        let at = self.times.partition_point(|&x| x <= t);
        self.times.insert(at, t);
        let from = t.saturating_sub(window_ms);
        let count = self.times[..at + 1].iter().filter(|&&x| x > from).count();
        if let Some(&newest) = self.times.last() {
            let keep_from = newest.saturating_sub(window_ms);
            self.times.retain(|&x| x > keep_from);
        }
        count
    }

    /// Whether nothing is left to keep.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_payments_in_the_sliding_window_and_forgets_old_ones() {
        let mut w = Window::default();
        let counts: Vec<usize> = [0, 10_000, 20_000, 59_999, 60_000, 61_000, 200_000]
            .iter()
            .map(|&t| w.record(t, 60_000))
            .collect();
        assert_eq!(counts, [1, 2, 3, 4, 4, 5, 1]);
        assert_eq!(Window::decode(&w.encode()), w);
        assert_eq!(w.encode().len(), 8, "only the newest payment is left");
    }

    #[test]
    fn out_of_order_payments_count_against_their_own_time() {
        let mut w = Window::default();
        w.record(100_000, 60_000);
        w.record(130_000, 60_000);
        // 80 s lies within the window of the newest (130 s): kept, counted
        // against its own window (20 s .. 80 s], which holds only itself.
        assert_eq!(w.record(80_000, 60_000), 1);
        assert_eq!(
            w.record(131_000, 60_000),
            4,
            "80, 100, 130 and 131 s are in (71 s, 131 s]"
        );
    }
}
