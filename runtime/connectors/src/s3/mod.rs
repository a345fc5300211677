//! S3-compatible object stores (AWS S3, MinIO, R2, s3s-fs), through the
//! `object_store` crate:
//!
//! - [`source`]: objects under a prefix as input (`kind = "s3"`), JSON
//!   lines or Parquet, each planned once by key, size and ETag;
//! - [`checkpoint`]: the offset and commit logs, blobs, the registry and
//!   state snapshots that let any machine take a pipeline over.
//!
//! Both reach the store through [`client::S3Client`]. Where the store is
//! and how to reach it comes from the pipeline file (`[object_store]` for
//! the checkpoint, the source's own `endpoint` / `region` / `allow_http`);
//! credentials only from the environment
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), so
//! that no secret is written into a pipeline file.

pub mod checkpoint;
pub mod client;
pub mod config;
pub mod source;

pub use checkpoint::S3Remote;
pub use client::S3Client;
pub use config::S3SourceConfig;
pub use source::S3Source;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

/// `[object_store]`: how to reach the S3-compatible store an `s3://` URL
/// names. Every key is optional: without any, AWS S3 is used as the
/// environment describes it (`AWS_REGION`, `AWS_ENDPOINT_URL`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectStoreSettings {
    /// The store's URL, for servers other than AWS
    /// (`http://127.0.0.1:9000`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The region (default: `AWS_REGION`, else `us-east-1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Allow plain `http://` endpoints (a store on the same host or a test
    /// server). Off by default: credentials would cross the network in the
    /// clear.
    #[serde(default)]
    pub allow_http: bool,
    /// PEM file of the authorities an `https://` endpoint's certificate
    /// is checked against, besides the system's (a store with a company
    /// CA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<std::path::PathBuf>,
}

impl ObjectStoreSettings {
    /// Refuses a plain `http://` endpoint that `allow_http` does not allow;
    /// `section` names the table the keys are in (`object_store`, `source`).
    pub fn check(&self, section: &str) -> Result<()> {
        if let Some(endpoint) = &self.endpoint {
            if endpoint.starts_with("http://") && !self.allow_http {
                bail!(
                    "`{section}.endpoint` = {endpoint} is plain http; set \
                     `{section}.allow_http = true` if that is intended"
                );
            }
        }
        Ok(())
    }
}

/// An `s3://bucket/prefix` URL, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Url {
    pub bucket: String,
    /// Without leading or trailing `/`; may be empty.
    pub prefix: String,
}

impl S3Url {
    /// Parses `s3://bucket[/prefix]`, or says what is wrong with it.
    pub fn parse(url: &str) -> Result<Self> {
        let Some(rest) = url.strip_prefix("s3://") else {
            bail!("`{url}` is not an s3:// URL");
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let valid_bucket = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !valid_bucket {
            bail!(
                "`{url}`: `{bucket}` is not a bucket name (3 to 63 characters: lowercase \
                 letters, digits, `-` and `.`)"
            );
        }
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|p| p == "." || p == "..") || prefix.contains("//") {
            bail!("`{url}`: the prefix must be plain names separated by `/`");
        }
        Ok(S3Url {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
        })
    }
}

impl std::fmt::Display for S3Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.prefix.is_empty() {
            write!(f, "s3://{}", self.bucket)
        } else {
            write!(f, "s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

/// A client for `url`'s bucket, configured from `settings` and the
/// environment.
pub(crate) fn open_store(
    url: &S3Url,
    settings: &ObjectStoreSettings,
) -> Result<object_store::aws::AmazonS3> {
    let mut builder = object_store::aws::AmazonS3Builder::from_env()
        .with_bucket_name(&url.bucket)
        .with_conditional_put(object_store::aws::S3ConditionalPut::ETagMatch);
    settings.check("object_store")?;
    if let Some(endpoint) = &settings.endpoint {
        builder = builder
            .with_endpoint(endpoint)
            .with_virtual_hosted_style_request(false);
    }
    if let Some(region) = &settings.region {
        builder = builder.with_region(region);
    } else if std::env::var_os("AWS_REGION").is_none()
        && std::env::var_os("AWS_DEFAULT_REGION").is_none()
    {
        builder = builder.with_region("us-east-1");
    }
    if let Some(ca) = &settings.ca_file {
        builder = builder.with_client_options(trusting(ca)?);
    }
    builder
        .with_allow_http(settings.allow_http)
        .build()
        .with_context(|| format!("configuring the object store client for {url}"))
}

/// Client options that also trust the authorities in the PEM file `ca`.
fn trusting(ca: &std::path::Path) -> Result<object_store::ClientOptions> {
    let what = || format!("`ca_file` = {}", ca.display());
    let pem = std::fs::read(ca).with_context(what)?;
    let certificates = object_store::Certificate::from_pem_bundle(&pem).with_context(what)?;
    if certificates.is_empty() {
        bail!("{} holds no PEM certificate", what());
    }
    Ok(certificates
        .into_iter()
        .fold(object_store::ClientOptions::new(), |o, c| {
            o.with_root_certificate(c)
        }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_or_say_what_is_wrong() {
        let u = S3Url::parse("s3://weir-ckpt/fraud/prod/").unwrap();
        assert_eq!(
            (u.bucket.as_str(), u.prefix.as_str()),
            ("weir-ckpt", "fraud/prod")
        );
        assert_eq!(u.to_string(), "s3://weir-ckpt/fraud/prod");
        assert_eq!(S3Url::parse("s3://abc").unwrap().prefix, "");
        for bad in [
            "http://x/y",
            "s3://A_b/x",
            "s3://ab",
            "s3://abc/../x",
            "s3://abc/x//y",
        ] {
            assert!(S3Url::parse(bad).is_err(), "{bad}");
        }
    }
}
