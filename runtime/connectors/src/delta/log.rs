//! The Delta log, as much of it as an appending writer needs: the table's
//! newest version, schema and protocol, and the newest `txn` version of
//! every application id — read from the newest checkpoint (Parquet, as
//! Spark and delta-rs write them) and the JSON commits after it. Commits
//! are built here too: one JSON object per line, as PROTOCOL.md has them.

use super::schema::DeltaSchema;
use super::store::TableStore;
use anyhow::{bail, Context, Result};
use arrow_array::RecordBatch;
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};

/// The log's directory under the table root.
pub const LOG_DIR: &str = "_delta_log";

/// The reader and writer versions of the tables Weir creates: plain
/// Parquet data, column invariants (none) and append-only writes.
const READER_VERSION: u64 = 1;
const WRITER_VERSION: u64 = 2;

/// Writer features (protocol 7) an appending writer honours by appending
/// alone; a table that needs any other is refused rather than corrupted.
const WRITER_FEATURES_HONOURED: &[&str] = &["appendOnly"];

/// The key of commit `version`.
pub fn commit_key(version: u64) -> String {
    format!("{LOG_DIR}/{version:020}.json")
}

/// What the sink knows of a table from its log.
#[derive(Debug, Default, Clone)]
pub struct TableState {
    /// The newest version read (`None`: the table does not exist yet).
    pub version: Option<u64>,
    pub schema: Option<DeltaSchema>,
    pub partition_columns: Vec<String>,
    /// `(minReaderVersion, minWriterVersion, writerFeatures)`.
    pub protocol: Option<(u64, u64, Vec<String>)>,
    /// The newest `txn` version of each application id.
    pub txns: HashMap<String, u64>,
}

impl TableState {
    /// The table's state from its log: the newest complete checkpoint,
    /// then every commit after it.
    pub fn load(store: &TableStore) -> Result<Self> {
        let listing = store.list(LOG_DIR)?;
        let mut commits = Vec::new();
        let mut checkpoints: BTreeMap<u64, Vec<(String, Option<u64>)>> = BTreeMap::new();
        for key in &listing {
            let name = key.rsplit('/').next().unwrap_or(key);
            match parse_log_name(name) {
                Some(LogFile::Commit(v)) => commits.push(v),
                Some(LogFile::Checkpoint { version, parts }) => checkpoints
                    .entry(version)
                    .or_default()
                    .push((key.clone(), parts)),
                Some(LogFile::V2Checkpoint(_)) => bail!(
                    "the Delta table {} has a V2 checkpoint ({name}), which Weir's Delta sink \
                     cannot read yet",
                    store.url()
                ),
                None => {}
            }
        }
        let complete = checkpoints.into_iter().rev().find(|(_, parts)| {
            match parts.first().and_then(|p| p.1) {
                None => parts.len() == 1,
                Some(n) => parts.len() as u64 == n,
            }
        });
        let mut state = TableState::default();
        if let Some((version, mut parts)) = complete {
            parts.sort();
            for (key, _) in parts {
                let bytes = store
                    .get(&key)?
                    .with_context(|| format!("checkpoint {key} was listed, then missing"))?;
                state
                    .apply_checkpoint(bytes.into())
                    .with_context(|| format!("reading checkpoint {key} of {}", store.url()))?;
            }
            state.version = Some(version);
        } else if let Some(&first) = commits.iter().min() {
            if first != 0 {
                bail!(
                    "the Delta table {}'s log starts at version {first} without a checkpoint \
                     before it",
                    store.url()
                );
            }
        }
        state.catch_up(store)?;
        Ok(state)
    }

    /// Reads the commits after the newest one read, until there are no more.
    pub fn catch_up(&mut self, store: &TableStore) -> Result<()> {
        loop {
            let next = self.version.map_or(0, |v| v + 1);
            let Some(bytes) = store.get(&commit_key(next))? else {
                return Ok(());
            };
            self.apply_commit(next, &bytes)
                .with_context(|| format!("reading version {next} of {}", store.url()))?;
        }
    }

    /// Applies commit `version` (its JSON lines).
    pub fn apply_commit(&mut self, version: u64, bytes: &[u8]) -> Result<()> {
        for line in bytes.split(|&b| b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let action: Value =
                serde_json::from_slice(line).context("a log line that is not JSON")?;
            self.apply(&action)?;
        }
        self.version = Some(version);
        Ok(())
    }

