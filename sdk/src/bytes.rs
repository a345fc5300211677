//! Byte-string helpers for the hot loops of operators.

/// `a == b`, fast for the short strings rules compare (codes, ids) in a
/// Wasm guest too. There, `==` on byte slices calls wasi-libc's `memcmp`,
/// a byte-at-a-time loop behind a call: the `pipeline` bench's profile
/// found it was 40% of `fraud-rules`' `process` (docs/design/performance.md).
/// In Wasm this compares lengths, then the bytes with at most two loads a
/// side and no loop up to 16 bytes: every loop iteration in a guest pays
/// an epoch-deadline check (the host's guarantee that no operator hangs),
/// which the bench measured at a quarter of `process`.
/// Natively it is plain `==`, since glibc's vectorised `memcmp` is faster.
#[inline]
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    #[cfg(target_arch = "wasm32")]
    {
        by_words(a, b)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        a == b
    }
}

/// [`same_bytes`] in Wasm (compiled everywhere, so it is tested natively).
/// Strings of 4 to 16 bytes are compared as two overlapping words (the
/// first and the last `w` bytes), shorter ones as at most three loads;
/// only strings over 16 bytes loop, eight bytes a step.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
#[inline(always)]
fn by_words(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => ends::<4>(a, b),
        8..=16 => ends::<8>(a, b),
        _ => {
            let mut i = 0;
            while i + 8 < n {
                if word::<8>(&a[i..]) != word::<8>(&b[i..]) {
                    return false;
                }
                i += 8;
            }
            word::<8>(&a[n - 8..]) == word::<8>(&b[n - 8..])
        }
    }
}

/// Whether the first `W` and the last `W` bytes agree (`W <= len <= 2W`
/// covers every byte).
#[inline(always)]
fn ends<const W: usize>(a: &[u8], b: &[u8]) -> bool {
    let tail = a.len() - W;
    word::<W>(a) == word::<W>(b) && word::<W>(&a[tail..]) == word::<W>(&b[tail..])
}

/// The first `W` (4 or 8) bytes as a little-endian integer.
#[inline(always)]
fn word<const W: usize>(bytes: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..W].copy_from_slice(&bytes[..W]);
    u64::from_le_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::{by_words, same_bytes};

    #[test]
    fn both_ways_of_comparing_are_equality() {
        let words: [&[u8]; 8] = [
            b"",
            b"U",
            b"US",
            b"USD",
            b"m-0666",
            b"m-0666-x",
            b"m-0666-extra-long",
            b"m-0666-extra-lonG",
        ];
        for a in words {
            for b in words {
                assert_eq!(by_words(a, b), a == b, "{a:?} {b:?}");
                assert_eq!(same_bytes(a, b), a == b, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn a_difference_at_any_position_of_any_length_is_seen() {
        for len in 0..=40usize {
            let a: Vec<u8> = (0..len as u8).map(|i| b'a' + i % 26).collect();
            assert!(by_words(&a, &a.clone()), "len {len}");
            for at in 0..len {
                let mut b = a.clone();
                b[at] ^= 0x20;
                assert!(!by_words(&a, &b), "len {len}, byte {at}");
            }
            assert!(!by_words(&a, &a[..len.saturating_sub(1)]) || len == 0);
        }
    }
}
