//! `fraud-windows-by-hand`: the `fraud-windows` job written the way it had
//! to be before timers, lists and scans — the baseline of the `windows`
//! benchmark, not an operator to deploy. Each window's payments are one
//! state value, read and rewritten whole by every batch that adds to it;
//! an index key lists the open windows, read and rewritten every batch; a
//! window is emitted by the first batch whose watermark passed its end (so
//! without more input the last windows never close).

use fraud_common::windows_job::{Alerts, FraudWindows};
use std::collections::{BTreeMap, BTreeSet};
use weir_sdk::{state, Batch, EpochContext, Error, Operator, Output};

/// The state key listing every open window.
const INDEX: &[u8] = b"\xffopen-windows";

/// The rules and the window length of `fraud-windows`, with its config.
pub struct ByHand(FraudWindows);

/// A window's state key: card, 0, start (big-endian, so keys sort by card).
fn window_key(card: &[u8], start: i64) -> Vec<u8> {
    let mut key = card.to_vec();
    key.push(0);
    key.extend_from_slice(&start.to_be_bytes());
    key
}

fn split_key(key: &[u8]) -> Option<(&[u8], i64)> {
    let (card, start) = key.split_at_checked(key.len().checked_sub(9)?)?;
    let start = i64::from_be_bytes(start.get(1..)?.try_into().ok()?);
    Some((card, start))
}

/// A list of payloads in one value: u32 length, bytes, repeated.
fn push_payload(value: &mut Vec<u8>, payload: &[u8]) {
    value.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    value.extend_from_slice(payload);
}

fn payloads(mut value: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while let Some((len, rest)) = value.split_first_chunk::<4>() {
        let len = u32::from_le_bytes(*len) as usize;
        let Some((payload, rest)) = rest.split_at_checked(len) else {
            break;
        };
        out.push(payload);
        value = rest;
    }
    out
}

fn read_index() -> BTreeSet<Vec<u8>> {
    let value = state::get(INDEX).unwrap_or_default();
    payloads(&value).into_iter().map(<[u8]>::to_vec).collect()
}

fn write_index(index: &BTreeSet<Vec<u8>>) {
    let mut value = Vec::new();
    for key in index {
        push_payload(&mut value, key);
    }
    state::put(INDEX, &value);
}

impl ByHand {
    /// Adds the batch's payments to their windows' values (read, append,
    /// rewrite whole) and returns the index of open windows.
    fn buffer(&self, batch: &Batch) -> Result<BTreeSet<Vec<u8>>, Error> {
        let arrivals = self.0.arrivals(batch)?;
        let size = self.0.window_ms();
        let mut added: BTreeMap<Vec<u8>, Vec<usize>> = BTreeMap::new();
        for (i, &(row, ts)) in arrivals.rows.iter().enumerate() {
            let card = arrivals.cards.get_bytes(row).unwrap_or_default();
            let key = window_key(card, ts.div_euclid(size) * size);
            added.entry(key).or_default().push(i);
        }
        let keys: Vec<&Vec<u8>> = added.keys().collect();
        let old = state::get_many(&keys);
        let mut writes = Vec::with_capacity(keys.len());
        for (k, (key, rows)) in added.iter().enumerate() {
            let mut value = old.get(k).map(<[u8]>::to_vec).unwrap_or_default();
            for &i in rows {
                push_payload(&mut value, &arrivals.payloads[i]);
            }
            writes.push((key.clone(), value));
        }
        state::put_many(&writes, None);
        let mut index = read_index();
        index.extend(added.into_keys());
        Ok(index)
    }
}

impl Operator for ByHand {
    fn init(config: &str) -> Result<Self, Error> {
        Ok(ByHand(FraudWindows::from_config(config)?))
    }

    fn process(&mut self, _ctx: &EpochContext, batch: &Batch) -> Result<Output, Error> {
        let mut index = self.buffer(batch)?;
        let mut alerts = Alerts::default();
        if let Some(mark) = state::watermark() {
            let size = self.0.window_ms();
            let closed: Vec<Vec<u8>> = index
                .iter()
                .filter(|k| split_key(k).is_some_and(|(_, start)| start + size <= mark))
                .cloned()
                .collect();
            let values = state::get_many(&closed);
            for (k, key) in closed.iter().enumerate() {
                let (Some((card, start)), Some(value)) = (split_key(key), values.get(k)) else {
                    continue;
                };
                let rows = payloads(value);
                let card = String::from_utf8_lossy(card);
                self.0.score_window(
                    &card,
                    rows.len() as u64,
                    start,
                    rows.into_iter(),
                    &mut alerts,
                )?;
                index.remove(key);
            }
            state::delete_many(&closed);
        }
        write_index(&index);
        alerts.build()
    }
}

weir_sdk::export_operator!(ByHand);
