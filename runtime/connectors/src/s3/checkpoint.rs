//! A checkpoint in an S3-compatible bucket: [`weir_core::mirror::Remote`]
//! over `object_store`. Conditional creates use S3's `If-None-Match: *`,
//! which AWS S3, MinIO, R2 and s3s-fs honour; a store that ignores it
//! would let two workers both "create" an epoch's entry, so the start
//! checks it ([`S3Remote::check_conditional_create`]).

use super::{open_store, ObjectStoreSettings, S3Url};
use anyhow::{bail, Context, Result};
use futures_util::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use std::future::Future;
use std::sync::Arc;
use weir_core::mirror::{Created, Remote, RemoteObject, Tag};

/// A checkpoint under `s3://bucket/prefix`. Calls block the calling thread
/// (the engine's threads are not async); they run on a small runtime of
/// its own, so they may be made from inside another one too.
pub struct S3Remote {
    url: S3Url,
    store: Arc<dyn ObjectStore>,
    runtime: tokio::runtime::Runtime,
}

impl S3Remote {
    /// A client for `url`; checks that the bucket answers and honours
    /// conditional creates before anything relies on them.
    pub fn open(url: &str, settings: &ObjectStoreSettings) -> Result<Self> {
        let url = S3Url::parse(url)?;
        let store: Arc<dyn ObjectStore> = Arc::new(open_store(&url, settings)?);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("weir-s3")
            .enable_all()
            .build()
            .context("starting the object store client's runtime")?;
        let remote = S3Remote {
            url,
            store,
            runtime,
        };
        remote.check_conditional_create()?;
        Ok(remote)
    }

    fn path(&self, key: &str) -> ObjectPath {
        if self.url.prefix.is_empty() {
            ObjectPath::from(key)
        } else {
            ObjectPath::from(format!("{}/{key}", self.url.prefix))
        }
    }

    /// The key of `path` relative to the checkpoint's prefix.
    fn key_of(&self, path: &ObjectPath) -> String {
        let full = path.as_ref();
        if self.url.prefix.is_empty() {
            full.to_string()
        } else {
            full.strip_prefix(&self.url.prefix)
                .map_or(full, |k| k.trim_start_matches('/'))
                .to_string()
        }
    }

    /// Runs `future` on the client's runtime and waits for it.
    fn block<T: Send + 'static>(
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

    /// Creates a probe object twice: the second create must be refused.
    /// A store that overwrites instead cannot fence a zombie worker.
    fn check_conditional_create(&self) -> Result<()> {
        let key = format!("_probe/{}", uuid::Uuid::new_v4());
        let first = self
            .create(&key, b"probe")
            .with_context(|| format!("writing to {}", self.url))?;
        let second = self.create(&key, b"probe again")?;
        let _ = self.delete(&key);
        match (first, second) {
            (Created::Created, Created::Exists(_)) => Ok(()),
            _ => bail!(
                "{} does not honour conditional writes (If-None-Match: *): a second create of \
                 the same object was not refused. Weir needs them to keep two workers from \
                 both committing an epoch; use a store that supports them (AWS S3, MinIO, R2).",
                self.url
            ),
        }
    }
}

impl Remote for S3Remote {
    fn url(&self) -> String {
        self.url.to_string()
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let (store, path) = (self.store.clone(), self.path(key));
        self.block(async move {
            match store.get(&path).await {
                Ok(got) => got.bytes().await.map(|b| Some(b.to_vec())),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?
        .with_context(|| format!("reading {key} from {}", self.url))
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let (store, path) = (self.store.clone(), self.path(key));
        let payload = PutPayload::from(bytes.to_vec());
        self.block(async move { store.put(&path, payload).await })?
            .with_context(|| format!("writing {key} to {}", self.url))?;
        Ok(())
    }

    fn create(&self, key: &str, bytes: &[u8]) -> Result<Created> {
        let (store, path) = (self.store.clone(), self.path(key));
        let payload = PutPayload::from(bytes.to_vec());
        let options = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        let put = self.block(async move { store.put_opts(&path, payload, options).await })?;
        match put {
            Ok(_) => Ok(Created::Created),
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => {
                let theirs = self.get(key)?.with_context(|| {
                    format!(
                        "{key} in {} was refused as existing, then missing",
                        self.url
                    )
                })?;
                Ok(Created::Exists(theirs))
            }
            Err(e) => Err(e).with_context(|| format!("creating {key} in {}", self.url)),
        }
    }

    fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, Tag)>> {
        let (store, path) = (self.store.clone(), self.path(key));
        let got = self
            .block(async move {
                match store.get(&path).await {
                    Ok(got) => {
                        let tag = got.meta.e_tag.clone();
                        got.bytes().await.map(|b| Some((b.to_vec(), tag)))
                    }
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            })?
            .with_context(|| format!("reading {key} from {}", self.url))?;
        match got {
            None => Ok(None),
            Some((bytes, Some(tag))) => Ok(Some((bytes, tag))),
            Some((_, None)) => bail!(
                "{} gave no ETag for {key}: conditional replaces need one",
                self.url
            ),
        }
    }

    fn replace(&self, key: &str, bytes: &[u8], tag: Option<&str>) -> Result<Option<Tag>> {
        let (store, path) = (self.store.clone(), self.path(key));
        let payload = PutPayload::from(bytes.to_vec());
        let mode = match tag {
            None => PutMode::Create,
            Some(tag) => PutMode::Update(UpdateVersion {
                e_tag: Some(tag.to_string()),
                version: None,
            }),
        };
        let options = PutOptions {
            mode,
            ..PutOptions::default()
        };
        match self.block(async move { store.put_opts(&path, payload, options).await })? {
            Ok(put) => Ok(Some(put.e_tag.with_context(|| {
                format!(
                    "{} gave no ETag for {key}: conditional replaces need one",
                    self.url
                )
            })?)),
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. })
            | Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e).with_context(|| format!("replacing {key} in {}", self.url)),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<RemoteObject>> {
        let store = self.store.clone();
        // `list` takes whole path segments: list the prefix's directory and
        // keep the keys that start with the prefix.
        let dir = match prefix.rsplit_once('/') {
            Some((dir, _)) => Some(self.path(dir)),
            None if self.url.prefix.is_empty() => None,
            None => Some(ObjectPath::from(self.url.prefix.as_str())),
        };
        let metas = self
            .block(async move { store.list(dir.as_ref()).try_collect::<Vec<_>>().await })?
            .with_context(|| format!("listing {prefix} in {}", self.url))?;
        let mut objects: Vec<RemoteObject> = metas
            .into_iter()
            .map(|m| RemoteObject {
                key: self.key_of(&m.location),
                size: m.size,
            })
            .filter(|o| o.key.starts_with(prefix))
            .collect();
        objects.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(objects)
    }

    fn delete(&self, key: &str) -> Result<()> {
        let (store, path) = (self.store.clone(), self.path(key));
        match self.block(async move { store.delete(&path).await })? {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("deleting {key} from {}", self.url)),
        }
    }
}
