//! The admin HTTP API of a running pipeline: upload operator versions, list
//! them, activate, roll back, shadow and promote, and read the status —
//! what `weir deploy`, `weir versions` and friends talk to ([`client`]) —
//! plus per-epoch progress, Prometheus `/metrics` and the live dashboard
//! ([`dashboard`]).
//!
//! It binds 127.0.0.1 by default and refuses any other address without a
//! bearer token. It runs on its own thread with a small tokio runtime, and
//! everything slow (compiling and checking an upload) runs on tokio's
//! blocking pool, so neither the API nor the epoch loop waits on the other:
//! the API only changes what the [`Control`] says the *next* epoch runs.

pub mod client;
pub mod dashboard;
mod routes;
mod serve;

pub use serve::ConnectionLimits;

use crate::config::AdminConfig;
use crate::deploy::Control;
use crate::observe::Telemetry;
use anyhow::{bail, Context, Result};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

/// The variable the admin token is read from when `admin.token_env` is unset.
pub const DEFAULT_TOKEN_ENV: &str = "WEIR_ADMIN_TOKEN";
/// Where the API listens when `[admin]` names no address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7878";

/// Resolved admin settings.
#[derive(Clone)]
pub struct AdminSettings {
    pub listen: SocketAddr,
    /// Required on every request but `/v1/health` when set.
    pub token: Option<String>,
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
            .field("token", &self.token.as_ref().map(|_| "<set>"))
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
        let token = match &cfg.token {
            Some(t) => Some(t.clone()),
            None => std::env::var(var).ok(),
        }
        .filter(|t| !t.trim().is_empty());
        if token.as_ref().is_some_and(|t| t.trim() != t) {
            bail!(
                "the admin token has leading or trailing whitespace (a newline from `echo` or \
                 a file?): clients would send it trimmed and never match. Remove it."
            );
        }
        if token.as_ref().is_some_and(|t| t.len() < 16) {
            bail!("the admin token must be at least 16 characters");
        }
        if token.is_none() && !listen.ip().is_loopback() {
            bail!(
                "`admin.listen` = {listen} is not a loopback address, and no token is set: \
                 set `admin.token` or the environment variable {var} before exposing the \
                 admin API, or listen on 127.0.0.1"
            );
        }
        let max_upload =
            crate::config::parse_size(&cfg.max_upload).context("`admin.max_upload`")?;
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
            token,
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

/// A running admin API; stops when dropped.
pub struct AdminServer {
    url: String,
    url_file: Option<PathBuf>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl AdminServer {
    /// Binds `settings.listen` (port 0 picks a free port) and serves
    /// `control`'s pipeline, its progress and metrics from `telemetry`, and
    /// the dashboard. The bound URL is also written to `url_file`,
    /// for scripts that start a pipeline on port 0.
    pub fn start(
        settings: AdminSettings,
        control: Arc<Control>,
        telemetry: Arc<Telemetry>,
        url_file: Option<PathBuf>,
    ) -> Result<Self> {
        let listener = std::net::TcpListener::bind(settings.listen)
            .with_context(|| format!("admin API: binding {}", settings.listen))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let url = format!("http://{addr}");
        if settings.token.is_none() {
            tracing::warn!(
                "admin API on {url} has no token: any local user can deploy operators; \
                 set {DEFAULT_TOKEN_ENV} (or `admin.token`) to require one"
            );
        }
        let app = routes::router(control, telemetry, &settings);
        let limits = settings.connections;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("admin API: starting the tokio runtime")?;
        let thread = std::thread::Builder::new()
            .name("weir-admin".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::error!("admin API: {e}");
                            return;
                        }
                    };
                    serve::serve(listener, app, limits, rx).await;
                })
            })
            .context("admin API: starting its thread")?;
        if let Some(path) = &url_file {
            crate::fsutil::write_atomic(path, format!("{url}\n").as_bytes())?;
        }
        tracing::info!("admin API listening on {url}");
        Ok(AdminServer {
            url,
            url_file,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// `http://host:port` the API is reachable at.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(path) = &self.url_file {
            let _ = std::fs::remove_file(path);
        }
    }
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
        assert!(ok.token.is_some());
        let local = AdminSettings::resolve(&cfg("127.0.0.1:0", None)).unwrap();
        assert!(local.token.is_none());
        assert_eq!(local.max_upload, 64 << 20);
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
