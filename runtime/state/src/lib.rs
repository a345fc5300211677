//! Keyed state owned by the host: operators' history ("payments on this card
//! in the last 60 s") and the host's own (dedup), kept in RocksDB under
//! `checkpoint/state/` and advanced with the epochs, so it is exactly as
//! durable and as replayable as the output.
//!
//! [`store`] is the database and its epoch protocol (atomic commit with a
//! marker, undo of an uncommitted epoch, snapshots); [`epoch`] is what one
//! epoch reads and writes before it is committed.

pub mod epoch;
pub mod store;

pub use epoch::{namespace_prefix, Changes, EpochState};
pub use store::{Opened, SnapshotPolicy, StateReader, StateStore};
