//! Objects under an S3 prefix as a replayable source: the files source's
//! protocol over a bucket. Each plan lists the whole prefix, so an object
//! that arrives late at an earlier position in key order is still picked
//! up, and takes the objects it has not planned before in arrival order
//! (last modified, then key), at most `max_files_per_trigger` of them.
//! `offsets/N` records each object's key, size and ETag; a read asks for
//! that ETag (`If-Match`), so a replay reads exactly the planned bytes or
//! fails naming the object that changed.
//!
//! Objects are JSON lines, or Parquet when the key ends in `.parquet`,
//! decoded by the files source's readers ([`crate::files::records`]) on
//! every core. Keys with a part starting with `.` or `_` (`_SUCCESS`,
//! `_temporary/`) are not input.

use super::S3Client;
use crate::files::records;
use crate::files::split::{self, Piece};
use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use futures_util::TryStreamExt;
use object_store::{GetOptions, ObjectMeta, ObjectStore, ObjectStoreExt};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};
use weir_core::json::JsonDecoder;
use weir_core::source::{Backlog, BacklogUnit, EpochInput, PlanLimit, RowOrigin, Source};

/// Objects fetched at once while reading an epoch.
const CONCURRENT_GETS: usize = 8;

/// In real-time mode, how often the prefix is listed at most: each listing
/// is a request per thousand objects, and objects arrive whole, not line by
/// line.
const LIVE_LIST_INTERVAL: Duration = Duration::from_secs(1);

/// One object of a planned range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedObject {
    /// The key, relative to the source's prefix.
    pub key: String,
    /// Its size when planned.
    pub size: u64,
    /// Its ETag when planned: a read of the object asks for exactly this
    /// version. `None` only from a store that gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e_tag: Option<String>,
}

/// The WAL form of an S3 source's range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRange {
    pub objects: Vec<PlannedObject>,
}

/// The S3 source.
pub struct S3Source {
    client: S3Client,
    decoder: JsonDecoder,
    max_files: usize,
    /// Every planned object, by key.
    seen: HashMap<String, PlannedObject>,
    /// Planned objects found changed since (warned about once each).
    changed: HashSet<String>,
    backlog: Option<Backlog>,
    /// When the prefix was last listed in real-time mode.
    listed: Option<Instant>,
    /// Threads an epoch's objects are decoded on: one per core.
    threads: usize,
}

