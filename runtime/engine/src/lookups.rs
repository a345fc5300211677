//! The pipeline's reference tables (`[[lookup]]`), versioned like
//! operators: each loaded version is kept in the checkpoint's blobs under
//! its content digest, and each epoch's `offsets/N` records the versions it
//! reads. A refresh (a changed file, or a query run again, every
//! `refresh`) takes
//! effect at the next epoch planned; a replay reads the versions its epoch
//! recorded, from the blobs. A bad new version (a repeated key, a value of
//! the wrong type, an unreadable file) keeps the one before, says so and is
//! counted; at start it fails the pipeline, naming the table and row.

use crate::config::lookup::LookupConfig;
use anyhow::{Context, Result};
use arrow_schema::SchemaRef;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Instant, SystemTime};
use weir_connectors::lookup::postgres::query_table;
use weir_connectors::lookup::read_table;
use weir_core::checkpoint::Checkpoint;
use weir_core::json::{JsonDecoder, MalformedPolicy};
use weir_core::lookup::{EpochTables, LookupTable};
use weir_core::Digest;

/// One declared table and its newest version.
struct Declared {
    cfg: LookupConfig,
    schema: SchemaRef,
    current: Arc<LookupTable>,
    /// The file's modification time and size when `current` was read.
    stamp: Option<(SystemTime, u64)>,
    /// When the file was last looked at.
    checked: Instant,
    /// Whether its last refresh failed (a failure is reported once, not
    /// at every refresh until the table loads again).
    failing: bool,
}

/// A table whose refresh failed after the one before had not.
#[derive(Debug, Clone)]
pub struct RefreshFailure {
    pub lookup: String,
    /// The version epochs keep reading.
    pub kept: Digest,
    pub error: String,
}

/// Every declared table: the newest versions, and older ones epochs read.
pub struct LookupSet {
    tables: Vec<Declared>,
    /// Versions by digest, for replays of epochs planned before a refresh.
    versions: HashMap<Digest, Arc<LookupTable>>,
    /// Refreshes that failed and kept the version before.
    pub failed_refreshes: u64,
}

/// A file's modification time and size, to tell a changed file (`None`
/// for a query, which is run again whenever its refresh is due).
fn stamp_of(cfg: &LookupConfig) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(cfg.path.as_ref()?).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// The table's rows now: the file read, or the query run.
fn fetch(cfg: &LookupConfig, schema: &SchemaRef) -> Result<arrow_array::RecordBatch> {
    match (&cfg.path, &cfg.query) {
        (Some(path), _) => {
            let data =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            read_table(path, data, schema)
        }
        (None, Some(query)) => query_table(&cfg.connection_string()?, query, schema),
        (None, None) => anyhow::bail!("lookup `{}` has neither `path` nor `query`", cfg.name),
    }
}

/// Reads `cfg`'s rows as a table version and keeps it in the blobs, unless
/// it is the version `current` (a refresh that found the same content
/// writes nothing).
fn load(
    cfg: &LookupConfig,
    schema: &SchemaRef,
    checkpoint: &Checkpoint,
    current: Option<Digest>,
) -> Result<LookupTable> {
    let rows = fetch(cfg, schema)?;
    // Kept as JSON lines of the declared columns: the same rows give the
    // same bytes, whichever file format they came from.
    let canonical = weir_core::sink::to_json_lines(std::slice::from_ref(&rows))?;
    let table = LookupTable::new(&cfg.name, &cfg.key, rows, &canonical)?;
    if current != Some(table.digest()) {
        checkpoint.put_blob(&canonical)?;
    }
    Ok(table)
}

/// A version of table `cfg` kept in the blobs as `digest`.
fn from_blob(
    cfg: &LookupConfig,
    schema: &SchemaRef,
    digest: &Digest,
    checkpoint: &Checkpoint,
) -> Result<LookupTable> {
    let canonical = checkpoint.get_blob(digest)?;
    let decoder = JsonDecoder::new(schema.clone(), usize::MAX >> 1, MalformedPolicy::Fail);
    let batches = decoder
        .decode_lines(
            &canonical,
            &format!("lookup `{}` version {digest}", cfg.name),
        )?
        .batches;
    let rows = arrow_select::concat::concat_batches(schema, &batches)?;
    LookupTable::new(&cfg.name, &cfg.key, rows, &canonical)
}

