//! `[admin]`: where the HTTP API listens, its token and its limits, as
//! written in the pipeline file and as resolved (and checked) at start.
//! The admin crate serves with these; they live here so that the pipeline
//! file is checked in one place.

use super::humantime_serde_compat;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

/// `[admin]`: the HTTP API that swaps operators while the pipeline runs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// host:port; `127.0.0.1:0` picks a free port (written to
    /// `<checkpoint>/admin-url`).
    #[serde(default = "default_admin_listen")]
    pub listen: String,
    /// The bearer token; prefer `token_env` to keep it out of the file.
    /// One token with every scope; `tokens_file` gives several, scoped.
    #[serde(default)]
    pub token: Option<String>,
    /// Environment variable holding the token (default `WEIR_ADMIN_TOKEN`).
    #[serde(default)]
    pub token_env: Option<String>,
    /// A file of named tokens with scopes, stored hashed (`weir token
    /// new` writes its entries); read again whenever it changes, so a
    /// token is added, rotated or revoked without a restart.
    #[serde(default)]
    pub tokens_file: Option<PathBuf>,
    /// `[admin.tls]`: serve HTTPS instead of HTTP.
    #[serde(default)]
    pub tls: Option<AdminTlsConfig>,
    /// Failed token checks a client may make before it must wait (default 5).
    #[serde(default = "default_free_failures")]
    pub auth_free_failures: u32,
    /// The longest a client waits after repeated failed token checks
    /// (default 1m); the wait doubles from 1s with each further failure.
    #[serde(default = "default_auth_max_backoff", with = "humantime_serde_compat")]
    pub auth_max_backoff: Duration,
    /// Largest upload accepted, e.g. "64MiB" (Python components are ~19 MB).
    #[serde(default = "default_max_upload")]
    pub max_upload: String,
    /// Uploads read and validated at once (default 2); more wait their turn.
    #[serde(default = "default_max_concurrent_uploads")]
    pub max_concurrent_uploads: usize,
    /// Open connections at once (default 64); at the limit a new one
    /// displaces the oldest that is not in a request, or is closed.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Time a client has to send a request's headers (default 10s).
    #[serde(default = "default_header_timeout", with = "humantime_serde_compat")]
    pub header_timeout: Duration,
    /// Time a whole request may take, upload included (default 5m).
    #[serde(default = "default_request_timeout", with = "humantime_serde_compat")]
    pub request_timeout: Duration,
}

impl AdminConfig {
    /// Makes the section's paths absolute with `fix`.
    pub(crate) fn resolve_paths(&mut self, fix: &impl Fn(&mut PathBuf)) {
        self.tokens_file.iter_mut().for_each(fix);
        if let Some(tls) = &mut self.tls {
            fix(&mut tls.cert_file);
            fix(&mut tls.key_file);
            tls.client_ca_file.iter_mut().for_each(fix);
        }
    }
}

/// `[admin.tls]`: the admin API over HTTPS.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminTlsConfig {
    /// The server's certificate chain (PEM), read again when it changes.
    pub cert_file: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1), read again with it.
    pub key_file: PathBuf,
    /// Authorities whose client certificates are required (mutual TLS);
    /// without it any client may connect (and still needs a token).
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
}

fn default_free_failures() -> u32 {
    AuthBackoff::default().free_failures
}

fn default_auth_max_backoff() -> Duration {
    AuthBackoff::default().max_wait
}

fn default_max_concurrent_uploads() -> usize {
    2
}

fn default_max_connections() -> usize {
    ConnectionLimits::default().max_connections
}

fn default_header_timeout() -> Duration {
    ConnectionLimits::default().header_timeout
}

fn default_request_timeout() -> Duration {
    ConnectionLimits::default().request_timeout
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            listen: default_admin_listen(),
            token: None,
            token_env: None,
            tokens_file: None,
            tls: None,
            auth_free_failures: default_free_failures(),
            auth_max_backoff: default_auth_max_backoff(),
            max_upload: default_max_upload(),
            max_concurrent_uploads: default_max_concurrent_uploads(),
            max_connections: default_max_connections(),
            header_timeout: default_header_timeout(),
            request_timeout: default_request_timeout(),
        }
    }
}