impl S3Source {
    /// A source over `client`'s prefix, decoding records into `decoder`'s
    /// schema. Makes no request.
    pub fn new(client: S3Client, decoder: JsonDecoder, max_files: usize) -> Self {
        S3Source {
            client,
            decoder,
            max_files,
            seen: HashMap::new(),
            changed: HashSet::new(),
            backlog: None,
            listed: None,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    /// Every input object under the prefix.
    fn list(&self) -> Result<Vec<ObjectMeta>> {
        let store = self.client.store.clone();
        let prefix = (!self.client.url.prefix.is_empty()).then(|| self.client.path(""));
        let prefix =
            prefix.map(|p| object_store::path::Path::from(p.as_ref().trim_end_matches('/')));
        let metas = self
            .client
            .block(async move { store.list(prefix.as_ref()).try_collect::<Vec<_>>().await })?
            .with_context(|| format!("listing {}", self.client.url))?;
        Ok(metas
            .into_iter()
            .filter(|m| is_input(&self.client.key_of(&m.location)))
            .collect())
    }

    /// Warns (once per object) that a planned object changed afterwards:
    /// its new content is never read, since an epoch's range is fixed.
    fn note_if_changed(&mut self, planned: &PlannedObject, now: &ObjectMeta) {
        // Some stores (s3s-fs) list no ETags: then only the size tells.
        let same_tag = match (&planned.e_tag, &now.e_tag) {
            (Some(then), Some(now)) => then == now,
            _ => true,
        };
        let same = planned.size == now.size && same_tag;
        if same || !self.changed.insert(planned.key.clone()) {
            return;
        }
        tracing::warn!(
            object = %self.client.url_of(&planned.key),
            "input object was overwritten after it was planned ({} bytes then, {} now); its new \
             content is not read. Give new data a new key.",
            planned.size,
            now.size
        );
    }

    /// `objects` with the ETag of each that the listing lacked, asked for
    /// one by one (AWS lists ETags; some compatible stores do not).
    fn with_e_tags(&self, objects: Vec<PlannedObject>) -> Result<Vec<PlannedObject>> {
        let heads: Vec<_> = objects
            .into_iter()
            .map(|o| {
                let (store, path) = (self.client.store.clone(), self.client.path(&o.key));
                let url = self.client.url_of(&o.key);
                async move {
                    if o.e_tag.is_some() {
                        return Ok(o);
                    }
                    let meta = store
                        .head(&path)
                        .await
                        .with_context(|| format!("reading the ETag of {url}"))?;
                    Ok::<_, anyhow::Error>(PlannedObject {
                        size: meta.size,
                        e_tag: meta.e_tag,
                        ..o
                    })
                }
            })
            .collect();
        self.client.all(heads, CONCURRENT_GETS)
    }

    /// The planned bytes of each of `objects`, fetched a few at a time.
    fn fetch(&self, objects: &[PlannedObject]) -> Result<Vec<Bytes>> {
        let gets: Vec<_> = objects
            .iter()
            .map(|o| {
                let (store, path) = (self.client.store.clone(), self.client.path(&o.key));
                let url = self.client.url_of(&o.key);
                let planned = o.clone();
                async move { fetch_planned(store, path, url, planned).await }
            })
            .collect();
        self.client.all(gets, CONCURRENT_GETS)
    }
}

/// Whether `key` (relative to the prefix) is input: no part of it starts
/// with `.` or `_`, and it names an object, not a folder marker.
fn is_input(key: &str) -> bool {
    !key.is_empty()
        && !key.ends_with('/')
        && !key
            .split('/')
            .any(|p| p.starts_with('.') || p.starts_with('_'))
}

/// Reads `planned` as it was planned: the same ETag and size, or an error
/// naming the object and what changed.
async fn fetch_planned(
    store: std::sync::Arc<dyn ObjectStore>,
    path: object_store::path::Path,
    url: String,
    planned: PlannedObject,
) -> Result<Bytes> {
    let options = GetOptions {
        if_match: planned.e_tag.clone(),
        ..GetOptions::default()
    };
    let got = match store.get_opts(&path, options).await {
        Ok(got) => got,
        Err(object_store::Error::Precondition { .. }) => bail!(
            "input {url} was overwritten after it was planned (planned ETag {}); the epoch \
             cannot be replayed exactly. Put the planned content back, or start a new \
             checkpoint",
            planned.e_tag.as_deref().unwrap_or("-")
        ),
        Err(object_store::Error::NotFound { .. }) => bail!(
            "input {url} was deleted after it was planned; the epoch cannot be replayed \
             exactly. Put it back, or start a new checkpoint"
        ),
        Err(e) => return Err(anyhow!(e).context(format!("reading {url}"))),
    };
    // Stores that ignore `If-Match` on reads (s3s-fs) still say which
    // version they sent.
    if let (Some(planned), Some(sent)) = (&planned.e_tag, &got.meta.e_tag) {
        if planned != sent {
            bail!(
                "input {url} was overwritten after it was planned (planned ETag {planned}, now \
                 {sent}); the epoch cannot be replayed exactly. Put the planned content back, \
                 or start a new checkpoint"
            );
        }
    }
    let bytes = got
        .bytes()
        .await
        .with_context(|| format!("reading {url}"))?;
    if bytes.len() as u64 != planned.size {
        bail!(
            "input {url} has {} bytes, but {} were planned; the epoch cannot be replayed exactly",
            bytes.len(),
            planned.size
        );
    }
    Ok(bytes)
}

impl Source for S3Source {
    type Range = ObjectRange;

    fn schema(&self) -> arrow_schema::SchemaRef {
        self.decoder.schema().clone()
    }

    fn identity(&self) -> String {
        format!("s3:{}", self.client.url)
    }

    fn restore(&mut self, range: &ObjectRange) -> Result<()> {
        for o in &range.objects {
            self.seen.insert(o.key.clone(), o.clone());
        }
        Ok(())
    }

    fn planned_so_far(&self) -> Result<ObjectRange> {
        let mut objects: Vec<PlannedObject> = self.seen.values().cloned().collect();
        objects.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(ObjectRange { objects })
    }

    fn plan(&mut self, limit: PlanLimit) -> Result<Option<ObjectRange>> {
        if limit == PlanLimit::Live {
            if self
                .listed
                .is_some_and(|at| at.elapsed() < LIVE_LIST_INTERVAL)
            {
                return Ok(None);
            }
            self.listed = Some(Instant::now());
        }
        let mut fresh = Vec::new();
        for meta in self.list()? {
            let key = self.client.key_of(&meta.location);
            match self.seen.get(&key).cloned() {
                Some(planned) => self.note_if_changed(&planned, &meta),
                None => fresh.push((meta.last_modified, key, meta.size, meta.e_tag)),
            }
        }
        let waiting: u64 = fresh.iter().map(|f| f.2).sum();
        let mut backlog = Backlog {
            unit: BacklogUnit::Bytes,
            planned: 0,
            pending: waiting,
            pending_files: Some(fresh.len() as u64),
            changed_files: Some(self.changed.len() as u64),
        };
        if fresh.is_empty() {
            self.backlog = Some(backlog);
            return Ok(None);
        }
        fresh.sort();
        if limit.per_trigger() {
            fresh.truncate(self.max_files);
        }
        let listed: u64 = fresh.iter().map(|f| f.2).sum();
        backlog.pending -= listed;
        backlog.pending_files = backlog.pending_files.map(|n| n - fresh.len() as u64);
        let objects = self.with_e_tags(
            fresh
                .into_iter()
                .map(|(_, key, size, e_tag)| PlannedObject { key, size, e_tag })
                .collect(),
        )?;
        backlog.planned = objects.iter().map(|o| o.size).sum();
        self.backlog = Some(backlog);
        for o in &objects {
            self.seen.insert(o.key.clone(), o.clone());
        }
        Ok(Some(ObjectRange { objects }))
    }

    fn backlog(&self) -> Option<Backlog> {
        self.backlog
    }

    fn read(&mut self, range: &ObjectRange) -> Result<EpochInput> {
        let data = self.fetch(&range.objects)?;
        // One piece per object: decoded on every core, results in order.
        let pieces: Vec<Piece> = (0..data.len())
            .map(|i| Piece {
                file: i,
                start: 0,
                end: 0,
            })
            .collect();
        let decoded = split::decode_pieces(&pieces, self.threads, |p| {
            let object = &range.objects[p.file];
            let url = self.client.url_of(&object.key);
            records::decode_whole(&self.decoder, &object.key, data[p.file].clone(), &url)
        });
        let mut out = EpochInput::default();
        for part in decoded {
            let part = part?;
            out.batches.extend(part.batches);
            out.dead_letters.extend(part.dead_letters);
        }
        Ok(out)
    }

    fn locate(&mut self, range: &ObjectRange, row: u64) -> Result<Option<RowOrigin>> {
        let objects = range.objects.iter().map(|o| {
            let data = self
                .fetch(std::slice::from_ref(o))?
                .pop()
                .unwrap_or_default();
            Ok((o.key.clone(), data, self.client.url_of(&o.key)))
        });
        records::locate_across(&self.decoder, row, objects)
    }

    fn describe(&self, range: &ObjectRange) -> String {
        let bytes: u64 = range.objects.iter().map(|o| o.size).sum();
        match range.objects.as_slice() {
            [one] => format!("1 object ({}, {bytes} B)", one.key),
            many => format!("{} objects ({bytes} B)", many.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_hidden_and_underscore_keys_are_not_input() {
        for key in ["a.jsonl", "day=1/a.parquet", "x"] {
            assert!(is_input(key), "{key}");
        }
        for key in [
            "",
            "dir/",
            "_SUCCESS",
            "_temporary/0/a.jsonl",
            "day=1/.a.jsonl.tmp",
        ] {
            assert!(!is_input(key), "{key}");
        }
    }
}
