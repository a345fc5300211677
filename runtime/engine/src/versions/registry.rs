//! The operator registry: every operator version a pipeline has been given,
//! which one is active, which one runs in shadow, and the history of
//! changes, in `checkpoint/operators/registry.json`.
//!
//! A version is a component digest plus a config digest; both byte strings
//! live content-addressed in `checkpoint/blobs/`, so any version can be
//! loaded again for as long as the checkpoint exists. The registry says what
//! *new* epochs should run; what an epoch actually ran with is in its
//! `offsets/N` entry, and replay only ever reads that.
//!
//! A cluster's workers share one registry in the object store
//! ([`Registry::shared`]): a change is a conditional replace of the
//! version read (optimistic concurrency, as Delta Lake's log does it), so
//! two workers changing it at once cannot lose either change — the second
//! gets [`RegistryMoved`], reads the registry again and retries.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weir_core::clock::now_ms;
use weir_core::mirror::{write_through, Mirror, Tag};
use weir_core::wal::OperatorRef;
use weir_core::{fsutil, Digest};

/// Where a version came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Origin {
    /// The pipeline file's `operator.path` at start-up.
    File { path: PathBuf },
    /// Uploaded through the admin API (`weir deploy`).
    Upload {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file_name: Option<String>,
    },
    /// Picked up by `weir run --watch` when the file changed.
    Watch { path: PathBuf },
}

/// Digests of the golden files a version was checked against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoldenCheck {
    pub input_digest: Digest,
    pub expected_digest: Digest,
    pub rows_in: u64,
    pub rows_out: u64,
}

/// One registered operator version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    /// 1, 2, 3… in registration order: what people type.
    pub number: u32,
    /// The component's digest; what `offsets/N` records.
    pub digest: Digest,
    /// The digest of the JSON config passed to `init`.
    pub config_digest: Digest,
    /// The digest of the version's artifact manifest (models and other
    /// named files, see `weir_core::artifacts`); `None`: it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Digest>,
    /// Registration time, Unix ms.
    pub registered_ms: i64,
    pub origin: Origin,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Size of the component in bytes.
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub golden: Option<GoldenCheck>,
}

impl Version {
    /// What `offsets/N` records of an epoch this version runs.
    pub fn operator_ref(&self) -> OperatorRef {
        OperatorRef {
            digest: self.digest,
            config_digest: self.config_digest,
            artifacts: self.artifacts,
        }
    }
}

/// The candidate that runs in shadow beside the active version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shadow {
    pub version: u32,
    /// Output column that identifies a row when outputs are compared;
    /// `None` = the first output column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// Who made a change: what the audit trail names beside each event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// The admin token's name for a change through the API; `engine` for
    /// Weir's own decisions (auto-rollback, lookup refresh failures);
    /// `pipeline-file` for the operator a (re)start takes from the
    /// pipeline file; `watch` for `weir run --watch`.
    pub name: String,
    /// The client's address, for a change through the admin API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

impl Actor {
    /// Weir itself (auto-rollback, lookup refresh failures).
    pub fn engine() -> Self {
        Actor::named("engine")
    }

    /// An actor without a client address.
    pub fn named(name: &str) -> Self {
        Actor {
            name: name.into(),
            client: None,
        }
    }
}

