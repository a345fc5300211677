//! `weir operator test --state`: the keyed state an operator test starts
//! from, so that "a card seen before" can be tested without first feeding
//! the history through the operator. One JSON object per line:
//!
//! ```text
//! {"key": "card:4111", "value": "{\"count\":3}"}
//! {"key": "limits", "value": {"max": 500}}
//! {"key_hex": "00ff", "value_hex": "0100000000000000"}
//! ```
//!
//! `key` is the key's UTF-8 text, `key_hex` its bytes in hex. A string
//! `value` is stored as its UTF-8 text, any other JSON value as its compact
//! JSON text, `value_hex` as the bytes it spells. Keys are the operator's
//! own (the host adds the namespace), as `state.get` sees them.

use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};
use std::path::Path;
use weir_state::{namespace_prefix, EpochState, SnapshotPolicy, StateStore};

/// Writes the entries of the file at `path` into the new state store at
/// `root` (`checkpoint/state`), in the operator's `namespace`.
pub fn seed_file(path: &Path, root: &Path, namespace: &str) -> Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the initial state {}", path.display()))?;
    let entries = parse(&text).with_context(|| format!("{}", path.display()))?;
    let (mut store, _) = StateStore::open(root, SnapshotPolicy::default(), None)
        .context("creating the test's state store")?;
    let mut epoch = EpochState::new(store.reader(), 0, 0);
    let prefix = namespace_prefix(namespace);
    for (key, value) in &entries {
        epoch.put(&prefix, key, value, None);
    }
    store.seed(epoch.into_changes())
}

/// The (key, value) pairs of a state file; a key given twice is an error.
fn parse(text: &str) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut entries = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("line {}", n + 1);
        let object: Map<String, Value> =
            serde_json::from_str(line).with_context(|| format!("{}: not a JSON object", at()))?;
        let entry = entry(&object).with_context(at)?;
        if !seen.insert(entry.0.clone()) {
            bail!(
                "{}: key {:?} is set twice",
                at(),
                String::from_utf8_lossy(&entry.0)
            );
        }
        entries.push(entry);
    }
    Ok(entries)
}

fn entry(object: &Map<String, Value>) -> Result<(Vec<u8>, Vec<u8>)> {
    if let Some(extra) = object
        .keys()
        .find(|k| !["key", "key_hex", "value", "value_hex"].contains(&k.as_str()))
    {
        bail!("unknown field `{extra}` (expected key or key_hex, and value or value_hex)");
    }
    let key = match (object.get("key"), object.get("key_hex")) {
        (Some(Value::String(s)), None) => s.as_bytes().to_vec(),
        (None, Some(Value::String(h))) => hex(h).context("key_hex")?,
        (Some(_), None) => bail!("`key` must be a string (use key_hex for bytes)"),
        _ => bail!("give exactly one of `key` and `key_hex`"),
    };
    let value = match (object.get("value"), object.get("value_hex")) {
        (Some(Value::String(s)), None) => s.as_bytes().to_vec(),
        (Some(v), None) => v.to_string().into_bytes(),
        (None, Some(Value::String(h))) => hex(h).context("value_hex")?,
        _ => bail!("give exactly one of `value` and `value_hex` (a string)"),
    };
    Ok((key, value))
}

fn hex(text: &str) -> Result<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        bail!("{text:?} has an odd number of hex digits");
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .with_context(|| format!("{text:?} is not hex"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn text_json_and_hex_entries_parse_and_mistakes_are_named() {
        let entries = parse(
            "{\"key\":\"card:1\",\"value\":\"3\"}\n\n\
             {\"key\":\"limits\",\"value\":{\"max\":500}}\n\
             {\"key_hex\":\"00ff\",\"value_hex\":\"0a0B\"}\n",
        )
        .unwrap();
        assert_eq!(
            entries,
            [
                (b"card:1".to_vec(), b"3".to_vec()),
                (b"limits".to_vec(), b"{\"max\":500}".to_vec()),
                (vec![0, 255], vec![10, 11]),
            ]
        );
        for (bad, says) in [
            ("{\"key\":\"a\"}", "exactly one of `value`"),
            ("{\"key\":1,\"value\":\"x\"}", "must be a string"),
            ("{\"key_hex\":\"0g\",\"value\":\"x\"}", "not hex"),
            (
                "{\"key\":\"a\",\"value\":\"x\",\"ttl\":1}",
                "unknown field `ttl`",
            ),
            (
                "{\"key\":\"a\",\"value\":1}\n{\"key\":\"a\",\"value\":2}",
                "line 2",
            ),
            ("[1]", "line 1: not a JSON object"),
        ] {
            let err = format!("{:#}", parse(bad).unwrap_err());
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
