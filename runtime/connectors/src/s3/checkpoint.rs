//! A checkpoint in an S3-compatible bucket: [`weir_core::mirror::Remote`]
//! over `object_store`. Conditional creates use S3's `If-None-Match: *`,
//! which AWS S3, MinIO, R2 and s3s-fs honour; a store that ignores it
//! would let two workers both "create" an epoch's entry, so the start
//! checks it (`S3Remote::check_conditional_create`).

use super::{ObjectStoreSettings, S3Client};
use anyhow::{bail, Context, Result};
use futures_util::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use std::future::Future;
use weir_core::mirror::{Created, Remote, RemoteObject, Tag};

/// A checkpoint under `s3://bucket/prefix`. Calls block the calling thread
/// (see [`S3Client`]).
pub struct S3Remote {
    client: S3Client,
}

impl S3Remote {
    /// A client for `url`; checks that the bucket answers and honours
    /// conditional creates before anything relies on them.
    pub fn open(url: &str, settings: &ObjectStoreSettings) -> Result<Self> {
        let remote = S3Remote {
            client: S3Client::open(url, settings)?,
        };
        remote.check_conditional_create()?;
        Ok(remote)
    }

    fn path(&self, key: &str) -> ObjectPath {
        self.client.path(key)
    }

    fn block<T: Send + 'static>(
        &self,
        future: impl Future<Output = T> + Send + 'static,
    ) -> Result<T> {
        self.client.block(future)
    }

    /// Creates a probe object twice: the second create must be refused.
    /// A store that overwrites instead cannot fence a zombie worker.
    fn check_conditional_create(&self) -> Result<()> {
        let key = format!("_probe/{}", uuid::Uuid::new_v4());
        let first = self
            .create(&key, b"probe")
            .with_context(|| format!("writing to {}", self.client.url))?;
        let second = self.create(&key, b"probe again")?;
        let _ = self.delete(&key);
        match (first, second) {
            (Created::Created, Created::Exists(_)) => Ok(()),
            _ => bail!(
                "{} does not honour conditional writes (If-None-Match: *): a second create of \
                 the same object was not refused. Weir needs them to keep two workers from \
                 both committing an epoch; use a store that supports them (AWS S3, MinIO, R2).",
                self.client.url
            ),
        }
    }
}

impl Remote for S3Remote {
    fn url(&self) -> String {
        self.client.url.to_string()
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let (store, path) = (self.client.store.clone(), self.path(key));
        self.block(async move {
            match store.get(&path).await {
                Ok(got) => got.bytes().await.map(|b| Some(b.to_vec())),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?
        .with_context(|| format!("reading {key} from {}", self.client.url))
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let (store, path) = (self.client.store.clone(), self.path(key));
        let payload = PutPayload::from(bytes.to_vec());
        self.block(async move { store.put(&path, payload).await })?
            .with_context(|| format!("writing {key} to {}", self.client.url))?;
        Ok(())
    }

    fn create(&self, key: &str, bytes: &[u8]) -> Result<Created> {
        let (store, path) = (self.client.store.clone(), self.path(key));
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
                        self.client.url
                    )
                })?;
                Ok(Created::Exists(theirs))
            }
            Err(e) => Err(e).with_context(|| format!("creating {key} in {}", self.client.url)),
        }
    }

    fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, Tag)>> {
        let (store, path) = (self.client.store.clone(), self.path(key));
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
            .with_context(|| format!("reading {key} from {}", self.client.url))?;
        match got {
            None => Ok(None),
            Some((bytes, Some(tag))) => Ok(Some((bytes, tag))),
            Some((_, None)) => bail!(
                "{} gave no ETag for {key}: conditional replaces need one",
                self.client.url
            ),
        }
    }

    fn replace(&self, key: &str, bytes: &[u8], tag: Option<&str>) -> Result<Option<Tag>> {
        let (store, path) = (self.client.store.clone(), self.path(key));
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
                    self.client.url
                )
            })?)),
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. })
            | Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e).with_context(|| format!("replacing {key} in {}", self.client.url)),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<RemoteObject>> {
        let store = self.client.store.clone();
        // `list` takes whole path segments: list the prefix's directory and
        // keep the keys that start with the prefix.
        let dir = match prefix.rsplit_once('/') {
            Some((dir, _)) => Some(self.path(dir)),
            None if self.client.url.prefix.is_empty() => None,
            None => Some(ObjectPath::from(self.client.url.prefix.as_str())),
        };
        let metas = self
            .block(async move { store.list(dir.as_ref()).try_collect::<Vec<_>>().await })?
            .with_context(|| format!("listing {prefix} in {}", self.client.url))?;
        let mut objects: Vec<RemoteObject> = metas
            .into_iter()
            .map(|m| RemoteObject {
                key: self.client.key_of(&m.location),
                size: m.size,
            })
            .filter(|o| o.key.starts_with(prefix))
            .collect();
        objects.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(objects)
    }

    fn delete(&self, key: &str) -> Result<()> {
        let (store, path) = (self.client.store.clone(), self.path(key));
        match self.block(async move { store.delete(&path).await })? {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("deleting {key} from {}", self.client.url)),
        }
    }
}