/// One change of what runs: an entry of the audit trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// 1, 2, 3… in the order the changes were made (events recorded
    /// before events were numbered get theirs when the registry is read).
    #[serde(default)]
    pub seq: u64,
    pub at_ms: i64,
    /// `register`, `activate`, `rollback`, `auto-rollback`, `shadow`,
    /// `promote`, `unshadow`, `lookup-refresh-failed`.
    pub action: String,
    /// The operator version acted on (0 for a lookup table event).
    pub version: u32,
    /// That version's component digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
    /// That version's config digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_digest: Option<Digest>,
    /// The version that was active before an activation, rollback or
    /// promotion, and its component digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced_digest: Option<Digest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Who made the change (absent in events recorded before actors were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<Actor>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Document {
    /// Counts the changes saved: a worker never takes up a shared
    /// registry older than the one it holds (a read that raced its own
    /// write).
    #[serde(default)]
    revision: u64,
    versions: Vec<Version>,
    active: Option<u32>,
    /// Versions that were active before, newest last: what `rollback` pops.
    #[serde(default)]
    previous: Vec<u32>,
    #[serde(default)]
    shadow: Option<Shadow>,
    /// The version the pipeline file named at the last start.
    #[serde(default)]
    file_version: Option<u32>,
    /// The newest events (trimming keeps at least the newest
    /// `EVENTS_KEPT - ARCHIVED_AT_ONCE`, so the last one numbers the next).
    #[serde(default)]
    events: Vec<Event>,
}

impl Document {
    /// A registry file's document, with the events recorded before events
    /// were numbered (seq 0) numbered in their order, so every event has a
    /// `seq` of its own; every reader of the same bytes numbers them alike.
    fn read(bytes: &[u8]) -> serde_json::Result<Self> {
        let mut doc: Document = serde_json::from_slice(bytes)?;
        if doc.events.iter().any(|e| e.seq == 0) {
            let mut seq = 0;
            for e in &mut doc.events {
                seq = if e.seq == 0 {
                    seq + 1
                } else {
                    e.seq.max(seq + 1)
                };
                e.seq = seq;
            }
        }
        Ok(doc)
    }
}

/// The registry file, loaded; every change is written through atomically.
pub struct Registry {
    path: PathBuf,
    doc: Document,
    /// Who the change being made is by (set by [`Registry::change`]).
    actor: Option<Actor>,
    /// The shared checkpoint the file is written to first, if any.
    mirror: Option<Arc<Mirror>>,
    /// The cluster's shared registry this one follows, if any.
    shared: Option<Shared>,
}

/// A registry several workers change: the version this one last read.
struct Shared {
    source: SharedSource,
    tag: Option<Tag>,
}

/// Where a shared registry lives; clonable, so that it can be read
/// without holding whatever guards the [`Registry`].
#[derive(Clone)]
pub struct SharedSource {
    mirror: Arc<Mirror>,
    path: PathBuf,
}

/// A shared registry as read from the object store, not yet installed.
pub struct Fetched {
    doc: Document,
    tag: Tag,
}

/// Another worker changed the shared registry after this one read it; the
/// change was not made. Read it again ([`Registry::reload`]) and retry.
#[derive(Debug, thiserror::Error)]
#[error("another worker changed the operator registry at the same time")]
pub struct RegistryMoved;

impl SharedSource {
    /// The shared registry, unless it is still at version `known`.
    pub fn fetch(&self, known: Option<&str>) -> Result<Option<Fetched>> {
        let Some((bytes, tag)) = self.mirror.get_tagged(&self.path)? else {
            return Ok(None);
        };
        if known == Some(tag.as_str()) {
            return Ok(None);
        }
        let doc = Document::read(&bytes)
            .with_context(|| format!("the shared registry {} is not valid", self.path.display()))?;
        Ok(Some(Fetched { doc, tag }))
    }
}

impl Fetched {
    /// The versions new epochs would run after installing it: the active
    /// one and the shadow candidate (a follower compiles them first).
    pub fn to_run(&self) -> Vec<Version> {
        let get = |n: u32| self.doc.versions.iter().find(|v| v.number == n).cloned();
        let shadow = self.doc.shadow.as_ref().map(|s| s.version);
        self.doc
            .active
            .into_iter()
            .chain(shadow)
            .filter_map(get)
            .collect()
    }

    /// Its version tag.
    pub fn tag(&self) -> &str {
        &self.tag
    }
}

/// Where events trimmed from the registry file `registry_path` are kept.
fn archive_dir(registry_path: &Path) -> PathBuf {
    registry_path.with_file_name("audit")
}

