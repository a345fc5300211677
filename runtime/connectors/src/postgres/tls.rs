//! TLS to PostgreSQL, configured as libpq configures it: `sslmode`
//! (`disable`, `prefer`, `require`, `verify-ca`, `verify-full`),
//! `sslrootcert`, `sslcert` and `sslkey` in the connection string, URL
//! (`?sslmode=verify-full&sslrootcert=/etc/ca.pem`) or `key=value` form.
//! The PostgreSQL client library knows only the first three modes and none
//! of the files, so these parameters are taken out of the string here and
//! become an OpenSSL connector (Debian's OpenSSL, as for Kafka).
//!
//! As in libpq: `require` encrypts but checks no certificate, `verify-ca`
//! checks that an authority in `sslrootcert` signed the server's
//! certificate, `verify-full` also that it names the host connected to;
//! `prefer` (libpq's default) uses TLS when the server offers it.

use anyhow::{anyhow, bail, Context, Result};
use openssl::ssl::{SslConnector, SslFiletype, SslMethod, SslVerifyMode};
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::X509;
use postgres::config::SslMode;
use postgres::{Client, NoTls};
use postgres_openssl::MakeTlsConnector;
use std::path::PathBuf;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// No TLS.
    Disable,
    /// TLS if the server offers it, no certificate check (libpq's default).
    #[default]
    Prefer,
    /// TLS, no certificate check.
    Require,
    /// TLS; the server's certificate signed by `sslrootcert`.
    VerifyCa,
    /// As `VerifyCa`, and the certificate names the host.
    VerifyFull,
}

impl TlsMode {
    fn parse(value: &str) -> Result<Self> {
        Ok(match value {
            "disable" => TlsMode::Disable,
            "allow" | "prefer" => TlsMode::Prefer,
            "require" => TlsMode::Require,
            "verify-ca" => TlsMode::VerifyCa,
            "verify-full" => TlsMode::VerifyFull,
            other => bail!(
                "sslmode={other} is not one of disable, prefer, require, verify-ca, verify-full"
            ),
        })
    }

    fn verifies(self) -> bool {
        matches!(self, TlsMode::VerifyCa | TlsMode::VerifyFull)
    }
}

/// The TLS part of a connection string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PgTls {
    /// `sslmode`.
    pub mode: TlsMode,
    /// `sslrootcert`: the authorities a verifying mode trusts.
    pub root_cert: Option<PathBuf>,
    /// `sslcert`: a client certificate, for servers that ask for one.
    pub cert: Option<PathBuf>,
    /// `sslkey`: its private key.
    pub key: Option<PathBuf>,
}

/// The parameters taken out of a connection string.
const PARAMS: &[&str] = &["sslmode", "sslrootcert", "sslcert", "sslkey"];

impl PgTls {
    /// Splits `url` into the string the client library parses and the TLS
    /// settings.
    pub fn split(url: &str) -> Result<(String, PgTls)> {
        let (rest, pairs) = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            split_url(url)
        } else {
            split_key_values(url)?
        };
        let mut tls = PgTls::default();
        for (key, value) in pairs {
            match key.as_str() {
                "sslmode" => tls.mode = TlsMode::parse(&value)?,
                "sslrootcert" => tls.root_cert = Some(value.into()),
                "sslcert" => tls.cert = Some(value.into()),
                "sslkey" => tls.key = Some(value.into()),
                _ => unreachable!("only PARAMS are split out"),
            }
        }
        tls.check()?;
        Ok((rest, tls))
    }

    fn check(&self) -> Result<()> {
        if self.mode.verifies() && self.root_cert.is_none() {
            bail!(
                "sslmode={} needs sslrootcert=<file of the authorities that sign the \
                 server's certificate>",
                self.mode_name()
            );
        }
        if self.cert.is_some() != self.key.is_some() {
            bail!("sslcert and sslkey go together");
        }
        Ok(())
    }

    fn mode_name(&self) -> &'static str {
        match self.mode {
            TlsMode::Disable => "disable",
            TlsMode::Prefer => "prefer",
            TlsMode::Require => "require",
            TlsMode::VerifyCa => "verify-ca",
            TlsMode::VerifyFull => "verify-full",
        }
    }

    /// The client library's own `sslmode` for this mode.
    pub fn client_mode(&self) -> SslMode {
        match self.mode {
            TlsMode::Disable => SslMode::Disable,
            TlsMode::Prefer => SslMode::Prefer,
            _ => SslMode::Require,
        }
    }

    /// How to connect: plaintext for `disable`, else an OpenSSL connector
    /// with the authorities, the client certificate and what is checked.
    /// Reads the files now, so that a missing one fails the start.
    pub fn connector(&self) -> Result<Connector> {
        if self.mode == TlsMode::Disable {
            return Ok(Connector::Plain);
        }
        let mut builder = SslConnector::builder(SslMethod::tls_client())
            .map_err(|e| anyhow!("setting up TLS: {e}"))?;
        if let Some(ca) = &self.root_cert {
            // Only these authorities, as in libpq: the connector starts
            // with the system's store, and verify-ca (no host name check)
            // would otherwise take any publicly signed certificate.
            let what = || format!("sslrootcert={}", ca.display());
            let pem = std::fs::read(ca).with_context(what)?;
            let mut store = X509StoreBuilder::new().map_err(|e| anyhow!("setting up TLS: {e}"))?;
            for cert in X509::stack_from_pem(&pem).with_context(what)? {
                store.add_cert(cert).with_context(what)?;
            }
            builder.set_cert_store(store.build());
        }
        if let (Some(cert), Some(key)) = (&self.cert, &self.key) {
            builder
                .set_certificate_chain_file(cert)
                .with_context(|| format!("sslcert={}", cert.display()))?;
            builder
                .set_private_key_file(key, SslFiletype::PEM)
                .with_context(|| format!("sslkey={}", key.display()))?;
        }
        if !self.mode.verifies() {
            builder.set_verify(SslVerifyMode::NONE);
        }
        let mut connector = MakeTlsConnector::new(builder.build());
        let full = self.mode == TlsMode::VerifyFull;
        connector.set_callback(move |config, _| {
            config.set_verify_hostname(full);
            Ok(())
        });
        Ok(Connector::Tls(connector))
    }
}

