//! The RocksDB database under `checkpoint/state/`, advanced one epoch at a
//! time.
//!
//! Epoch N's changes are written in **one WriteBatch** together with the
//! marker "state is at epoch N" and an undo record (the old value of every
//! key the epoch touched), synced before `commits/N` is written. So on
//! restart the marker is either the last committed epoch, or one past it
//! (the run died between the state write and `commits/N`); in the second
//! case the undo record rolls the epoch back, atomically again, and the
//! replay of N reads exactly the state epoch N read the first time.
//!
//! `working/` is the live database; `snapshots/<N>` are RocksDB checkpoints
//! taken after `commits/N` every `snapshot_every` epochs (hard links where
//! possible). A working copy that is missing or will not open is rebuilt
//! from the newest snapshot not past the last committed epoch, and the
//! engine replays the epochs after it.

use super::epoch::Changes;
use anyhow::{bail, Context, Result};
use rocksdb::{WriteBatch, WriteOptions, DB};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weir_core::fsutil;
use weir_core::mirror::Mirror;

/// Prefix of every key holding operator or host state.
pub(crate) const DATA: u8 = b'd';
/// Prefix of the store's own bookkeeping.
const META: u8 = b'm';
const MARKER: &[u8] = b"mepoch";
/// Number of keys under [`DATA`], kept with every epoch's batch (and its
/// undo record), so progress can report state rows without a scan.
const KEYS: &[u8] = b"mkeys";
/// `origin`: the first epoch this store's history starts at (written once).
const ORIGIN_FILE: &str = "origin";

/// When snapshots are taken and how many are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotPolicy {
    /// A snapshot after every this many committed epochs (0: never).
    pub every: u64,
    /// Snapshots kept; older ones are deleted.
    pub retain: usize,
}

impl Default for SnapshotPolicy {
    fn default() -> Self {
        SnapshotPolicy {
            every: 10,
            retain: 3,
        }
    }
}

/// How a store is opened: when it snapshots, and the memory RocksDB may
/// keep for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    /// When snapshots are taken and how many are kept.
    pub snapshots: SnapshotPolicy,
    /// Bytes for RocksDB's block cache and memtables (`[state] memory`):
    /// half is block cache, a quarter each of the two memtables (one
    /// filling while the other flushes). An epoch whose writes are larger
    /// than a memtable still fits: RocksDB never splits a write.
    pub memory: usize,
}

/// The default of [`StoreOptions::memory`]: an 8 MiB block cache holds
/// the index and filter blocks of a few million keys and the hot data
/// blocks, and 4 MiB memtables flush every epoch or two of a busy pipeline
/// (an epoch's writes are one batch, which a memtable takes whole however
/// large). The windows bench ran as fast with this as with 32
/// MiB each, with 40 MB less resident; a state whose hot keys do not fit
/// wants more (`[state] memory`).
pub const DEFAULT_STATE_MEMORY: usize = 16 << 20;

/// Smallest [`StoreOptions::memory`]: below it RocksDB's memtables are so
/// small that every epoch flushes several files.
pub const MIN_STATE_MEMORY: usize = 4 << 20;

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            snapshots: SnapshotPolicy::default(),
            memory: DEFAULT_STATE_MEMORY,
        }
    }
}

/// What opening the store found, for the engine to act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    /// The working copy is usable; its marker is `epoch`.
    Working,
    /// The working copy was rebuilt from the snapshot of `epoch` (or, with
    /// `None`, from nothing at the store's origin): the engine must replay
    /// the epochs after it, up to the last committed one, before going on.
    Restored { from: Option<u64> },
}

/// One key's value before an epoch changed it (`None`: it did not exist).
type Undo = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// The host-owned state of one pipeline.
pub struct StateStore {
    root: PathBuf,
    db: Arc<DB>,
    policy: SnapshotPolicy,
    /// Epoch the state reflects (the marker), `None` before any commit.
    epoch: Option<u64>,
    /// Keys under [`DATA`] (the `KEYS` record).
    keys: u64,
    /// The shared checkpoint each snapshot is uploaded to, so that another
    /// machine can restore the state ([`weir_core::mirror`]).
    mirror: Option<Arc<Mirror>>,
}

