//! Who may call the admin API, and for what: named bearer tokens with a
//! scope, kept as sha256 digests in a file that is read again whenever it
//! changes, so a token is added, rotated or revoked without a restart.
//!
//! ```toml
//! [[token]]
//! name = "ci-deploy"
//! scope = "deploy"
//! sha256 = "sha256:4b2f…"   # `weir token new` prints the entry
//! ```
//!
//! Scopes are nested: `read` (status, versions, progress, history,
//! metrics, the dashboard) ⊂ `deploy` (upload, activate, shadow, promote,
//! stop a shadow run) ⊂ `admin` (rollback). Tokens are random 256-bit
//! strings, so one sha256 is enough to keep the file from being a list of
//! passwords (a slow password hash protects guessable secrets; these are
//! not).

use crate::reload::Reloaded;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::io::Read;
use std::path::Path;
use weir_core::Digest;
use weir_engine::config::admin::TokenSource;

/// What a token may do; each scope includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Status, versions, progress, history, `/metrics`, the dashboard.
    Read,
    /// Upload, activate, shadow, promote, stop a shadow run.
    Deploy,
    /// Rollback.
    Admin,
}

impl Scope {
    /// The scope as written in the tokens file.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Deploy => "deploy",
            Scope::Admin => "admin",
        }
    }
}

impl std::str::FromStr for Scope {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "read" => Ok(Scope::Read),
            "deploy" => Ok(Scope::Deploy),
            "admin" => Ok(Scope::Admin),
            other => bail!("scope must be read, deploy or admin, not `{other}`"),
        }
    }
}

/// A caller whose token was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's name (`admin` for the single `admin.token`,
    /// `anonymous` when the API has no token).
    pub name: String,
    pub scope: Scope,
}

/// Why a token was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Missing,
    Wrong,
}

/// One named token, as its digest.
#[derive(Clone)]
struct Known {
    name: String,
    scope: Scope,
    digest: Digest,
}

/// The tokens the API accepts now.
pub struct Tokens {
    source: TokenSource,
    /// Read again from the tokens file when it changes (never, for the
    /// other sources: they watch no file).
    known: Reloaded<Vec<Known>>,
    /// Whether the tokens file read last was valid (for `/metrics`).
    pub file_ok: std::sync::atomic::AtomicBool,
}

/// Names Weir gives actors itself in the audit trail: no token takes one.
pub const RESERVED_NAMES: [&str; 5] = ["engine", "pipeline-file", "watch", "anonymous", "admin"];

/// Whether `name` may name a token; the reason if not.
pub fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
    {
        return Err(format!(
            "token name `{name}` must be 1 to 64 letters, digits and - _ . @"
        ));
    }
    if RESERVED_NAMES.contains(&name) {
        return Err(format!(
            "token name `{name}` is reserved: the audit trail uses it for Weir's own changes"
        ));
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    token: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    scope: Scope,
    sha256: String,
}

impl Tokens {
    /// The tokens of `source`: for a file, read now (an error if it cannot
    /// be read or is not valid).
    pub fn load(source: TokenSource) -> Result<Self> {
        let known = match &source {
            TokenSource::None => Reloaded::new(Vec::new(), || anyhow::Ok(Vec::new()))?,
            TokenSource::Single(token) => Reloaded::new(Vec::new(), || {
                anyhow::Ok(vec![Known {
                    name: "admin".into(),
                    scope: Scope::Admin,
                    digest: Digest::of(token.as_bytes()),
                }])
            })?,
            TokenSource::File(path) => Reloaded::new(vec![path.clone()], || read_file(path))?,
        };
        Ok(Tokens {
            source,
            known,
            file_ok: std::sync::atomic::AtomicBool::new(true),
        })
    }

    /// Whether any token is required.
    pub fn required(&self) -> bool {
        self.source != TokenSource::None
    }

    /// Reads the tokens file again if it changed. A file that became
    /// invalid (a half-made edit) is reported and the tokens before are
    /// kept; a file that was removed revokes every token.
    pub fn reload_if_changed(&self) {
        let TokenSource::File(path) = &self.source else {
            return;
        };
        let reloaded = self.known.reload(|| match path.exists() {
            true => read_file(path),
            false => Ok(Vec::new()),
        });
        let ok = match reloaded {
            None => return,
            Some(Ok(_)) if !path.exists() => {
                tracing::error!(
                    file = %path.display(),
                    "the admin tokens file is gone: every token is revoked until it is back"
                );
                false
            }
            Some(Ok(known)) => {
                let names: Vec<&str> = known.iter().map(|k| k.name.as_str()).collect();
                tracing::info!(
                    file = %path.display(),
                    "admin tokens read again: {}",
                    names.join(", ")
                );
                true
            }
            Some(Err(e)) => {
                tracing::error!(
                    "admin tokens file changed but cannot be used; the tokens before stay (a \
                     token removed from it is NOT yet revoked): {e:#}"
                );
                false
            }
        };
        self.file_ok.store(ok, std::sync::atomic::Ordering::Relaxed);
    }

    /// The caller a bearer token (`None`: no `Authorization` header)
    /// belongs to.
    pub fn check(&self, given: Option<&str>) -> std::result::Result<Caller, Refusal> {
        if !self.required() {
            return Ok(Caller {
                name: "anonymous".into(),
                scope: Scope::Admin,
            });
        }
        let given = Digest::of(given.ok_or(Refusal::Missing)?.trim().as_bytes());
        // Every entry is compared, in time independent of where digests
        // differ.
        let mut found = None;
        for k in self.known.current().iter() {
            if same_bytes(k.digest.as_bytes(), given.as_bytes()) {
                found = Some(Caller {
                    name: k.name.clone(),
                    scope: k.scope,
                });
            }
        }
        found.ok_or(Refusal::Wrong)
    }
}