/// The whole audit trail of the checkpoint at `root`, oldest first: the
/// events moved to `operators/audit/` and those still in the registry
/// (each once, by `seq`). Reads only; empty for a checkpoint without a
/// registry.
pub fn audit_trail(root: &Path) -> Result<Vec<Event>> {
    let Some(registry) = Registry::inspect(root)? else {
        return Ok(Vec::new());
    };
    let mut events = Vec::new();
    let dir = archive_dir(&registry.path);
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    files.sort();
    for file in files {
        let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
        let archived: Vec<Event> = serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not a valid audit archive", file.display()))?;
        events.extend(archived);
    }
    events.extend(registry.doc.events);
    let mut seen = std::collections::HashSet::new();
    events.retain(|e| seen.insert(e.seq));
    events.sort_by_key(|e| e.seq);
    Ok(events)
}

/// How often a change to a shared registry is tried against newer
/// versions before giving up.
const CHANGE_ATTEMPTS: usize = 16;

/// How long a change that lost a race waits before it is tried again:
/// longer after each loss, and jittered, so that workers that collided do
/// not collide again in step.
fn retry_pause(attempt: usize) -> std::time::Duration {
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.subsec_nanos() % 20);
    let steps = attempt.min(5) as u64 + 1;
    std::time::Duration::from_millis(steps * 10 + u64::from(jitter))
}

/// At most this many events are kept in the registry file; older ones
/// move to `operators/audit/`, [`ARCHIVED_AT_ONCE`] at a time.
const EVENTS_KEPT: usize = 1000;
/// How many of the oldest events one trim moves out of the registry.
const ARCHIVED_AT_ONCE: usize = 500;