/// Free space the state store needs to open: RocksDB preallocates its
/// write-ahead log (about 1.1 × the write buffer, up to 64 MiB), and when that
/// fails it aborts the process (an assertion in its log writer) instead of
/// returning ENOSPC. Checked before opening, so the user gets the reason.
pub const MIN_FREE_BYTES: u64 = 128 << 20;

fn check_free_space(root: &Path) -> Result<()> {
    match fsutil::free_bytes(root) {
        Some(free) if free < MIN_FREE_BYTES => bail!(
            "not enough free disk space for the state store in {}: {} MiB free, it needs at \
             least {} MiB (No space left on device). Free some space or move the checkpoint.",
            root.display(),
            free >> 20,
            MIN_FREE_BYTES >> 20
        ),
        _ => Ok(()),
    }
}

/// How the store is opened, within `memory` bytes (see
/// [`StoreOptions::memory`]): the block cache keeps the index, filter and
/// data blocks of the keys an epoch reads in memory, so reads do not go to
/// disk per epoch; memtables smaller than RocksDB's 64 MiB default keep a
/// pipeline's resident memory small. RocksDB's defaults have no bloom filters and
/// an 8 MiB block cache that does not hold index or filter blocks, so a
/// point read of a key that is not in the newest files reads a block of
/// every level: the per-epoch `get` cost then grew with the state (issue
/// 16 measured 61 ms → 950 ms per epoch at 45k keys). With whole-key bloom
/// filters a read touches the one file that has the key, and with the
/// cache it touches no disk at all once warm.
fn db_options(memory: usize) -> rocksdb::Options {
    let mut o = rocksdb::Options::default();
    o.create_if_missing(true);
    o.set_compression_type(rocksdb::DBCompressionType::Lz4);
    // Few open files and one background job: operators' state is small next
    // to the process, and the machine runs other things.
    o.set_max_open_files(256);
    o.set_max_background_jobs(2);
    o.set_write_buffer_size(memory / 4);
    o.set_max_write_buffer_number(2);
    o.set_level_compaction_dynamic_level_bytes(true);
    let mut table = rocksdb::BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    table.set_cache_index_and_filter_blocks(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    match rocksdb::Cache::new_lru_cache(memory / 2) {
        Ok(cache) => table.set_block_cache(&cache),
        Err(e) => tracing::warn!("state store: no block cache ({e}); reads go to disk"),
    }
    o.set_block_based_table_factory(&table);
    o
}

fn synced() -> WriteOptions {
    let mut w = WriteOptions::default();
    w.set_sync(true);
    w
}

fn undo_key(epoch: u64) -> Vec<u8> {
    let mut k = vec![META, b'u'];
    k.extend_from_slice(&epoch.to_be_bytes());
    k
}

fn encode_undo(undo: &Undo) -> Vec<u8> {
    let mut out = Vec::new();
    for (key, old) in undo {
        out.extend_from_slice(&(key.len() as u32).to_be_bytes());
        out.extend_from_slice(key);
        match old {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                out.extend_from_slice(&(v.len() as u32).to_be_bytes());
                out.extend_from_slice(v);
            }
        }
    }
    out
}

fn decode_undo(mut bytes: &[u8]) -> Result<Undo> {
    fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Result<&'a [u8]> {
        if bytes.len() < n {
            bail!("undo record is truncated");
        }
        let (head, rest) = bytes.split_at(n);
        *bytes = rest;
        Ok(head)
    }
    fn len(bytes: &mut &[u8]) -> Result<usize> {
        let b = take(bytes, 4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }
    let mut undo = Vec::new();
    while !bytes.is_empty() {
        let n = len(&mut bytes)?;
        let key = take(&mut bytes, n)?.to_vec();
        let old = match take(&mut bytes, 1)?[0] {
            0 => None,
            _ => {
                let n = len(&mut bytes)?;
                Some(take(&mut bytes, n)?.to_vec())
            }
        };
        undo.push((key, old));
    }
    Ok(undo)
}

fn read_u64(db: &DB, key: &[u8], what: &str) -> Result<Option<u64>> {
    match db.get(key).with_context(|| format!("reading the {what}"))? {
        None => Ok(None),
        Some(b) => {
            let bytes: [u8; 8] = b
                .as_slice()
                .try_into()
                .ok()
                .with_context(|| format!("the {what} is corrupt"))?;
            Ok(Some(u64::from_be_bytes(bytes)))
        }
    }
}