fn default_admin_listen() -> String {
    DEFAULT_LISTEN.into()
}

fn default_max_upload() -> String {
    "64MiB".into()
}

/// Limits on the admin API's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub request_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 64,
            header_timeout: Duration::from_secs(10),
            // An upload of a Python component is ~19 MB, then compiled.
            request_timeout: Duration::from_secs(300),
        }
    }
}

/// How a client that keeps sending wrong tokens is slowed down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthBackoff {
    /// Failed checks before the first wait.
    pub free_failures: u32,
    /// The longest wait.
    pub max_wait: Duration,
}

impl Default for AuthBackoff {
    fn default() -> Self {
        AuthBackoff {
            free_failures: 5,
            max_wait: Duration::from_secs(60),
        }
    }
}

/// Where the admin API's tokens come from.
#[derive(Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// No token: every request is let in (loopback addresses only).
    None,
    /// One token (`admin.token` or its environment variable), named
    /// `admin`, with every scope.
    Single(String),
    /// Named, scoped, hashed tokens in a file, read again when it changes.
    File(PathBuf),
}

/// The variable the admin token is read from when `admin.token_env` is unset.
pub const DEFAULT_TOKEN_ENV: &str = "WEIR_ADMIN_TOKEN";
/// Where the API listens when `[admin]` names no address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7878";

/// Resolved admin settings.
#[derive(Clone)]
pub struct AdminSettings {
    pub listen: SocketAddr,
    /// Required on every request but `/v1/health` unless `None`.
    pub tokens: TokenSource,
    /// HTTPS, when set.
    pub tls: Option<AdminTlsConfig>,
    /// How clients sending wrong tokens are slowed down.
    pub backoff: AuthBackoff,
    /// Largest accepted upload request, in bytes.
    pub max_upload: usize,
    /// Uploads read and validated at once; more wait (unread), so memory
    /// stays below about this many times `max_upload`.
    pub max_concurrent_uploads: usize,
    /// Connection count and timeouts.
    pub connections: ConnectionLimits,
}

impl std::fmt::Debug for AdminSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminSettings")
            .field("listen", &self.listen)
            .field(
                "tokens",
                &match &self.tokens {
                    TokenSource::None => "none".to_string(),
                    TokenSource::Single(_) => "<one token>".to_string(),
                    TokenSource::File(p) => p.display().to_string(),
                },
            )
            .field("tls", &self.tls)
            .field("backoff", &self.backoff)
            .field("max_upload", &self.max_upload)
            .field("max_concurrent_uploads", &self.max_concurrent_uploads)
            .field("connections", &self.connections)
            .finish()
    }
}

impl AdminSettings {
    /// Resolves `[admin]`: the address, the token (literal or from the
    /// environment) and the upload limit. A non-loopback address without a
    /// token is an error: anyone who can reach it could replace the rules.
    pub fn resolve(cfg: &AdminConfig) -> Result<Self> {
        let listen = cfg
            .listen
            .to_socket_addrs()
            .with_context(|| format!("`admin.listen` = `{}` is not host:port", cfg.listen))?
            .next()
            .with_context(|| format!("`admin.listen` = `{}` resolves to no address", cfg.listen))?;
        let var = cfg.token_env.as_deref().unwrap_or(DEFAULT_TOKEN_ENV);
        let tokens = match &cfg.tokens_file {
            Some(file) => {
                if cfg.token.is_some() || cfg.token_env.is_some() {
                    bail!(
                        "`admin.tokens_file` replaces `admin.token` and `admin.token_env`: \
                         give the token a name and scope in the file instead"
                    );
                }
                TokenSource::File(file.clone())
            }
            None => single_token(cfg, var)?,
        };
        if tokens == TokenSource::None && !listen.ip().is_loopback() {
            bail!(
                "`admin.listen` = {listen} is not a loopback address, and no token is set: \
                 set `admin.tokens_file`, `admin.token` or the environment variable {var} \
                 before exposing the admin API, or listen on 127.0.0.1"
            );
        }
        if cfg.auth_max_backoff.is_zero() {
            bail!("`admin.auth_max_backoff` must be longer than zero");
        }
        let max_upload = super::parse_size(&cfg.max_upload).context("`admin.max_upload`")?;
        if cfg.max_concurrent_uploads == 0 {
            bail!("`admin.max_concurrent_uploads` must be at least 1");
        }
        if cfg.max_connections < 2 {
            bail!("`admin.max_connections` must be at least 2");
        }
        if cfg.header_timeout.is_zero() || cfg.request_timeout.is_zero() {
            bail!("`admin.header_timeout` and `admin.request_timeout` must be longer than zero");
        }
        Ok(AdminSettings {
            listen,
            tokens,
            tls: cfg.tls.clone(),
            backoff: AuthBackoff {
                free_failures: cfg.auth_free_failures,
                max_wait: cfg.auth_max_backoff,
            },
            max_upload,
            max_concurrent_uploads: cfg.max_concurrent_uploads,
            connections: ConnectionLimits {
                max_connections: cfg.max_connections,
                header_timeout: cfg.header_timeout,
                request_timeout: cfg.request_timeout,
            },
        })
    }
}

