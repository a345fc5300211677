//! HTTPS for the admin API (rustls): the certificate chain and key, and the
//! client authorities for mutual TLS, read at start and again whenever one
//! of the files changes — a renewed certificate is served from the next
//! connection on, without a restart. A renewal that cannot be used (a key
//! that does not match, a half-written file) is reported and the
//! configuration before kept.

use crate::reload::Reloaded;
use anyhow::{Context, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;
use std::path::Path;
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;
use weir_engine::config::admin::AdminTlsConfig;

/// The TLS side of the admin API's listener.
pub struct Tls {
    cfg: AdminTlsConfig,
    config: Reloaded<ServerConfig>,
}

impl Tls {
    /// Reads the files now; an error names the file and what is wrong.
    pub fn load(cfg: AdminTlsConfig) -> Result<Self> {
        let mut paths = vec![cfg.cert_file.clone(), cfg.key_file.clone()];
        paths.extend(cfg.client_ca_file.clone());
        let config = Reloaded::new(paths, || server_config(&cfg))?;
        Ok(Tls { cfg, config })
    }

    /// What a new connection's handshake uses.
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.config.current())
    }

    /// Reads the files again if one changed.
    pub fn reload_if_changed(&self) {
        match self.config.reload(|| server_config(&self.cfg)) {
            None => {}
            Some(Ok(_)) => tracing::info!(
                cert = %self.cfg.cert_file.display(),
                "admin API certificate read again; new connections use it"
            ),
            Some(Err(e)) => tracing::error!(
                "admin API certificate files changed but cannot be used; the ones before stay: \
                 {e:#}"
            ),
        }
    }
}

/// The rustls configuration of `cfg`'s files (ring's algorithms, TLS 1.2
/// and 1.3).
fn server_config(cfg: &AdminTlsConfig) -> Result<ServerConfig> {
    // rustls now deprecates ring's provider for lacking post-quantum key
    // exchange (aws-lc-rs has it). ring is what the object store and
    // reqwest clients already link; aws-lc-rs would add a C/CMake build to
    // every build. docs/security.md says so.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("admin API TLS: protocol versions")?;
    let builder = match &cfg.client_ca_file {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in certificates(ca)? {
                roots.add(cert).with_context(|| {
                    format!(
                        "admin API TLS: a certificate in {} is not usable",
                        ca.display()
                    )
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .with_context(|| format!("admin API TLS: client authorities {}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let key = PrivateKeyDer::from_pem_file(&cfg.key_file).map_err(|e| {
        anyhow::anyhow!(
            "admin API TLS: no private key in {} ({e})",
            cfg.key_file.display()
        )
    })?;
    builder
        .with_single_cert(certificates(&cfg.cert_file)?, key)
        .with_context(|| {
            format!(
                "admin API TLS: the key {} does not go with the certificate {}",
                cfg.key_file.display(),
                cfg.cert_file.display()
            )
        })
}

/// Every certificate of a PEM file; none is an error.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            anyhow::anyhow!(
                "admin API TLS: reading certificates from {}: {e}",
                path.display()
            )
        })?;
    if certs.is_empty() {
        anyhow::bail!("admin API TLS: {} holds no certificate", path.display());
    }
    Ok(certs)
}
