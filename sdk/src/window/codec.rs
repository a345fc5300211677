//! The stored forms of window state: an aggregate (four 8-byte words), a
//! session's aggregate and end, and a *chunk* — one batch's contribution
//! to every window ending at one time (per key: the partial aggregate and
//! the payloads), appended to that end's list as one element.

use super::Aggregate;
use crate::Error;

/// Bytes of an encoded aggregate.
const AGG_LEN: usize = 32;

/// Key order that is numeric order for signed times.
pub(super) fn sortable(t: i64) -> [u8; 8] {
    ((t as u64) ^ (1 << 63)).to_be_bytes()
}

/// The time a [`sortable`] encoding holds.
pub(super) fn unsortable(b: &[u8]) -> Option<i64> {
    Some((u64::from_be_bytes(b.try_into().ok()?) ^ (1 << 63)) as i64)
}

fn corrupt() -> Error {
    Error::failed("window state is corrupt")
}

fn push_agg(out: &mut Vec<u8>, agg: &Aggregate) {
    out.extend_from_slice(&agg.count.to_le_bytes());
    out.extend_from_slice(&agg.sum.to_le_bytes());
    out.extend_from_slice(&agg.min.to_le_bytes());
    out.extend_from_slice(&agg.max.to_le_bytes());
}

/// Reads bytes off the front of an encoded value.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let (head, rest) = self.0.split_at_checked(n).ok_or_else(corrupt)?;
        self.0 = rest;
        Ok(head)
    }

    fn word(&mut self) -> Result<[u8; 8], Error> {
        self.take(8)?.try_into().map_err(|_| corrupt())
    }

    fn len(&mut self) -> Result<usize, Error> {
        let b: [u8; 4] = self.take(4)?.try_into().map_err(|_| corrupt())?;
        Ok(u32::from_le_bytes(b) as usize)
    }

    fn agg(&mut self) -> Result<Aggregate, Error> {
        Ok(Aggregate {
            count: u64::from_le_bytes(self.word()?),
            sum: f64::from_le_bytes(self.word()?),
            min: f64::from_le_bytes(self.word()?),
            max: f64::from_le_bytes(self.word()?),
        })
    }
}

/// An aggregate as stored.
pub(super) fn encode_agg(agg: &Aggregate) -> Vec<u8> {
    let mut v = Vec::with_capacity(AGG_LEN);
    push_agg(&mut v, agg);
    v
}

/// The aggregate [`encode_agg`] stored.
pub(super) fn decode_agg(v: &[u8]) -> Result<Aggregate, Error> {
    Reader(v).agg()
}

/// A session as stored: aggregate and end.
pub(super) fn encode_session(agg: &Aggregate, end: i64) -> Vec<u8> {
    let mut v = encode_agg(agg);
    v.extend_from_slice(&end.to_le_bytes());
    v
}

/// The aggregate and end [`encode_session`] stored.
pub(super) fn decode_session(v: &[u8]) -> Result<(Aggregate, i64), Error> {
    let mut r = Reader(v);
    let agg = r.agg()?;
    Ok((agg, i64::from_le_bytes(r.word()?)))
}

/// Adds one key's part to a chunk.
pub(super) fn push_part(chunk: &mut Vec<u8>, key: &[u8], agg: &Aggregate, rows: &[&[u8]]) {
    chunk.extend_from_slice(&(key.len() as u32).to_le_bytes());
    chunk.extend_from_slice(key);
    push_agg(chunk, agg);
    chunk.extend_from_slice(&(rows.len() as u32).to_le_bytes());
    for row in rows {
        chunk.extend_from_slice(&(row.len() as u32).to_le_bytes());
        chunk.extend_from_slice(row);
    }
}

/// Hands each part of `chunk` (key, partial aggregate, payloads) to `part`.
pub(super) fn read_parts(
    chunk: &[u8],
    mut part: impl FnMut(&[u8], Aggregate, Vec<&[u8]>),
) -> Result<(), Error> {
    let mut r = Reader(chunk);
    while !r.0.is_empty() {
        let len = r.len()?;
        let key = r.take(len)?;
        let agg = r.agg()?;
        let n = r.len()?;
        let mut rows = Vec::with_capacity(n.min(r.0.len() / 4));
        for _ in 0..n {
            let len = r.len()?;
            rows.push(r.take(len)?);
        }
        part(key, agg, rows);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_and_times_round_trip() {
        let mut agg = Aggregate::default();
        agg.add(2.5);
        agg.add(-1.0);
        let mut chunk = Vec::new();
        push_part(&mut chunk, b"card-a", &agg, &[b"r1", b""]);
        push_part(&mut chunk, b"", &Aggregate::default(), &[]);
        let mut parts = Vec::new();
        read_parts(&chunk, |k, a, rows| {
            parts.push((
                k.to_vec(),
                a,
                rows.iter().map(|r| r.to_vec()).collect::<Vec<_>>(),
            ))
        })
        .unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(
            parts[0],
            (b"card-a".to_vec(), agg, vec![b"r1".to_vec(), vec![]])
        );
        assert_eq!(parts[1].0, b"");
        assert!(read_parts(&chunk[..chunk.len() - 3], |_, _, _| {}).is_err());
        assert_eq!(
            decode_session(&encode_session(&agg, -7)).unwrap(),
            (agg, -7)
        );
        let mut times = [5, -3, i64::MIN, 0, i64::MAX];
        times.sort_by_key(|&t| sortable(t));
        assert_eq!(times, [i64::MIN, -3, 0, 5, i64::MAX]);
        assert_eq!(unsortable(&sortable(-3)), Some(-3));
    }
}