fn read_marker(db: &DB) -> Result<Option<u64>> {
    read_u64(db, MARKER, "state marker")
}

/// The key count, counted once (and recorded) in a store written before
/// the count was kept.
fn read_keys(db: &DB) -> Result<u64> {
    if let Some(n) = read_u64(db, KEYS, "state key count")? {
        return Ok(n);
    }
    let mut n = 0u64;
    for item in db.iterator(rocksdb::IteratorMode::From(
        &[DATA],
        rocksdb::Direction::Forward,
    )) {
        let (k, _) = item.context("counting state keys")?;
        if k.first() != Some(&DATA) {
            break;
        }
        n += 1;
    }
    db.put(KEYS, n.to_be_bytes())
        .context("recording the state key count")?;
    Ok(n)
}

impl StateStore {
    /// Opens `root` (`checkpoint/state`). `last_committed` is the newest
    /// epoch in `commits/`: a working copy behind it, missing, or unreadable
    /// is rebuilt from a snapshot (see [`Opened`]).
    pub fn open(
        root: &Path,
        policy: SnapshotPolicy,
        last_committed: Option<u64>,
    ) -> Result<(Self, Opened)> {
        let options = StoreOptions {
            snapshots: policy,
            ..StoreOptions::default()
        };
        Self::open_with(root, options, last_committed)
    }

    /// [`StateStore::open`] with every option given.
    pub fn open_with(
        root: &Path,
        options: StoreOptions,
        last_committed: Option<u64>,
    ) -> Result<(Self, Opened)> {
        fsutil::create_dir_durable(root)?;
        check_free_space(root)?;
        let working = root.join("working");
        let origin = Self::origin(root, last_committed)?;
        let db_options = db_options(options.memory);
        let usable = working.exists().then(|| DB::open(&db_options, &working));
        let (db, opened) = match usable {
            Some(Ok(db)) => {
                let marker = read_marker(&db)?;
                let behind = match (marker, last_committed) {
                    (_, None) => false,
                    (None, Some(c)) => c >= origin,
                    (Some(m), Some(c)) => m < c,
                };
                if behind {
                    tracing::warn!(
                        state = %working.display(),
                        "state is at epoch {marker:?} but epochs up to {last_committed:?} are \
                         committed; rebuilding it from a snapshot"
                    );
                    drop(db);
                    Self::restore(root, &db_options, last_committed)?
                } else {
                    (db, Opened::Working)
                }
            }
            // RocksDB's own lock file ("While lock file: …/LOCK: …", or
            // "lock hold by current process … /LOCK: …"); not any message
            // with "lock" in it ("block checksum mismatch").
            Some(Err(e)) if e.to_string().contains("/LOCK:") => {
                bail!(
                    "the state store {} is in use ({e}); is another `weir run` using this \
                     checkpoint?",
                    working.display()
                )
            }
            Some(Err(e)) if e.to_string().contains("No space left") => {
                bail!("opening the state store {}: {e}", working.display())
            }
            Some(Err(e)) => {
                tracing::warn!(
                    state = %working.display(),
                    "the state's working copy does not open ({e}); rebuilding it from a snapshot"
                );
                Self::restore(root, &db_options, last_committed)?
            }
            None if last_committed.is_some_and(|c| c >= origin) => {
                tracing::warn!(
                    state = %working.display(),
                    "the state's working copy is missing; rebuilding it from a snapshot"
                );
                Self::restore(root, &db_options, last_committed)?
            }
            None => (
                DB::open(&db_options, &working)
                    .with_context(|| format!("creating the state store {}", working.display()))?,
                Opened::Working,
            ),
        };
        let epoch = read_marker(&db)?;
        let keys = read_keys(&db)?;
        Ok((
            StateStore {
                root: root.to_path_buf(),
                db: Arc::new(db),
                policy: options.snapshots,
                epoch,
                keys,
                mirror: None,
            },
            opened,
        ))
    }

