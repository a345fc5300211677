//! A blocking client of one bucket: the engine's threads are not async, so
//! calls run on a small runtime of the client's own and the caller waits.
//! The checkpoint ([`super::checkpoint`]) and the source ([`super::source`])
//! both reach the store through it; it writes nothing by itself, so it may
//! be pointed at a bucket it can only read.

use super::{open_store, ObjectStoreSettings, S3Url};
use anyhow::{Context, Result};
use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;
use std::future::Future;
use std::sync::Arc;

/// One bucket and prefix of an S3-compatible store, and the runtime its
/// requests run on.
pub struct S3Client {
    /// Where it points.
    pub url: S3Url,
    /// The `object_store` client, for requests to build futures from.
    pub store: Arc<dyn ObjectStore>,
    runtime: tokio::runtime::Runtime,
}

impl S3Client {
    /// A client of `url` configured from `settings` and the environment.
    /// Makes no request: a wrong endpoint or credentials show on first use.
    pub fn open(url: &str, settings: &ObjectStoreSettings) -> Result<Self> {
        let url = S3Url::parse(url)?;
        let store: Arc<dyn ObjectStore> = Arc::new(open_store(&url, settings)?);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("weir-s3")
            .enable_all()
            .build()
            .context("starting the object store client's runtime")?;
        Ok(S3Client {
            url,
            store,
            runtime,
        })
    }

    /// The object path of `key`, relative to the client's prefix.
    pub fn path(&self, key: &str) -> ObjectPath {
        if self.url.prefix.is_empty() {
            ObjectPath::from(key)
        } else {
            ObjectPath::from(format!("{}/{key}", self.url.prefix))
        }
    }

    /// The key of `path` relative to the client's prefix.
    pub fn key_of(&self, path: &ObjectPath) -> String {
        let full = path.as_ref();
        if self.url.prefix.is_empty() {
            full.to_string()
        } else {
            full.strip_prefix(&self.url.prefix)
                .map_or(full, |k| k.trim_start_matches('/'))
                .to_string()
        }
    }

    /// The URL of `key` under the client's prefix, for messages.
    pub fn url_of(&self, key: &str) -> String {
        format!("s3://{}/{}", self.url.bucket, self.path(key))
    }

    /// Runs `requests` on the client's runtime, `at_once` at a time, and
    /// waits for them all: their results in order, or the first error.
    pub fn all<T, F>(&self, requests: Vec<F>, at_once: usize) -> Result<Vec<T>>
    where
        T: Send + 'static,
        F: Future<Output = Result<T>> + Send + 'static,
    {
        use futures_util::{StreamExt, TryStreamExt};
        self.block(async move {
            futures_util::stream::iter(requests)
                .buffered(at_once)
                .try_collect::<Vec<_>>()
                .await
        })?
    }

    /// Runs `future` on the client's runtime and waits for it. Safe to call
    /// from inside another runtime.
    pub fn block<T: Send + 'static>(
        &self,
        future: impl Future<Output = T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let _ = tx.send(future.await);
        });
        rx.recv()
            .context("the object store client's runtime stopped")
    }
}