/// How connections to one server are made.
#[derive(Clone)]
pub enum Connector {
    /// Without TLS (`sslmode=disable`).
    Plain,
    /// With TLS, as the connection string asks.
    Tls(MakeTlsConnector),
}

impl Connector {
    /// A new connection with `config`.
    pub fn connect(&self, config: &postgres::Config) -> Result<Client, postgres::Error> {
        match self {
            Connector::Plain => config.connect(NoTls),
            Connector::Tls(tls) => config.connect(tls.clone()),
        }
    }
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Connector::Plain => "Connector::Plain",
            Connector::Tls(_) => "Connector::Tls",
        })
    }
}

/// A URL's query split into the TLS parameters and the rest.
fn split_url(url: &str) -> (String, Vec<(String, String)>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), Vec::new());
    };
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if PARAMS.contains(&key) {
            taken.push((key.to_string(), percent_decode(value)));
        } else {
            kept.push(pair);
        }
    }
    let rest = match kept.is_empty() {
        true => base.to_string(),
        false => format!("{base}?{}", kept.join("&")),
    };
    (rest, taken)
}

/// `%XX` escapes decoded (a path in a URL may be written `%2Fetc%2Fca.pem`).
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A `key=value` string (values optionally in single quotes, with `\'`
/// and `\\` escapes) split into the TLS parameters and the rest, which is
/// written back as it was.
fn split_key_values(text: &str) -> Result<(String, Vec<(String, String)>)> {
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    let mut chars = text.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = chars.peek() else {
            break;
        };
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        if chars.next_if(|(_, c)| *c == '=').is_none() {
            // Not repeated: an unquoted password with a space ends here.
            bail!("a word in the connection string has no `=value` (quote values with spaces)");
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '\'').is_some() {
            loop {
                match chars.next() {
                    Some((_, '\\')) => value.extend(chars.next().map(|(_, c)| c)),
                    Some((_, '\'')) => break,
                    Some((_, c)) => value.push(c),
                    None => bail!("an unterminated quote in the connection string"),
                }
            }
        } else {
            while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace()) {
                value.push(c);
            }
        }
        let end = chars.peek().map_or(text.len(), |&(i, _)| i);
        if PARAMS.contains(&key.as_str()) {
            taken.push((key, value));
        } else {
            kept.push(text[start..end].trim_end());
        }
    }
    Ok((kept.join(" "), taken))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_parameters_come_out_of_a_url_and_the_rest_stays() {
        let (rest, tls) = PgTls::split(
            "postgresql://u:p@db.internal:5432/fraud?sslmode=verify-full&application_name=x&sslrootcert=%2Fetc%2Fca.pem",
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgresql://u:p@db.internal:5432/fraud?application_name=x"
        );
        assert_eq!(tls.mode, TlsMode::VerifyFull);
        assert_eq!(tls.root_cert, Some(PathBuf::from("/etc/ca.pem")));
    }

    #[test]
    fn tls_parameters_come_out_of_key_values_with_quotes() {
        let (rest, tls) = PgTls::split(
            "host=127.0.0.1 sslmode = verify-ca user=weir sslrootcert='/etc/my ca.pem' dbname=fraud",
        )
        .unwrap();
        assert_eq!(rest, "host=127.0.0.1 user=weir dbname=fraud");
        assert_eq!(tls.mode, TlsMode::VerifyCa);
        assert_eq!(tls.root_cert, Some(PathBuf::from("/etc/my ca.pem")));
    }

    #[test]
    fn a_verifying_mode_without_an_authority_is_refused() {
        let err = PgTls::split("postgresql://u@h/db?sslmode=verify-full").unwrap_err();
        assert!(err.to_string().contains("sslrootcert"), "{err}");
        let err = PgTls::split("host=h sslmode=maybe").unwrap_err();
        assert!(err.to_string().contains("verify-full"), "{err}");
        let (_, tls) = PgTls::split("postgresql://u@h/db").unwrap();
        assert_eq!(tls.mode, TlsMode::Prefer);
        // An unquoted password with a space: refused, and not repeated.
        let err = PgTls::split("host=h password=correct horse").unwrap_err();
        assert!(!err.to_string().contains("horse"), "{err}");
    }
}