/// Compares in time independent of where the first difference is.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads and checks a tokens file.
fn read_file(path: &Path) -> Result<Vec<Known>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the admin tokens file {}", path.display()))?;
    let known = parse(&text, &path.display().to_string())?;
    if known.is_empty() {
        tracing::warn!(
            file = %path.display(),
            "the admin tokens file has no tokens: every request but /v1/health is refused"
        );
    }
    Ok(known)
}

/// Checks the text of a tokens file (`origin` names it in errors), e.g.
/// before `weir token new` writes it; the names of its tokens. Errors
/// never quote a `sha256` value or the line holding it (someone may have
/// pasted the token itself there).
pub fn check_text(text: &str, origin: &str) -> Result<Vec<String>> {
    Ok(parse(text, origin)?.into_iter().map(|k| k.name).collect())
}

fn parse(text: &str, origin: &str) -> Result<Vec<Known>> {
    let file: File = toml::from_str(text).map_err(|e| {
        anyhow::anyhow!(
            "{origin} is not a valid tokens file ({}): expected [[token]] entries with name, \
             scope and sha256",
            e.message()
        )
    })?;
    let mut known: Vec<Known> = Vec::new();
    for entry in file.token {
        check_name(&entry.name).map_err(|m| anyhow::anyhow!("{origin}: {m}"))?;
        if known.iter().any(|k| k.name == entry.name) {
            bail!("{origin}: two tokens are named `{}`", entry.name);
        }
        let digest: Digest = entry.sha256.parse().map_err(|_| {
            anyhow::anyhow!(
                "{origin}: token `{}`: `sha256` must be `sha256:` and 64 hex digits, the digest \
                 of the token (`weir token new` prints it), never the token itself",
                entry.name
            )
        })?;
        if let Some(twin) = known.iter().find(|k| k.digest == digest) {
            bail!(
                "{origin}: tokens `{}` and `{}` are the same token",
                twin.name,
                entry.name
            );
        }
        known.push(Known {
            name: entry.name,
            scope: entry.scope,
            digest,
        });
    }
    Ok(known)
}

/// A new random token (`weir_` and 64 hex digits: 256 bits from the
/// operating system's generator).
pub fn new_token() -> Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("reading random bytes from /dev/urandom")?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("weir_{hex}"))
}

/// The `[[token]]` entry of a tokens file for `token`.
pub fn entry(name: &str, scope: Scope, token: &str) -> String {
    format!(
        "[[token]]\nname = \"{name}\"\nscope = \"{}\"\nsha256 = \"{}\"\n",
        scope.as_str(),
        Digest::of(token.as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_known_by_its_digest_and_its_scope_comes_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.toml");
        let (ro, ci) = (new_token().unwrap(), new_token().unwrap());
        assert_ne!(ro, ci);
        let text = entry("ro", Scope::Read, &ro) + &entry("ci", Scope::Deploy, &ci);
        assert!(!text.contains(&ro) && !text.contains(&ci), "only digests");
        std::fs::write(&path, text).unwrap();
        let tokens = Tokens::load(TokenSource::File(path.clone())).unwrap();
        assert_eq!(tokens.check(Some(&ro)).unwrap().scope, Scope::Read);
        assert_eq!(tokens.check(Some(&ci)).unwrap().name, "ci");
        assert_eq!(tokens.check(Some("weir_nope")), Err(Refusal::Wrong));
        assert_eq!(tokens.check(None), Err(Refusal::Missing));
    }

    #[test]
    fn a_bad_file_names_the_problem_without_quoting_the_hash_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.toml");
        std::fs::write(
            &path,
            "[[token]]\nname = \"x\"\nscope = \"read\"\nsha256 = \"weir_pasted_secret\"\n",
        )
        .unwrap();
        let text = format!(
            "{:#}",
            Tokens::load(TokenSource::File(path.clone())).err().unwrap()
        );
        assert!(text.contains("never the token itself"), "{text}");
        assert!(!text.contains("weir_pasted_secret"), "{text}");
        std::fs::write(&path, "[[token]]\nname = \"x\"\nscope = \"root\"\n").unwrap();
        let text = format!(
            "{:#}",
            Tokens::load(TokenSource::File(path.clone())).err().unwrap()
        );
        assert!(text.contains("not a valid tokens file"), "{text}");
        let unquoted = "[[token]]\nname = \"x\"\nscope = \"read\"\nsha256 = weir_pasted_bare\n";
        let text = format!("{:#}", check_text(unquoted, "t.toml").unwrap_err());
        assert!(!text.contains("weir_pasted_bare"), "{text}");
        let engine = entry("engine", Scope::Admin, "weir_x");
        let text = format!("{:#}", check_text(&engine, "t.toml").unwrap_err());
        assert!(text.contains("reserved"), "{text}");
    }

    #[test]
    fn removing_the_file_revokes_every_token_and_a_broken_edit_keeps_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.toml");
        let t = new_token().unwrap();
        std::fs::write(&path, entry("ci", Scope::Deploy, &t)).unwrap();
        let tokens = Tokens::load(TokenSource::File(path.clone())).unwrap();
        std::fs::write(&path, "[[token]\n").unwrap();
        tokens.reload_if_changed();
        assert!(
            tokens.check(Some(&t)).is_ok(),
            "a half-made edit keeps the tokens"
        );
        assert!(!tokens.file_ok.load(std::sync::atomic::Ordering::Relaxed));
        std::fs::remove_file(&path).unwrap();
        tokens.reload_if_changed();
        assert_eq!(tokens.check(Some(&t)), Err(Refusal::Wrong), "revoked");
    }
}
