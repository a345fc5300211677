//! [`Digest`]: the identity of an operator component, an operator config, a
//! golden file — anything Weir keeps in `checkpoint/blobs/` and names in the
//! WAL. One type, so a digest is computed, printed and parsed one way.

use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::fmt;
use std::str::FromStr;

/// The sha256 of a byte string, written `sha256:<64 lowercase hex digits>`
/// in the WAL, the registry, the admin API and logs.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest([u8; 32]);

/// Why a text is not a [`Digest`]; shown to whoever wrote it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a digest (expected `sha256:` and 64 lowercase hex digits)")]
pub struct NotADigest(pub String);

impl Digest {
    const PREFIX: &'static str = "sha256:";

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        use sha2::Digest as _;
        Self(Sha256::digest(bytes).into())
    }

    /// The 64 hex digits without the `sha256:` prefix: the blob's file name
    /// and the compile cache's key.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The 32 bytes, for comparing digests without formatting them.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The first 12 hex digits, for tables meant for people.
    pub fn short(&self) -> String {
        format!("{}{}", Self::PREFIX, &self.hex()[..12])
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", Self::PREFIX, self.hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Digest {
    type Err = NotADigest;

    /// Strict, so that a digest read from the WAL writes back byte for byte.
    fn from_str(text: &str) -> Result<Self, NotADigest> {
        let bad = || NotADigest(text.to_string());
        let hex = text.strip_prefix(Self::PREFIX).ok_or_else(bad)?;
        let lower_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
        if hex.len() != 64 || !hex.bytes().all(lower_hex) {
            return Err(bad());
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(hex, &mut bytes).map_err(|_| bad())?;
        Ok(Self(bytes))
    }
}

impl TryFrom<String> for Digest {
    type Error = NotADigest;
    fn try_from(text: String) -> Result<Self, NotADigest> {
        text.parse()
    }
}

impl From<Digest> for String {
    fn from(digest: Digest) -> String {
        digest.to_string()
    }
}

impl PartialEq<str> for Digest {
    fn eq(&self, text: &str) -> bool {
        text.parse::<Digest>().is_ok_and(|d| d == *self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_parses_and_serializes_as_the_prefixed_hex() {
        let d = Digest::of(b"component bytes");
        let text = d.to_string();
        assert!(text.starts_with("sha256:") && text.len() == 7 + 64);
        assert_eq!(text.parse::<Digest>().unwrap(), d);
        assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"{text}\""));
        assert_eq!(
            serde_json::from_str::<Digest>(&format!("\"{text}\"")).unwrap(),
            d
        );
        assert_eq!(d.short(), text[..19]);
    }

    #[test]
    fn refuses_anything_but_the_canonical_form() {
        let hex = Digest::of(b"x").hex();
        for bad in [
            String::new(),
            hex.clone(),
            format!("sha256:{}", hex.to_uppercase()),
            format!("sha256:{}", &hex[..63]),
            format!("sha1:{hex}"),
            format!("sha256:{hex}0"),
        ] {
            assert!(bad.parse::<Digest>().is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<Digest>("\"sha256:zz\"").is_err());
    }
}
