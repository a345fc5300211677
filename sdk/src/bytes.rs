//! Byte-string helpers for the hot loops of operators.

/// `a == b`, fast for the short strings rules compare (codes, ids) in a
/// Wasm guest too. There, `==` on byte slices calls wasi-libc's `memcmp`,
/// a byte-at-a-time loop behind a call: the `pipeline` bench's profile
/// found it was 40% of `fraud-rules`' `process` (docs/parallelism.md).
/// In Wasm this compares lengths, then eight bytes at a time, inline.
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
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
#[inline]
fn by_words(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i + 8 <= a.len() {
        if word(&a[i..i + 8]) != word(&b[i..i + 8]) {
            return false;
        }
        i += 8;
    }
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[inline]
fn word(bytes: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(bytes);
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
}