impl LookupSet {
    /// Loads every declared table; one that cannot be loaded fails the
    /// start, naming the table (and the row, for bad data).
    pub fn open(configs: &[LookupConfig], checkpoint: &Checkpoint) -> Result<Self> {
        let mut set = LookupSet {
            tables: Vec::new(),
            versions: HashMap::new(),
            failed_refreshes: 0,
        };
        for cfg in configs {
            let schema = weir_core::schema::arrow_schema(&cfg.schema);
            let stamp = stamp_of(cfg);
            let table = Arc::new(
                load(cfg, &schema, checkpoint, None)
                    .with_context(|| format!("loading lookup table `{}`", cfg.name))?,
            );
            tracing::info!(lookup = %cfg.name, rows = table.len(), version = %table.digest(), "lookup table loaded");
            set.versions.insert(table.digest(), table.clone());
            set.tables.push(Declared {
                cfg: cfg.clone(),
                schema,
                current: table,
                stamp,
                checked: Instant::now(),
                failing: false,
            });
        }
        Ok(set)
    }

    /// Loads new versions of the tables whose file changed, where their
    /// `refresh` is due. A version that fails to load keeps the one before;
    /// returns the tables that began failing (counted in `failed_refreshes`
    /// at every failure).
    pub fn refresh(&mut self, checkpoint: &Checkpoint) -> Vec<RefreshFailure> {
        let mut began_failing = Vec::new();
        for d in &mut self.tables {
            if d.cfg.refresh.is_zero() || d.checked.elapsed() < d.cfg.refresh {
                continue;
            }
            d.checked = Instant::now();
            let stamp = stamp_of(&d.cfg);
            if d.cfg.path.is_some() && stamp == d.stamp {
                continue;
            }
            let loaded = load(&d.cfg, &d.schema, checkpoint, Some(d.current.digest()));
            // Whatever came of it, looked at again only once the file
            // changes again.
            d.stamp = stamp;
            let was_failing = std::mem::replace(&mut d.failing, loaded.is_err());
            match loaded {
                Ok(table) if table.digest() == d.current.digest() => {}
                Ok(table) => {
                    tracing::info!(lookup = %d.cfg.name, rows = table.len(), version = %table.digest(), "lookup table refreshed; the next epoch reads it");
                    let table = Arc::new(table);
                    self.versions.insert(table.digest(), table.clone());
                    d.current = table;
                }
                Err(e) => {
                    self.failed_refreshes += 1;
                    if !was_failing {
                        began_failing.push(RefreshFailure {
                            lookup: d.cfg.name.clone(),
                            kept: d.current.digest(),
                            error: format!("{e:#}"),
                        });
                    }
                    tracing::warn!(
                        lookup = %d.cfg.name,
                        version = %d.current.digest(),
                        "lookup table refresh failed; epochs keep reading the version before: {e:#}"
                    );
                }
            }
        }
        began_failing
    }

    /// The newest version of every table, as an epoch would read them
    /// (for a deploy's checks).
    pub fn current(&self) -> Arc<EpochTables> {
        Arc::new(
            self.tables
                .iter()
                .map(|d| (d.cfg.name.clone(), d.current.clone()))
                .collect(),
        )
    }

    /// The newest version of every table, for the next `offsets/N`.
    pub fn versions(&self) -> BTreeMap<String, Digest> {
        self.tables
            .iter()
            .map(|d| (d.cfg.name.clone(), d.current.digest()))
            .collect()
    }

    /// The tables an epoch reads: the versions `recorded` in its
    /// `offsets/N`, from memory or the checkpoint's blobs.
    pub fn for_epoch(
        &mut self,
        recorded: &BTreeMap<String, Digest>,
        checkpoint: &Checkpoint,
    ) -> Result<Arc<EpochTables>> {
        let mut tables = EpochTables::new();
        for (name, digest) in recorded {
            let table = match self.versions.get(digest) {
                Some(t) => t.clone(),
                None => {
                    let d = self
                        .tables
                        .iter()
                        .find(|d| &d.cfg.name == name)
                        .with_context(|| {
                            format!(
                                "the epoch read lookup table `{name}`, which the pipeline no \
                                 longer declares; declare it again to replay the epoch"
                            )
                        })?;
                    let t = Arc::new(
                        from_blob(&d.cfg, &d.schema, digest, checkpoint).with_context(|| {
                            format!("reading version {digest} of lookup table `{name}`")
                        })?,
                    );
                    self.versions.insert(*digest, t.clone());
                    t
                }
            };
            tables.insert(name.clone(), table);
        }
        Ok(Arc::new(tables))
    }
}