impl Registry {
    /// Opens (or starts) the registry of the checkpoint at `root`.
    pub fn open(root: &Path) -> Result<Self> {
        let dir = root.join("operators");
        fsutil::create_dir_durable(&dir)?;
        let path = dir.join("registry.json");
        let doc = match std::fs::read(&path) {
            Ok(bytes) => Document::read(&bytes)
                .with_context(|| format!("{} is not a valid registry", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Document::default(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        Ok(Registry {
            path,
            doc,
            actor: None,
            mirror: None,
            shared: None,
        })
    }

    /// The registry a cluster's workers share, at `root/operators/` in
    /// `mirror` (cached under `root`): read from the object store now, and
    /// changed there only by conditional replaces.
    pub fn shared(root: &Path, mirror: Arc<Mirror>) -> Result<Self> {
        let mut registry = Registry::open(root)?;
        registry.doc = Document::default();
        registry.shared = Some(Shared {
            source: SharedSource {
                mirror,
                path: registry.path.clone(),
            },
            tag: None,
        });
        registry.reload()?;
        Ok(registry)
    }

    /// Where the shared registry lives, if this one is shared.
    pub fn shared_source(&self) -> Option<SharedSource> {
        self.shared.as_ref().map(|s| s.source.clone())
    }

    /// The version of the shared registry this one holds.
    pub fn shared_tag(&self) -> Option<&str> {
        self.shared.as_ref().and_then(|s| s.tag.as_deref())
    }

    /// Reads the shared registry again if another worker changed it;
    /// returns whether it did.
    pub fn reload(&mut self) -> Result<bool> {
        let Some(shared) = &self.shared else {
            return Ok(false);
        };
        match shared.source.fetch(shared.tag.as_deref())? {
            Some(fetched) => self.install(fetched),
            None => Ok(false),
        }
    }

    /// Takes up a shared registry read by [`SharedSource::fetch`]; returns
    /// whether it changed anything.
    pub fn install(&mut self, fetched: Fetched) -> Result<bool> {
        let Some(shared) = &mut self.shared else {
            return Ok(false);
        };
        if shared.tag.as_deref() == Some(fetched.tag.as_str())
            || fetched.doc.revision <= self.doc.revision && shared.tag.is_some()
        {
            return Ok(false);
        }
        shared.tag = Some(fetched.tag);
        self.doc = fetched.doc;
        let mut bytes = serde_json::to_vec_pretty(&self.doc)?;
        bytes.push(b'\n');
        fsutil::write_atomic(&self.path, &bytes)?;
        Ok(true)
    }

    /// Writes every change to `mirror` (the shared checkpoint) before the
    /// local file.
    pub fn mirrored(mut self, mirror: Option<Arc<Mirror>>) -> Self {
        self.mirror = mirror;
        self
    }

    /// Reads the registry of the checkpoint at `root` without creating anything.
    pub fn inspect(root: &Path) -> Result<Option<Self>> {
        let path = root.join("operators").join("registry.json");
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(Registry {
                doc: Document::read(&bytes)
                    .with_context(|| format!("{} is not a valid registry", path.display()))?,
                path,
                actor: None,
                mirror: None,
                shared: None,
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    fn save(&mut self) -> Result<()> {
        self.archive_old_events()?;
        self.doc.revision += 1;
        let mut bytes = serde_json::to_vec_pretty(&self.doc)?;
        bytes.push(b'\n');
        if let Some(shared) = &mut self.shared {
            let tag = shared
                .source
                .mirror
                .replace(&self.path, &bytes, shared.tag.as_deref())?;
            shared.tag = Some(tag.ok_or(RegistryMoved)?);
            return fsutil::write_atomic(&self.path, &bytes);
        }
        write_through(self.mirror.as_deref(), &self.path, &bytes)
            .with_context(|| format!("writing {}", self.path.display()))
    }

    fn event(&mut self, action: &str, version: u32, note: Option<String>) {
        self.event_replacing(action, version, None, note);
    }

    /// Records a change, with the digests of the version acted on and of
    /// the one it `replaced`, by the actor of the change being made.
    fn event_replacing(
        &mut self,
        action: &str,
        version: u32,
        replaced: Option<u32>,
        note: Option<String>,
    ) {
        let of = |n: u32| self.get(n).map(|v| (v.digest, v.config_digest));
        let (digest, config_digest) = of(version).unzip();
        let replaced_digest = replaced.and_then(of).map(|(d, _)| d);
        self.doc.events.push(Event {
            seq: self.doc.events.last().map_or(0, |e| e.seq) + 1,
            at_ms: now_ms(),
            action: action.into(),
            version,
            digest,
            config_digest,
            replaced,
            replaced_digest,
            note,
            by: self.actor.clone(),
        });
    }

    /// Records `action` outside any version (a lookup table's refresh
    /// failing), by `actor`.
    pub fn record(&mut self, actor: &Actor, action: &str, note: String) -> Result<()> {
        self.change(actor, |r| {
            r.event(action, 0, Some(note.clone()));
            r.save()
        })
    }

    /// Moves the oldest events to `operators/audit/` once the registry
    /// holds more than [`EVENTS_KEPT`]; they are written before the
    /// registry that no longer holds them, so none is lost in between.
    fn archive_old_events(&mut self) -> Result<()> {
        if self.doc.events.len() <= EVENTS_KEPT {
            return Ok(());
        }
        let old: Vec<Event> = self.doc.events.drain(..ARCHIVED_AT_ONCE).collect();
        // Named by the first and last `seq` it holds: unique, and the same
        // name (and content) if a change that lost a race archives again.
        let (first, last) = (old[0].seq, old[old.len() - 1].seq);
        let path = archive_dir(&self.path).join(format!("{first:020}-{last:020}.json"));
        let mut bytes = serde_json::to_vec_pretty(&old)?;
        bytes.push(b'\n');
        if let Some(dir) = path.parent() {
            fsutil::create_dir_durable(dir)?;
        }
        let mirror = match &self.shared {
            Some(shared) => Some(shared.source.mirror.as_ref()),
            None => self.mirror.as_deref(),
        };
        write_through(mirror, &path, &bytes).with_context(|| format!("writing {}", path.display()))
    }

    /// Applies `change`; if it fails, the registry is as it was. On a
    /// shared registry that another worker changed first, reads theirs
    /// and applies `change` to it again.
    /// Every event it records names `actor`.
    pub fn change<T>(
        &mut self,
        actor: &Actor,
        mut change: impl FnMut(&mut Self) -> Result<T>,
    ) -> Result<T> {
        for attempt in 0..CHANGE_ATTEMPTS {
            let before = self.doc.clone();
            self.actor = Some(actor.clone());
            let changed = change(self);
            self.actor = None;
            match changed {
                Ok(t) => return Ok(t),
                Err(e) => {
                    self.doc = before;
                    if e.downcast_ref::<RegistryMoved>().is_none() {
                        return Err(e);
                    }
                    tracing::info!(
                        "the shared operator registry changed meanwhile; applying the change again"
                    );
                    std::thread::sleep(retry_pause(attempt));
                    self.reload()?;
                }
            }
        }
        bail!(
            "the shared operator registry changed {CHANGE_ATTEMPTS} times while this change was \
             being made; try again"
        )
    }

    /// Every version, oldest first.
    pub fn versions(&self) -> &[Version] {
        &self.doc.versions
    }

    /// The history of changes, oldest first.
    pub fn events(&self) -> &[Event] {
        &self.doc.events
    }

    /// Version `number`.
    pub fn get(&self, number: u32) -> Option<&Version> {
        self.doc.versions.iter().find(|v| v.number == number)
    }

    /// The version with this component, config and artifacts, if
    /// registered.
    pub fn find(&self, operator: &OperatorRef) -> Option<&Version> {
        self.doc
            .versions
            .iter()
            .find(|v| v.operator_ref() == *operator)
    }

    /// The version new epochs run with.
    pub fn active(&self) -> Option<&Version> {
        self.doc.active.and_then(|n| self.get(n))
    }

    /// The shadow candidate, if any.
    pub fn shadow(&self) -> Option<(&Version, &Shadow)> {
        let s = self.doc.shadow.as_ref()?;
        Some((self.get(s.version)?, s))
    }

    /// The version the pipeline file named at the last start.
    pub fn file_version(&self) -> Option<u32> {
        self.doc.file_version
    }

    /// Records the pipeline file's version; returns whether it differs
    /// from the file's version at the last start (the file was edited).
    pub fn set_file_version(&mut self, number: u32) -> Result<bool> {
        let changed = self.doc.file_version != Some(number);
        if changed {
            self.doc.file_version = Some(number);
            self.save()?;
        }
        Ok(changed)
    }

    /// Registers a version (or returns the existing one with the same
    /// component and config). `version` supplies everything but the number.
    pub fn register(&mut self, mut version: Version) -> Result<Version> {
        if let Some(existing) = self.find(&version.operator_ref()) {
            return Ok(existing.clone());
        }
        version.number = self
            .doc
            .versions
            .iter()
            .map(|v| v.number)
            .max()
            .unwrap_or(0)
            + 1;
        self.doc.versions.push(version.clone());
        self.event("register", version.number, version.label.clone());
        self.save()?;
        Ok(version)
    }

    /// Makes `number` the version new epochs run with; the one it replaces
    /// goes on the rollback stack. Activating the active version is a no-op.
    pub fn activate(&mut self, number: u32, action: &str, note: Option<String>) -> Result<()> {
        if self.get(number).is_none() {
            bail!("there is no version {number}");
        }
        if self.doc.active == Some(number) {
            return Ok(());
        }
        let replaced = self.doc.active;
        if let Some(old) = replaced {
            self.doc.previous.push(old);
        }
        self.set_active(number);
        self.event_replacing(action, number, replaced, note);
        self.save()
    }

    /// Makes `number` active; a version cannot be active and in shadow.
    fn set_active(&mut self, number: u32) {
        self.doc.active = Some(number);
        if self
            .doc
            .shadow
            .as_ref()
            .is_some_and(|s| s.version == number)
        {
            self.doc.shadow = None;
        }
    }

    /// The version a plain rollback returns to.
    pub fn previous_version(&self) -> Option<u32> {
        let active = self.doc.active;
        self.doc
            .previous
            .iter()
            .rev()
            .find(|&&n| Some(n) != active)
            .copied()
    }

    /// Goes back to the version active before the current one (or to
    /// `to`); returns the version now active.
    pub fn roll_back(&mut self, to: Option<u32>) -> Result<u32> {
        self.roll_back_as(to, "rollback", None)
    }

    /// [`Registry::roll_back`], recorded in the history as `action` with
    /// `reason` (the engine's automatic rollback of a failing version).
    pub fn roll_back_as(
        &mut self,
        to: Option<u32>,
        action: &str,
        reason: Option<&str>,
    ) -> Result<u32> {
        let active = self.doc.active;
        let target = match to {
            Some(n) => {
                if self.get(n).is_none() {
                    bail!("there is no version {n}");
                }
                n
            }
            None => self
                .previous_version()
                .context("there is no earlier version to roll back to")?,
        };
        if Some(target) == active {
            bail!("version {target} is already active");
        }
        // Rolling back pops the stack down to the target, so that a second
        // rollback goes further back instead of toggling.
        if let Some(pos) = self.doc.previous.iter().rposition(|&n| n == target) {
            self.doc.previous.truncate(pos);
        }
        self.set_active(target);
        self.event_replacing(action, target, active, reason.map(str::to_string));
        self.save()?;
        Ok(target)
    }

    /// Runs `number` in shadow from the next epoch on (replacing any other
    /// candidate); `None` stops shadowing.
    pub fn set_shadow(&mut self, shadow: Option<Shadow>) -> Result<()> {
        match &shadow {
            Some(s) => {
                if self.get(s.version).is_none() {
                    bail!("there is no version {}", s.version);
                }
                if self.doc.active == Some(s.version) {
                    bail!("version {} is the active version", s.version);
                }
                self.event(
                    "shadow",
                    s.version,
                    s.key.clone().map(|k| format!("key {k}")),
                );
            }
            None => {
                let Some(old) = self.doc.shadow.as_ref() else {
                    bail!("no version runs in shadow");
                };
                let n = old.version;
                self.event("unshadow", n, None);
            }
        }
        self.doc.shadow = shadow;
        self.save()
    }

    /// Makes the shadow candidate active; returns its number.
    pub fn promote(&mut self) -> Result<u32> {
        let n = self
            .doc
            .shadow
            .as_ref()
            .map(|s| s.version)
            .context("no version runs in shadow; deploy one with `weir deploy --shadow`")?;
        self.activate(n, "promote", None)?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(component: &str) -> Version {
        Version {
            number: 0,
            digest: Digest::of(component.as_bytes()),
            config_digest: Digest::of(b"{}"),
            artifacts: None,
            registered_ms: 0,
            origin: Origin::Upload { file_name: None },
            label: None,
            size: 1,
            golden: None,
        }
    }

    /// An object store in memory whose tags count the writes: enough to
    /// test the registry's retry logic (the S3 server is in tests/all).
    #[derive(Default)]
    struct Memory(std::sync::Mutex<std::collections::HashMap<String, (Vec<u8>, u64)>>);

    impl weir_core::mirror::Remote for Memory {
        fn url(&self) -> String {
            "memory://".into()
        }
        fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
            Ok(self.get_tagged(key)?.map(|(b, _)| b))
        }
        fn get_tagged(&self, key: &str) -> Result<Option<(Vec<u8>, Tag)>> {
            let objects = self.0.lock().unwrap();
            Ok(objects.get(key).map(|(b, n)| (b.clone(), n.to_string())))
        }
        fn put(&self, _: &str, _: &[u8]) -> Result<()> {
            bail!("the shared registry is only ever replaced conditionally")
        }
        fn create(&self, _: &str, _: &[u8]) -> Result<weir_core::mirror::Created> {
            bail!("unused")
        }
        fn replace(&self, key: &str, bytes: &[u8], tag: Option<&str>) -> Result<Option<Tag>> {
            let mut objects = self.0.lock().unwrap();
            let current = objects.get(key).map(|(_, n)| n.to_string());
            if current.as_deref() != tag {
                return Ok(None);
            }
            let n = current.map_or(1, |c| c.parse::<u64>().unwrap() + 1);
            objects.insert(key.to_string(), (bytes.to_vec(), n));
            Ok(Some(n.to_string()))
        }
        fn list(&self, _: &str) -> Result<Vec<weir_core::mirror::RemoteObject>> {
            bail!("unused")
        }
        fn delete(&self, _: &str) -> Result<()> {
            bail!("unused")
        }
    }

    #[test]
    fn two_workers_changing_a_shared_registry_at_once_keep_both_changes() {
        let remote: Arc<dyn weir_core::mirror::Remote> = Arc::new(Memory::default());
        let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut r1 = Registry::shared(d1.path(), Mirror::new(remote.clone(), d1.path())).unwrap();
        let mut r2 = Registry::shared(d2.path(), Mirror::new(remote.clone(), d2.path())).unwrap();
        let a = r1
            .change(&Actor::named("test"), |r| r.register(version("a")))
            .unwrap();
        r1.change(&Actor::named("test"), |r| {
            r.activate(a.number, "activate", None)
        })
        .unwrap();
        // r2 read the registry before r1's changes: its change is refused
        // once, then made on top of them.
        let b = r2
            .change(&Actor::named("test"), |r| r.register(version("b")))
            .unwrap();
        assert_eq!((a.number, b.number), (1, 2));
        assert_eq!(r2.active().unwrap().number, 1, "r1's activation kept");
        assert!(r1.reload().unwrap(), "r1 sees r2's change");
        assert_eq!(r1.versions().len(), 2);
        assert!(!r1.reload().unwrap(), "nothing new the second time");
        // A read that raced this worker's own later write is not taken up.
        let stale = r1.shared_source().unwrap().fetch(None).unwrap().unwrap();
        r1.change(&Actor::named("test"), |r| r.register(version("c")))
            .unwrap();
        assert!(!r1.install(stale).unwrap(), "an older registry is ignored");
        assert_eq!(r1.versions().len(), 3);
        // A change that fails leaves the registry as it was.
        assert!(r1
            .change(&Actor::named("test"), |r| r.roll_back(Some(9)))
            .is_err());
        assert_eq!(r1.active().unwrap().number, 1);
        // A plain `put` is never used for it: every write is conditional.
        let opened = Registry::shared(d2.path(), Mirror::new(remote, d2.path())).unwrap();
        assert_eq!(opened.versions().len(), 3);
    }

    #[test]
    fn every_event_names_its_actor_and_digests_and_none_is_lost_when_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Registry::open(dir.path()).unwrap();
        let ci = Actor {
            name: "ci-deploy".into(),
            client: Some("127.0.0.1:5000".into()),
        };
        let a = r.change(&ci, |r| r.register(version("a"))).unwrap();
        let b = r.change(&ci, |r| r.register(version("b"))).unwrap();
        r.change(&ci, |r| r.activate(a.number, "activate", None))
            .unwrap();
        r.change(&Actor::engine(), |r| r.activate(b.number, "activate", None))
            .unwrap();
        let last = r.events().last().unwrap().clone();
        assert_eq!(last.by.as_ref().unwrap().name, "engine");
        assert_eq!(last.digest, Some(b.digest));
        assert_eq!(
            (last.replaced, last.replaced_digest),
            (Some(a.number), Some(a.digest))
        );
        assert_eq!(r.events()[0].by, Some(ci.clone()));
        for i in 0..EVENTS_KEPT {
            let n = [a.number, b.number][i % 2];
            r.change(&ci, |r| r.activate(n, "activate", None)).unwrap();
        }
        assert!(r.events().len() <= EVENTS_KEPT);
        let trail = audit_trail(dir.path()).unwrap();
        assert_eq!(trail.len(), EVENTS_KEPT + 4, "every event kept, once");
        let seqs: Vec<u64> = trail.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=EVENTS_KEPT as u64 + 4).collect::<Vec<_>>());
    }

    #[test]
    fn events_recorded_before_numbering_are_numbered_and_archived_without_loss() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Registry::open(dir.path()).unwrap();
        let a = r.register(version("a")).unwrap().number;
        // A registry as older versions wrote it: a full list of events
        // without `seq`.
        let old = Event {
            seq: 0,
            at_ms: 1,
            action: "activate".into(),
            version: a,
            digest: None,
            config_digest: None,
            replaced: None,
            replaced_digest: None,
            note: None,
            by: None,
        };
        r.doc.events = vec![old; EVENTS_KEPT];
        r.save().unwrap();
        let mut r = Registry::open(dir.path()).unwrap();
        assert_eq!(r.events()[EVENTS_KEPT - 1].seq, EVENTS_KEPT as u64);
        for _ in 0..=ARCHIVED_AT_ONCE {
            r.record(&Actor::engine(), "x", "n".into()).unwrap();
        }
        let trail = audit_trail(dir.path()).unwrap();
        assert_eq!(trail.len(), EVENTS_KEPT + ARCHIVED_AT_ONCE + 1, "none lost");
        let archives = std::fs::read_dir(dir.path().join("operators/audit"))
            .unwrap()
            .count();
        assert_eq!(archives, 2);
    }

    #[test]
    fn versions_are_numbered_once_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Registry::open(dir.path()).unwrap();
        assert_eq!(r.register(version("a")).unwrap().number, 1);
        assert_eq!(r.register(version("b")).unwrap().number, 2);
        assert_eq!(r.register(version("a")).unwrap().number, 1);
        r.activate(2, "activate", None).unwrap();
        let r = Registry::open(dir.path()).unwrap();
        assert_eq!(r.versions().len(), 2);
        assert_eq!(r.active().unwrap().digest, Digest::of(b"b"));
    }

    #[test]
    fn rollback_walks_back_and_does_not_toggle() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Registry::open(dir.path()).unwrap();
        for d in ["a", "b", "c"] {
            let v = r.register(version(d)).unwrap();
            r.activate(v.number, "activate", None).unwrap();
        }
        assert_eq!(r.roll_back(None).unwrap(), 2);
        assert_eq!(r.roll_back(None).unwrap(), 1);
        assert!(r.roll_back(None).is_err());
        assert_eq!(r.roll_back(Some(3)).unwrap(), 3);
        assert!(r.roll_back(Some(3)).is_err());
        assert!(r.roll_back(Some(9)).is_err());
    }

    #[test]
    fn shadow_is_promoted_and_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Registry::open(dir.path()).unwrap();
        let a = r.register(version("a")).unwrap().number;
        let b = r.register(version("b")).unwrap().number;
        r.activate(a, "activate", None).unwrap();
        assert!(r
            .set_shadow(Some(Shadow {
                version: a,
                key: None
            }))
            .is_err());
        r.set_shadow(Some(Shadow {
            version: b,
            key: Some("txn_id".into()),
        }))
        .unwrap();
        assert_eq!(r.shadow().unwrap().0.number, b);
        assert_eq!(r.promote().unwrap(), b);
        assert!(r.shadow().is_none());
        assert_eq!(r.active().unwrap().number, b);
        assert!(r.promote().is_err());
    }
}
