//! Durations in configuration files as people write them ("500ms", "2s",
//! "1m"), for `#[serde(with = "weir_core::duration")]`.

use serde::{Deserialize, Deserializer, Serializer};
use std::time::Duration;

/// Writes `d` as humantime text ("1s 500ms").
pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&humantime::format_duration(*d).to_string())
}

/// Reads humantime text, naming the bad value and the expected form.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    humantime::parse_duration(&text).map_err(|e| {
        serde::de::Error::custom(format!(
            "`{text}` is not a duration ({e}); write e.g. \"500ms\" or \"2s\""
        ))
    })
}