    /// The first epoch the state's history covers: 0 for a new checkpoint,
    /// the next epoch for a checkpoint that existed before it had state.
    fn origin(root: &Path, last_committed: Option<u64>) -> Result<u64> {
        let path = root.join(ORIGIN_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => text
                .trim()
                .parse()
                .with_context(|| format!("{} is corrupt", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let origin = last_committed.map_or(0, |c| c + 1);
                fsutil::write_atomic(&path, format!("{origin}\n").as_bytes())?;
                Ok(origin)
            }
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// The epochs of the snapshots in `root` (`checkpoint/state`),
    /// ascending: directories named by their epoch.
    pub fn snapshot_epochs(root: &Path) -> Result<Vec<u64>> {
        let dir = root.join("snapshots");
        let mut found = Vec::new();
        let entries = match std::fs::read_dir(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
            other => other.with_context(|| format!("listing {}", dir.display()))?,
        };
        for entry in entries {
            let entry = entry?;
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if let Some(n) = entry.file_name().to_str().and_then(|s| s.parse().ok()) {
                found.push(n);
            }
        }
        found.sort_unstable();
        Ok(found)
    }

    /// Replaces the working copy with the newest snapshot not past
    /// `last_committed`, or with an empty store if there is none.
    fn restore(
        root: &Path,
        db_options: &rocksdb::Options,
        last_committed: Option<u64>,
    ) -> Result<(DB, Opened)> {
        let working = root.join("working");
        if working.exists() {
            let aside = root.join(format!("working.broken-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&aside);
            std::fs::rename(&working, &aside).with_context(|| {
                format!("moving the broken working copy to {}", aside.display())
            })?;
            tracing::warn!(kept = %aside.display(), "kept the old working copy for inspection");
        }
        let snapshot = Self::newest_good_snapshot(root, last_committed)?;
        if let Some(s) = snapshot {
            let from = root.join("snapshots").join(s.to_string());
            copy_dir(&from, &working)
                .with_context(|| format!("restoring the state snapshot {}", from.display()))?;
            tracing::info!(
                snapshot = s,
                "state restored from snapshot; replaying the epochs after it"
            );
        } else {
            tracing::info!("no state snapshot to restore; replaying from the state's origin");
        }
        let db = DB::open(db_options, &working)
            .with_context(|| format!("opening the restored state {}", working.display()))?;
        Ok((db, Opened::Restored { from: snapshot }))
    }

    /// The newest snapshot not past `last_committed` whose every block
    /// verifies; corrupt newer ones are moved aside with a warning (a
    /// snapshot hard-links the working copy's files, so it may share a
    /// corrupt one).
    fn newest_good_snapshot(root: &Path, last_committed: Option<u64>) -> Result<Option<u64>> {
        let Some(last) = last_committed else {
            return Ok(None);
        };
        for s in Self::snapshot_epochs(root)?
            .into_iter()
            .rev()
            .filter(|&s| s <= last)
        {
            let dir = root.join("snapshots").join(s.to_string());
            match crate::verify::verify(&dir) {
                Ok(_) => return Ok(Some(s)),
                // Not the snapshot's fault (a descriptor limit, a
                // permission): fail the start rather than drop a good one.
                Err(e) if !crate::verify::is_corruption(&e) => {
                    return Err(e).with_context(|| format!("verifying snapshot {s}"))
                }
                Err(e) => {
                    let aside = crate::verify::set_aside(&dir)?;
                    tracing::warn!(
                        snapshot = s,
                        kept = %aside.display(),
                        "state snapshot is corrupt, trying an older one: {e:#}"
                    );
                }
            }
        }
        Ok(None)
    }

    /// The first epoch whose state a rebuild after [`Opened::Restored`] replays.
    pub fn replay_from(&self) -> Result<u64> {
        match self.epoch {
            Some(e) => Ok(e + 1),
            None => Self::origin(&self.root, None),
        }
    }

    /// The first epoch a rebuild of the state (after its working copy was
    /// lost or found corrupt) may replay: the one after the oldest
    /// snapshot kept (newer ones may turn out corrupt), or the state's
    /// origin without one. Offset entries from here on are kept when the
    /// logs are compacted.
    pub fn rebuild_replays_from(&self) -> Result<u64> {
        match Self::snapshot_epochs(&self.root)?.first() {
            Some(&s) => Ok(s + 1),
            None => Self::origin(&self.root, None),
        }
    }

    /// The epoch the state reflects.
    pub fn epoch(&self) -> Option<u64> {
        self.epoch
    }

    /// A read handle on the committed state, for an epoch's overlay.
    pub fn reader(&self) -> StateReader {
        StateReader(self.db.clone())
    }

    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        self.reader().get_many(keys)
    }

    /// Applies epoch `epoch`'s changes with the marker and the undo record,
    /// atomically and durably. Pre-images the epoch read are used as they
    /// are; the rest are read here.
    pub fn commit(&mut self, epoch: u64, changes: &Changes) -> Result<()> {
        if let Some(at) = self.epoch {
            if epoch != at + 1 {
                bail!("state is at epoch {at}; cannot commit epoch {epoch}");
            }
        }
        let Changes {
            writes,
            before,
            forgotten,
        } = changes;
        let unread: Vec<&[u8]> = writes
            .keys()
            .filter(|k| !before.contains_key(*k))
            .map(Vec::as_slice)
            .collect();
        let read = self.get_many(&unread)?;
        let read: HashMap<&[u8], Option<Vec<u8>>> = unread.into_iter().zip(read).collect();
        let mut batch = WriteBatch::default();
        let mut undo: Undo = Vec::with_capacity(writes.len() + 1);
        let mut keys = self.keys as i64;
        for (key, new) in writes {
            match new {
                Some(v) => batch.put(key, v),
                None => batch.delete(key),
            }
            let old = match before.get(key) {
                Some(old) => old.clone(),
                None => read.get(key.as_slice()).cloned().flatten(),
            };
            keys += i64::from(new.is_some()) - i64::from(old.is_some());
            undo.push((key.clone(), old));
        }
        let keys = (keys - *forgotten as i64).max(0) as u64;
        batch.put(KEYS, keys.to_be_bytes());
        undo.push((KEYS.to_vec(), Some(self.keys.to_be_bytes().to_vec())));
        batch.put(undo_key(epoch), encode_undo(&undo));
        if let Some(prev) = epoch.checked_sub(1) {
            batch.delete(undo_key(prev));
        }
        batch.put(MARKER, epoch.to_be_bytes());
        let written = self.db.write_opt(batch, &synced());
        // A write that reports an error (a failed sync) may still have
        // reached the store: the epoch is then what its marker says, so
        // that a retry does not commit the epoch again over its own writes.
        if written.is_ok() || read_marker(&self.db).ok().flatten() == Some(epoch) {
            self.epoch = Some(epoch);
            self.keys = keys;
        }
        written.with_context(|| format!("committing state of epoch {epoch}"))
    }

    /// Writes the state a new checkpoint starts from, before its first
    /// epoch (`weir operator test --state`): no epoch marker and no undo
    /// record, so no rollback removes it. Refused once an epoch has been
    /// committed or while the store holds keys: seeding never overwrites.
    pub fn seed(&mut self, changes: Changes) -> Result<()> {
        if let Some(at) = self.epoch {
            bail!("state is at epoch {at}; only a new state can be seeded");
        }
        if self.keys > 0 {
            bail!(
                "state already holds {} keys; only an empty state can be seeded",
                self.keys
            );
        }
        let mut batch = WriteBatch::default();
        let mut keys = 0u64;
        for (key, value) in changes.writes {
            if let Some(v) = value {
                batch.put(&key, v);
                keys += 1;
            }
        }
        batch.put(KEYS, keys.to_be_bytes());
        self.db
            .write_opt(batch, &synced())
            .context("seeding the state")?;
        self.keys = keys;
        Ok(())
    }

    /// Undoes the newest epoch if it is past `last_committed` (its state was
    /// written but `commits/N` was not), so its replay reads what it read.
    pub fn roll_back_uncommitted(&mut self, last_committed: Option<u64>) -> Result<()> {
        let Some(at) = self.epoch else {
            return Ok(());
        };
        if last_committed.is_some_and(|c| at <= c) {
            return Ok(());
        }
        if at != last_committed.map_or(0, |c| c + 1) {
            bail!(
                "state is at epoch {at} but only epochs up to {last_committed:?} are committed; \
                 only the newest epoch can be rolled back"
            );
        }
        let record = self
            .db
            .get(undo_key(at))
            .context("reading the undo record")?
            .with_context(|| format!("state of uncommitted epoch {at} has no undo record"))?;
        let mut batch = WriteBatch::default();
        for (key, old) in decode_undo(&record)? {
            match old {
                Some(v) => batch.put(key, v),
                None => batch.delete(key),
            }
        }
        batch.delete(undo_key(at));
        match last_committed {
            Some(c) => batch.put(MARKER, c.to_be_bytes()),
            None => batch.delete(MARKER),
        }
        self.db
            .write_opt(batch, &synced())
            .with_context(|| format!("rolling back the state of epoch {at}"))?;
        tracing::info!(
            epoch = at,
            "rolled back state written by an epoch that was never committed"
        );
        self.epoch = last_committed;
        self.keys = read_keys(&self.db)?;
        Ok(())
    }

    /// Uploads every snapshot taken from now on to `mirror` (the shared
    /// checkpoint), and the state's origin now: a machine that restores
    /// this state from there needs to know where its history starts.
    pub fn set_mirror(&mut self, mirror: Arc<Mirror>) -> Result<()> {
        let origin = self.root.join(ORIGIN_FILE);
        if origin.exists() {
            mirror.put_file(&origin)?;
        }
        self.mirror = Some(mirror);
        Ok(())
    }

    /// After `commits/epoch`: takes a snapshot if the policy says so and
    /// prunes old ones.
    pub fn after_commit(&mut self, epoch: u64) -> Result<()> {
        if !self.snapshot_due(epoch) {
            return Ok(());
        }
        self.snapshot(epoch)
    }

    /// Whether the policy takes a snapshot after `epoch` commits.
    pub fn snapshot_due(&self, epoch: u64) -> bool {
        self.policy.every != 0 && (epoch + 1).is_multiple_of(self.policy.every)
    }

    /// Writes `snapshots/<epoch>` (a RocksDB checkpoint) and keeps only the
    /// newest `retain`.
    pub fn snapshot(&mut self, epoch: u64) -> Result<()> {
        let dir = self.root.join("snapshots");
        fsutil::create_dir_durable(&dir)?;
        let target = dir.join(epoch.to_string());
        // A retry after a failed prune or upload finds it taken already and
        // goes on with those.
        if !target.exists() {
            let temp = dir.join(format!(".{epoch}.tmp-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&temp);
            rocksdb::checkpoint::Checkpoint::new(&self.db)
                .and_then(|c| c.create_checkpoint(&temp))
                .with_context(|| format!("snapshotting state at epoch {epoch}"))?;
            std::fs::rename(&temp, &target)
                .with_context(|| format!("moving the snapshot into {}", target.display()))?;
            fsutil::sync_dir(&dir)?;
        }
        let all = Self::snapshot_epochs(&self.root)?;
        for old in all
            .iter()
            .take(all.len().saturating_sub(self.policy.retain.max(1)))
        {
            let path = dir.join(old.to_string());
            std::fs::remove_dir_all(&path)
                .with_context(|| format!("removing old snapshot {}", path.display()))?;
        }
        if let Some(mirror) = &self.mirror {
            mirror
                .push_snapshot(&target)
                .with_context(|| format!("uploading the state snapshot of epoch {epoch}"))?;
        }
        tracing::debug!(epoch, "state snapshot taken");
        Ok(())
    }

    /// Keys held (operator and host state; an expired value counts until
    /// it is overwritten) and approximate bytes (SST files plus memtables),
    /// for progress and metrics.
    pub fn size(&self) -> (u64, u64) {
        let property = |name| self.db.property_int_value(name).ok().flatten().unwrap_or(0);
        let bytes =
            property("rocksdb.total-sst-files-size") + property("rocksdb.cur-size-all-mem-tables");
        (self.keys, bytes)
    }
}

/// Reads committed state; cheap to clone, owned by an epoch's overlay
/// (which the operator's sandbox holds).
#[derive(Clone)]
pub struct StateReader(Arc<DB>);

impl StateReader {
    pub(crate) fn db(&self) -> &DB {
        &self.0
    }

    /// Reads a key as committed (no epoch overlay).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db().get(key).context("reading state")
    }

    /// Reads many keys as committed, in one RocksDB call.
    pub fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        self.db()
            .multi_get(keys)
            .into_iter()
            .map(|r| r.context("reading state"))
            .collect()
    }

    /// Committed keys starting with `prefix`, in key order, while `keep`
    /// says so (for sweeps over a time-ordered index).
    pub fn scan_prefix(
        &self,
        prefix: &[u8],
        mut keep: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let iter = self.db().iterator(rocksdb::IteratorMode::From(
            prefix,
            rocksdb::Direction::Forward,
        ));
        for item in iter {
            let (k, v) = item.context("scanning state")?;
            if !k.starts_with(prefix) || !keep(&k, &v) {
                break;
            }
        }
        Ok(())
    }
}

/// Copies a snapshot directory file by file (snapshots hold only files).
fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    let temp = to.with_extension(format!("restoring-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&temp);
    std::fs::create_dir_all(&temp)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        std::fs::copy(entry.path(), temp.join(entry.file_name()))?;
    }
    std::fs::rename(&temp, to)?;
    if let Some(parent) = to.parent() {
        fsutil::sync_dir(parent)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path, committed: Option<u64>) -> (StateStore, Opened) {
        StateStore::open(
            dir,
            SnapshotPolicy {
                every: 2,
                retain: 2,
            },
            committed,
        )
        .unwrap()
    }

    fn put(k: &str, v: &str) -> (Vec<u8>, Option<Vec<u8>>) {
        (k.as_bytes().to_vec(), Some(v.as_bytes().to_vec()))
    }

    fn get(s: &StateStore, k: &str) -> Option<String> {
        s.reader()
            .get(k.as_bytes())
            .unwrap()
            .map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn committed_state_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, opened) = open(dir.path(), None);
        assert_eq!(opened, Opened::Working);
        s.commit(0, &Changes::writes([put("a", "1"), put("b", "2")]))
            .unwrap();
        s.commit(1, &Changes::writes([put("a", "3"), (b"b".to_vec(), None)]))
            .unwrap();
        drop(s);
        let (s, opened) = open(dir.path(), Some(1));
        assert_eq!(opened, Opened::Working);
        assert_eq!(s.epoch(), Some(1));
        assert_eq!(get(&s, "a").as_deref(), Some("3"));
        assert_eq!(get(&s, "b"), None);
    }

    #[test]
    fn the_key_count_follows_commits_rollbacks_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path(), None);
        assert_eq!(s.size().0, 0);
        s.commit(
            0,
            &Changes::writes([put("da", "1"), put("db", "2"), put("dc", "3")]),
        )
        .unwrap();
        assert_eq!(s.size().0, 3);
        // Overwrite one, delete one, delete one that never existed, add one.
        let del = |k: &str| (k.as_bytes().to_vec(), None);
        s.commit(
            1,
            &Changes::writes([put("da", "9"), del("db"), del("dz"), put("dd", "4")]),
        )
        .unwrap();
        assert_eq!(s.size().0, 3);
        s.commit(2, &Changes::writes([del("da"), del("dc")]))
            .unwrap();
        assert_eq!(s.size().0, 1);
        drop(s);
        // Epoch 2 never committed: rolling it back restores the count too.
        let (mut s, _) = open(dir.path(), Some(1));
        assert_eq!(s.size().0, 1, "the count is stored with the epoch");
        s.roll_back_uncommitted(Some(1)).unwrap();
        assert_eq!(s.size().0, 3);
        // A store without the record (older checkpoints) counts once.
        s.db.delete(KEYS).unwrap();
        assert_eq!(read_keys(&s.db).unwrap(), 3);
    }

    #[test]
    fn an_uncommitted_epoch_is_rolled_back_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path(), None);
        s.commit(0, &Changes::writes([put("a", "1"), put("b", "2")]))
            .unwrap();
        // Epoch 1's state is written, then the run dies before commits/1.
        s.commit(
            1,
            &Changes::writes([put("a", "9"), put("c", "new"), (b"b".to_vec(), None)]),
        )
        .unwrap();
        drop(s);
        let (mut s, _) = open(dir.path(), Some(0));
        s.roll_back_uncommitted(Some(0)).unwrap();
        assert_eq!(s.epoch(), Some(0));
        assert_eq!(get(&s, "a").as_deref(), Some("1"));
        assert_eq!(get(&s, "b").as_deref(), Some("2"));
        assert_eq!(get(&s, "c"), None);
        // The replay commits epoch 1 again, and it sticks.
        s.commit(1, &Changes::writes([put("a", "9")])).unwrap();
        s.roll_back_uncommitted(Some(1)).unwrap();
        assert_eq!(get(&s, "a").as_deref(), Some("9"));
    }

    #[test]
    fn the_very_first_epoch_rolls_back_to_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path(), None);
        s.commit(0, &Changes::writes([put("a", "1")])).unwrap();
        s.roll_back_uncommitted(None).unwrap();
        assert_eq!(s.epoch(), None);
        assert_eq!(get(&s, "a"), None);
    }

    #[test]
    fn a_seed_outlives_a_rollback_of_the_first_epoch_and_is_written_once() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path(), None);
        s.seed(Changes::writes([put("a", "seed"), put("b", "seed")]))
            .unwrap();
        assert_eq!(s.size().0, 2);
        s.commit(0, &Changes::writes([put("a", "0")])).unwrap();
        drop(s);
        let (mut s, _) = open(dir.path(), None);
        s.roll_back_uncommitted(None).unwrap();
        assert_eq!(get(&s, "a").as_deref(), Some("seed"));
        assert_eq!(get(&s, "b").as_deref(), Some("seed"));
        let again = s.seed(Changes::writes([put("c", "x")])).unwrap_err();
        assert!(again.to_string().contains("2 keys"), "{again}");
        s.commit(0, &Changes::writes([put("a", "0")])).unwrap();
        let late = s.seed(Changes::writes([put("c", "x")])).unwrap_err();
        assert!(late.to_string().contains("epoch 0"), "{late}");
    }

    #[test]
    fn a_deleted_working_copy_is_restored_from_the_newest_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path(), None);
        for epoch in 0..5 {
            s.commit(epoch, &Changes::writes([put("n", &epoch.to_string())]))
                .unwrap();
            s.after_commit(epoch).unwrap();
        }
        // every = 2: snapshots after epochs 1 and 3.
        assert_eq!(StateStore::snapshot_epochs(dir.path()).unwrap(), [1, 3]);
        drop(s);
        std::fs::remove_dir_all(dir.path().join("working")).unwrap();
        let (s, opened) = open(dir.path(), Some(4));
        assert_eq!(opened, Opened::Restored { from: Some(3) });
        assert_eq!(s.epoch(), Some(3));
        assert_eq!(s.replay_from().unwrap(), 4);
        assert_eq!(get(&s, "n").as_deref(), Some("3"));
    }

    #[test]
    fn snapshots_are_pruned_to_the_retained_number() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path(), None);
        for epoch in 0..8 {
            s.commit(epoch, &Changes::writes([put("n", "x")])).unwrap();
            s.after_commit(epoch).unwrap();
        }
        assert_eq!(StateStore::snapshot_epochs(dir.path()).unwrap(), [5, 7]);
    }

    #[test]
    fn a_corrupt_working_copy_is_set_aside_and_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path(), None);
        s.commit(0, &Changes::writes([put("a", "1")])).unwrap();
        s.after_commit(0).unwrap();
        s.commit(1, &Changes::writes([put("a", "2")])).unwrap();
        s.after_commit(1).unwrap();
        drop(s);
        let working = dir.path().join("working");
        for entry in std::fs::read_dir(&working).unwrap() {
            let p = entry.unwrap().path();
            if p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("MANIFEST")
            {
                std::fs::write(&p, b"garbage").unwrap();
            }
        }
        let (s, opened) = open(dir.path(), Some(1));
        assert_eq!(opened, Opened::Restored { from: Some(1) });
        assert_eq!(get(&s, "a").as_deref(), Some("2"));
    }

    #[test]
    fn a_store_in_use_is_refused_not_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = open(dir.path(), None);
        s.commit(0, &Changes::writes([put("a", "1")])).unwrap();
        let err = StateStore::open(dir.path(), SnapshotPolicy::default(), Some(0))
            .err()
            .unwrap();
        assert!(format!("{err:#}").contains("in use"), "{err:#}");
        assert_eq!(
            get(&s, "a").as_deref(),
            Some("1"),
            "the live store is untouched"
        );
    }

    #[test]
    fn state_of_a_checkpoint_older_than_state_starts_empty_at_its_next_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let (s, opened) = open(dir.path(), Some(6));
        assert_eq!(opened, Opened::Working);
        assert_eq!(s.epoch(), None);
        assert_eq!(StateStore::origin(dir.path(), None).unwrap(), 7);
    }
}