/// The one token of `admin.token` or the environment variable `var`.
fn single_token(cfg: &AdminConfig, var: &str) -> Result<TokenSource> {
    let token = match &cfg.token {
        Some(t) => Some(t.clone()),
        None => std::env::var(var).ok(),
    }
    .filter(|t| !t.trim().is_empty());
    let Some(token) = token else {
        return Ok(TokenSource::None);
    };
    if token.trim() != token {
        bail!(
            "the admin token has leading or trailing whitespace (a newline from `echo` or \
             a file?): clients would send it trimmed and never match. Remove it."
        );
    }
    if token.len() < 16 {
        bail!("the admin token must be at least 16 characters");
    }
    Ok(TokenSource::Single(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(listen: &str, token: Option<&str>) -> AdminConfig {
        AdminConfig {
            listen: listen.into(),
            token: token.map(str::to_string),
            // A variable nobody sets, so the test does not see a real token.
            token_env: Some("WEIR_TEST_NO_SUCH_TOKEN_VAR".into()),
            ..AdminConfig::default()
        }
    }

    #[test]
    fn a_public_address_needs_a_token() {
        let err = AdminSettings::resolve(&cfg("0.0.0.0:7878", None)).unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("not a loopback address"), "{text}");
        assert!(text.contains("WEIR_TEST_NO_SUCH_TOKEN_VAR"), "{text}");
        let ok = AdminSettings::resolve(&cfg("0.0.0.0:7878", Some("a-long-enough-token"))).unwrap();
        assert!(matches!(ok.tokens, TokenSource::Single(_)));
        let local = AdminSettings::resolve(&cfg("127.0.0.1:0", None)).unwrap();
        assert!(local.tokens == TokenSource::None);
        assert_eq!(local.max_upload, 64 << 20);
    }

    #[test]
    fn a_tokens_file_replaces_the_single_token_and_counts_as_one() {
        let with_file = AdminConfig {
            tokens_file: Some("/etc/weir/tokens.toml".into()),
            token_env: None,
            ..cfg("0.0.0.0:7878", None)
        };
        let ok = AdminSettings::resolve(&with_file).unwrap();
        assert!(
            matches!(ok.tokens, TokenSource::File(_)),
            "no token needed beside it"
        );
        let both = AdminConfig {
            token: Some("a-long-enough-token".into()),
            ..with_file
        };
        let text = format!("{:#}", AdminSettings::resolve(&both).unwrap_err());
        assert!(text.contains("replaces `admin.token`"), "{text}");
    }

    #[test]
    fn bad_settings_are_named() {
        for (c, want) in [
            (cfg("nonsense", None), "`admin.listen`"),
            (cfg("127.0.0.1:1", Some("short")), "at least 16"),
            (
                cfg("127.0.0.1:1", Some("a-long-enough-token\n")),
                "trailing whitespace",
            ),
            (
                AdminConfig {
                    max_connections: 1,
                    ..cfg("127.0.0.1:1", None)
                },
                "`admin.max_connections`",
            ),
            (
                AdminConfig {
                    max_upload: "lots".into(),
                    ..cfg("127.0.0.1:1", None)
                },
                "`admin.max_upload`",
            ),
        ] {
            let text = format!("{:#}", AdminSettings::resolve(&c).unwrap_err());
            assert!(text.contains(want), "{text}");
        }
    }
}
