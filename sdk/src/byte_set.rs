//! [`ByteSet`]: a fixed set of byte strings (merchant ids, currency and
//! country codes) that a rule tests every row against.

use std::collections::HashSet;

/// A set of byte strings built once (in `init`) and probed per row.
///
/// Strings of up to 16 bytes, which codes and ids are, are kept packed into
/// two integers and a length in an open-addressed table at most a quarter
/// full:
/// a probe packs the row's bytes with at most four loads and no loop,
/// hashes them with one multiplication and compares integers, nearly
/// always at the first slot. That matters most in a Wasm guest, where
/// `memcmp` is a byte loop behind a call and every loop iteration pays the
/// host's deadline check (the `pipeline` bench measured a list scan with
/// [`crate::same_bytes`] at a third of `fraud-rules`' `process`); SipHash
/// (`HashSet`) is slow in both places. Longer strings go to a `HashSet`.
#[derive(Debug, Clone)]
pub struct ByteSet {
    slots: Vec<Packed>,
    /// `slots.len() - 1` (a power of two minus one).
    mask: usize,
    /// Right shift taking the hash's top bits to a slot index.
    shift: u32,
    long: HashSet<Vec<u8>>,
}

/// A string of up to 16 bytes: its bytes little-endian in `lo` (0..8) and
/// `hi` (8..16), zero-padded, and its length (`EMPTY` for a free slot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Packed {
    lo: u64,
    hi: u64,
    len: u64,
}

impl Packed {
    const EMPTY: Packed = Packed {
        lo: 0,
        hi: 0,
        len: u64::MAX,
    };

    /// Packs `s` if it is at most 16 bytes long.
    #[inline(always)]
    fn new(s: &[u8]) -> Option<Packed> {
        let n = s.len();
        let (lo, hi) = match n {
            0 => (0, 0),
            1..=3 => {
                let (mid, last) = (n / 2, n - 1);
                let lo =
                    s[0] as u64 | (s[mid] as u64) << (8 * mid) | (s[last] as u64) << (8 * last);
                (lo, 0)
            }
            // Two overlapping loads; the bytes they share are equal, so OR
            // combines them.
            4..=8 => (le::<4>(s) | le::<4>(&s[n - 4..]) << (8 * (n - 4)), 0),
            9..=16 => (le::<8>(s), le::<8>(&s[n - 8..]) >> (8 * (16 - n))),
            _ => return None,
        };
        Some(Packed {
            lo,
            hi,
            len: n as u64,
        })
    }

    #[inline(always)]
    fn hash(&self) -> u64 {
        (self.lo ^ self.hi.rotate_left(29) ^ self.len.rotate_left(53))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

/// The first `W` bytes of `s` as a little-endian integer.
#[inline(always)]
fn le<const W: usize>(s: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..W].copy_from_slice(&s[..W]);
    u64::from_le_bytes(w)
}

impl ByteSet {
    /// The set of `items` (duplicates are kept once).
    pub fn new<I, S>(items: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        let mut short = Vec::new();
        let mut long = HashSet::new();
        for item in items {
            let item = item.as_ref();
            match Packed::new(item) {
                Some(p) => short.push(p),
                None => {
                    long.insert(item.to_vec());
                }
            }
        }
        // At most a quarter full (half for large sets), so that a string
        // not in the set nearly always meets a free slot at once.
        let spread = if short.len() <= 4096 { 4 } else { 2 };
        let size = (spread * short.len()).next_power_of_two().max(2);
        let mut set = ByteSet {
            slots: vec![Packed::EMPTY; size],
            mask: size - 1,
            shift: 64 - size.trailing_zeros(),
            long,
        };
        for p in short {
            let mut i = set.slot_of(&p);
            while set.slots[i] != Packed::EMPTY && set.slots[i] != p {
                i = (i + 1) & set.mask;
            }
            set.slots[i] = p;
        }
        set
    }

    #[inline(always)]
    fn slot_of(&self, p: &Packed) -> usize {
        (p.hash() >> self.shift) as usize & self.mask
    }

    /// Whether `s` is in the set.
    #[inline(always)]
    pub fn contains(&self, s: &[u8]) -> bool {
        let Some(p) = Packed::new(s) else {
            return self.long.contains(s);
        };
        let mut i = self.slot_of(&p);
        loop {
            let slot = self.slots[i];
            if slot == p {
                return true;
            }
            if slot.len == u64::MAX {
                return false;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Number of distinct strings in the set.
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.len != u64::MAX).count() + self.long.len()
    }

    /// Whether the set has no strings.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::ByteSet;

    fn words() -> Vec<Vec<u8>> {
        let mut words: Vec<Vec<u8>> = vec![b"".to_vec(), b"\0".to_vec(), b"\0\0".to_vec()];
        for n in 1..=24 {
            words.push((0..n).map(|i| b'a' + (i % 26) as u8).collect());
            let mut last = words.last().unwrap().clone();
            *last.last_mut().unwrap() = b'Z';
            words.push(last.clone());
            last[0] = 0;
            words.push(last);
        }
        words.sort();
        words.dedup();
        words
    }

    #[test]
    fn it_holds_exactly_its_items_at_every_length() {
        let all = words();
        for take in [0, 1, 2, 3, 7, all.len() / 2, all.len()] {
            let (inside, outside) = all.split_at(take);
            let set = ByteSet::new(inside);
            assert_eq!(set.len(), take);
            for w in inside {
                assert!(set.contains(w), "{w:?} should be in");
            }
            for w in outside {
                assert!(!set.contains(w), "{w:?} should be out");
            }
        }
    }

    #[test]
    fn duplicates_count_once_and_a_full_table_still_ends_probes() {
        let set = ByteSet::new(["USD", "USD", "EUR"]);
        assert_eq!(set.len(), 2);
        let many: Vec<String> = (0..1000).map(|i| format!("m-{i:04}")).collect();
        let set = ByteSet::new(&many);
        assert!(many.iter().all(|m| set.contains(m.as_bytes())));
        assert!(!set.contains(b"m-1000") && !set.contains(b"m-999"));
    }
}