    /// Applies a checkpoint's rows: only its `txn`, `metaData` and
    /// `protocol` columns are read.
    fn apply_checkpoint(&mut self, bytes: Bytes) -> Result<()> {
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)?;
        let roots: Vec<usize> = builder
            .schema()
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| ["txn", "metaData", "protocol"].contains(&f.name().as_str()))
            .map(|(i, _)| i)
            .collect();
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
        let batches: Vec<RecordBatch> = builder
            .with_projection(mask)
            .build()?
            .collect::<Result<_, _>>()?;
        // Each row as JSON holds the one action it carries (null columns
        // are left out): the same form as a commit's lines.
        let lines = weir_core::sink::to_json_lines(&batches)?;
        for line in lines.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            self.apply(&serde_json::from_slice(line)?)?;
        }
        Ok(())
    }

    fn apply(&mut self, action: &Value) -> Result<()> {
        if let Some(txn) = action.get("txn").filter(|t| !t.is_null()) {
            let (Some(app), Some(version)) = (txn["appId"].as_str(), txn["version"].as_u64())
            else {
                bail!("a txn action without appId and version: {txn}");
            };
            let newest = self.txns.entry(app.to_string()).or_insert(version);
            *newest = (*newest).max(version);
        }
        if let Some(meta) = action.get("metaData").filter(|m| !m.is_null()) {
            let schema = meta["schemaString"]
                .as_str()
                .context("metaData without schemaString")?;
            self.schema = Some(serde_json::from_str(schema).context("metaData's schemaString")?);
            self.partition_columns = meta["partitionColumns"]
                .as_array()
                .map(|cols| {
                    cols.iter()
                        .filter_map(|c| c.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
        }
        if let Some(p) = action.get("protocol").filter(|p| !p.is_null()) {
            let features = p["writerFeatures"]
                .as_array()
                .map(|f| {
                    f.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            self.protocol = Some((
                p["minReaderVersion"].as_u64().unwrap_or(1),
                p["minWriterVersion"].as_u64().unwrap_or(1),
                features,
            ));
        }
        Ok(())
    }

    /// Refuses a table this writer could corrupt: one that needs writer
    /// features beyond appending, or one partitioned by columns.
    pub fn check_writable(&self, url: &str) -> Result<()> {
        if let Some((_, writer, features)) = &self.protocol {
            let unknown: Vec<&String> = features
                .iter()
                .filter(|f| !WRITER_FEATURES_HONOURED.contains(&f.as_str()))
                .collect();
            if (3..7).contains(writer) || !unknown.is_empty() {
                bail!(
                    "the Delta table {url} needs writer version {writer}{}; Weir's Delta sink \
                     appends to tables of writer version 2 (or 7 with appendOnly only)",
                    if unknown.is_empty() {
                        String::new()
                    } else {
                        format!(" with features {unknown:?}")
                    }
                );
            }
        }
        if !self.partition_columns.is_empty() {
            bail!(
                "the Delta table {url} is partitioned by {:?}; Weir's Delta sink writes \
                 unpartitioned tables",
                self.partition_columns
            );
        }
        Ok(())
    }
}

/// A file in the log directory, by its name.
#[derive(Debug, PartialEq, Eq)]
enum LogFile {
    Commit(u64),
    /// A classic checkpoint, single (`parts: None`) or one of `parts`.
    Checkpoint {
        version: u64,
        parts: Option<u64>,
    },
    V2Checkpoint(u64),
}

fn parse_log_name(name: &str) -> Option<LogFile> {
    let (digits, rest) = name.split_at_checked(20)?;
    let version: u64 = digits.parse().ok()?;
    let rest: Vec<&str> = rest.split('.').collect();
    match rest.as_slice() {
        ["", "json"] => Some(LogFile::Commit(version)),
        ["", "checkpoint", "parquet"] => Some(LogFile::Checkpoint {
            version,
            parts: None,
        }),
        ["", "checkpoint", part, of, "parquet"] if part.len() == 10 && of.len() == 10 => {
            Some(LogFile::Checkpoint {
                version,
                parts: of.parse().ok(),
            })
        }
        ["", "checkpoint", _uuid, "json" | "parquet"] => Some(LogFile::V2Checkpoint(version)),
        _ => None,
    }
}

/// What a commit holds besides its actions' content.
pub struct CommitInfo<'a> {
    pub query_id: &'a str,
    pub epoch: u64,
    pub now_ms: i64,
}

/// The `protocol` and `metaData` actions that create a table of `schema`.
pub fn create_actions(schema: &DeltaSchema, now_ms: i64) -> Result<Vec<Value>> {
    Ok(vec![
        json!({"protocol": {"minReaderVersion": READER_VERSION, "minWriterVersion": WRITER_VERSION}}),
        json!({"metaData": {
            "id": uuid::Uuid::new_v4().to_string(),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": serde_json::to_string(schema)?,
            "partitionColumns": [],
            "configuration": {},
            "createdTime": now_ms,
        }}),
    ])
}

/// The lines of the commit that appends data file `path` (`size` bytes,
/// `rows` rows) as epoch `info.epoch` of application `app_id`, after
/// `extra` actions (a new table's protocol and metadata).
pub fn append_commit(
    info: &CommitInfo<'_>,
    app_id: &str,
    path: &str,
    size: u64,
    rows: u64,
    extra: Vec<Value>,
) -> Vec<u8> {
    let mut actions = vec![json!({"commitInfo": {
        "timestamp": info.now_ms,
        "operation": "STREAMING UPDATE",
        "operationParameters": {
            "outputMode": "Append",
            "queryId": info.query_id,
            "epochId": info.epoch.to_string(),
        },
        "isBlindAppend": true,
        "engineInfo": concat!("Weir/", env!("CARGO_PKG_VERSION")),
    }})];
    actions.extend(extra);
    actions.push(json!({"add": {
        "path": path,
        "partitionValues": {},
        "size": size,
        "modificationTime": info.now_ms,
        "dataChange": true,
        "stats": json!({"numRecords": rows}).to_string(),
    }}));
    actions.push(json!({"txn": {
        "appId": app_id,
        "version": info.epoch,
        "lastUpdated": info.now_ms,
    }}));
    let mut out = Vec::new();
    for a in actions {
        out.extend_from_slice(a.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_names_are_told_apart() {
        assert_eq!(
            parse_log_name("00000000000000000007.json"),
            Some(LogFile::Commit(7))
        );
        assert_eq!(
            parse_log_name("00000000000000000010.checkpoint.parquet"),
            Some(LogFile::Checkpoint {
                version: 10,
                parts: None
            })
        );
        assert_eq!(
            parse_log_name("00000000000000000010.checkpoint.0000000001.0000000002.parquet"),
            Some(LogFile::Checkpoint {
                version: 10,
                parts: Some(2)
            })
        );
        assert_eq!(
            parse_log_name(
                "00000000000000000010.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json"
            ),
            Some(LogFile::V2Checkpoint(10))
        );
        for other in [
            "_last_checkpoint",
            "00000000000000000010.crc",
            ".tmp",
            "7.json",
        ] {
            assert_eq!(parse_log_name(other), None, "{other}");
        }
    }

    #[test]
    fn commits_carry_the_epoch_as_a_txn_and_replaying_them_gives_the_state() {
        let schema = DeltaSchema {
            kind: "struct".into(),
            fields: vec![],
        };
        let info = CommitInfo {
            query_id: "q",
            epoch: 4,
            now_ms: 1,
        };
        let create = create_actions(&schema, 1).unwrap();
        let first = append_commit(&info, "q", "part-a.parquet", 10, 2, create);
        let mut state = TableState::default();
        state.apply_commit(0, &first).unwrap();
        assert_eq!(state.version, Some(0));
        assert_eq!(state.txns["q"], 4);
        assert_eq!(state.schema, Some(schema));
        assert_eq!(state.protocol, Some((1, 2, vec![])));
        state.check_writable("t").unwrap();
        let second = append_commit(
            &CommitInfo { epoch: 5, ..info },
            "q",
            "part-b.parquet",
            10,
            2,
            vec![],
        );
        state.apply_commit(1, &second).unwrap();
        assert_eq!((state.version, state.txns["q"]), (Some(1), 5));
    }
}
