//! The admin HTTP API of a running pipeline: upload operator versions, list
//! them, activate, roll back, shadow and promote, and read the status —
//! what `weir deploy`, `weir versions` and friends talk to ([`client`]) —
//! plus per-epoch progress, Prometheus `/metrics` and the live dashboard
//! ([`dashboard`]).
//!
//! It binds 127.0.0.1 by default and refuses any other address without a
//! bearer token. Tokens are named and scoped ([`tokens`]); with
//! `[admin.tls]` it serves HTTPS (optionally requiring client
//! certificates), and the tokens file and certificate are read again
//! whenever they change. Every change it makes is recorded in the audit
//! trail with the token's name and the client's address. It runs on its
//! own thread with a small tokio runtime, and
//! everything slow (compiling and checking an upload) runs on tokio's
//! blocking pool, so neither the API nor the epoch loop waits on the other:
//! the API only changes what the [`Control`] says the *next* epoch runs.

mod backoff;
pub mod client;
pub mod dashboard;
mod reload;
mod routes;
mod serve;
mod tls;
pub mod tokens;

pub use weir_engine::config::admin::{
    AdminSettings, AdminTlsConfig, ConnectionLimits, TokenSource, DEFAULT_LISTEN, DEFAULT_TOKEN_ENV,
};

use anyhow::{Context, Result};
use weir_engine::observe::Observe;
use weir_engine::versions::Control;

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

/// A running admin API; stops when dropped.
pub struct AdminServer {
    url: String,
    url_file: Option<PathBuf>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl AdminServer {
    /// Binds `settings.listen` (port 0 picks a free port) and serves
    /// `control`'s pipeline, its progress and metrics from `telemetry` (a
    /// pipeline's, or a cluster worker's over its partitions), and the
    /// dashboard. The bound URL is also written to `url_file`,
    /// for scripts that start a pipeline on port 0.
    pub fn start(
        settings: AdminSettings,
        control: Arc<Control>,
        telemetry: Arc<dyn Observe>,
        url_file: Option<PathBuf>,
    ) -> Result<Self> {
        let listener = std::net::TcpListener::bind(settings.listen)
            .with_context(|| format!("admin API: binding {}", settings.listen))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let tls = settings
            .tls
            .clone()
            .map(tls::Tls::load)
            .transpose()?
            .map(Arc::new);
        let url = match tls {
            Some(_) => format!("https://{addr}"),
            None => format!("http://{addr}"),
        };
        let tokens = Arc::new(tokens::Tokens::load(settings.tokens.clone())?);
        if !tokens.required() {
            tracing::warn!(
                "admin API on {url} has no token: any local user can deploy operators; \
                 set `admin.tokens_file`, {DEFAULT_TOKEN_ENV} or `admin.token` to require one"
            );
        }
        let app = routes::router(control, telemetry, tokens.clone(), &settings);
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
                    tokio::spawn(reload_files(tokens, tls.clone()));
                    serve::serve(listener, app, limits, tls, rx).await;
                })
            })
            .context("admin API: starting its thread")?;
        if let Some(path) = &url_file {
            weir_core::fsutil::write_atomic(path, format!("{url}\n").as_bytes())?;
        }
        tracing::info!("admin API listening on {url}");
        Ok(AdminServer {
            url,
            url_file,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// `http://host:port` (`https://` with TLS) the API is reachable at.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// Reads the tokens file and the certificate files again whenever they
/// change, until the server's runtime stops.
async fn reload_files(tokens: Arc<tokens::Tokens>, tls: Option<Arc<tls::Tls>>) {
    loop {
        tokio::time::sleep(reload::RELOAD_EVERY).await;
        let (tokens, tls) = (tokens.clone(), tls.clone());
        // File reads off the API's thread.
        let _ = tokio::task::spawn_blocking(move || {
            tokens.reload_if_changed();
            if let Some(tls) = tls {
                tls.reload_if_changed();
            }
        })
        .await;
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
