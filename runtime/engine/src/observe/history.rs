//! The progress records of the last epochs, kept in memory for the API and
//! under `checkpoint/progress/<epoch>.json` so a restarted pipeline (and
//! its dashboard) still shows what came before. Like Spark's
//! `recentProgress`, this is for people: a record lost in a crash costs
//! nothing, so the files are renamed into place but not synced.

use anyhow::{Context, Result};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use weir_core::progress::EpochProgress;

/// The newest records, oldest first.
pub struct History {
    dir: PathBuf,
    retain: usize,
    records: VecDeque<EpochProgress>,
}

fn file_name(epoch: u64) -> String {
    format!("{epoch:010}.json")
}

fn epoch_of(name: &str) -> Option<u64> {
    name.strip_suffix(".json")?.parse().ok()
}

impl History {
    /// Opens `dir` and loads the newest `retain` records in it (unreadable
    /// ones are skipped with a warning: they only feed the dashboard).
    pub fn open(dir: &Path, retain: usize) -> Result<Self> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the progress directory {}", dir.display()))?;
        let mut epochs: Vec<u64> = std::fs::read_dir(dir)
            .with_context(|| format!("listing {}", dir.display()))?
            .filter_map(|e| epoch_of(e.ok()?.file_name().to_str()?))
            .collect();
        epochs.sort_unstable();
        let mut history = History {
            dir: dir.to_path_buf(),
            retain: retain.max(1),
            records: VecDeque::new(),
        };
        let skip = epochs.len().saturating_sub(history.retain);
        for epoch in &epochs[skip..] {
            let path = dir.join(file_name(*epoch));
            match std::fs::read(&path)
                .map_err(anyhow::Error::from)
                .and_then(|b| Ok(serde_json::from_slice::<EpochProgress>(&b)?))
            {
                Ok(p) => history.records.push_back(p),
                Err(e) => tracing::warn!(path = %path.display(), "skipping progress record: {e:#}"),
            }
        }
        for epoch in &epochs[..skip] {
            let _ = std::fs::remove_file(dir.join(file_name(*epoch)));
        }
        Ok(history)
    }

    /// Adds (or, for a replayed epoch, replaces) a record and drops the
    /// oldest beyond the retention.
    pub fn push(&mut self, p: &EpochProgress) {
        self.records.retain(|r| r.epoch != p.epoch);
        self.records.push_back(p.clone());
        if let Err(e) = self.write(p) {
            tracing::warn!(epoch = p.epoch, "could not keep the progress record: {e:#}");
        }
        while self.records.len() > self.retain {
            if let Some(old) = self.records.pop_front() {
                let _ = std::fs::remove_file(self.dir.join(file_name(old.epoch)));
            }
        }
    }

    fn write(&self, p: &EpochProgress) -> Result<()> {
        let path = self.dir.join(file_name(p.epoch));
        let temp = self.dir.join(format!(".{}.tmp", file_name(p.epoch)));
        std::fs::write(&temp, serde_json::to_vec(p)?)?;
        std::fs::rename(&temp, &path)?;
        Ok(())
    }

    /// Records after epoch `after` (all with `None`), at most the newest
    /// `limit`, oldest first.
    pub fn since(&self, after: Option<u64>, limit: usize) -> Vec<EpochProgress> {
        let newer: Vec<&EpochProgress> = self
            .records
            .iter()
            .filter(|r| after.is_none_or(|a| r.epoch > a))
            .collect();
        let skip = newer.len().saturating_sub(limit);
        newer[skip..].iter().map(|r| (*r).clone()).collect()
    }

    /// The newest `n` records, oldest first.
    pub fn last(&self, n: usize) -> Vec<&EpochProgress> {
        let skip = self.records.len().saturating_sub(n);
        self.records.iter().skip(skip).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_records_across_a_reopen_and_replaces_replays() {
        let dir = tempfile::tempdir().unwrap();
        let mut h = History::open(dir.path(), 3).unwrap();
        for n in 0..5 {
            let mut p = EpochProgress::sample(n);
            p.rows_in = n * 10;
            h.push(&p);
        }
        let epochs = |h: &History| {
            h.last(usize::MAX)
                .iter()
                .map(|p| p.epoch)
                .collect::<Vec<_>>()
        };
        assert_eq!(epochs(&h), [2, 3, 4]);
        let mut replay = EpochProgress::sample(4);
        replay.replay = true;
        h.push(&replay);
        assert_eq!(epochs(&h), [2, 3, 4], "a replay replaces its epoch");
        assert_eq!(h.since(Some(2), 1).len(), 1);
        assert_eq!(h.since(Some(2), 1)[0].epoch, 4);
        std::fs::write(dir.path().join("0000000099.json"), b"not json").unwrap();
        let h = History::open(dir.path(), 3).unwrap();
        assert_eq!(epochs(&h), [3, 4], "unreadable records are skipped");
        assert!(h.last(1)[0].replay);
        let on_disk = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(on_disk, 3, "older files are removed");
    }
}
