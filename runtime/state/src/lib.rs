//! Keyed state owned by the host: operators' history ("payments on this card
//! in the last 60 s") and the host's own (dedup), kept in RocksDB under
//! `checkpoint/state/` and advanced with the epochs, so it is exactly as
//! durable and as replayable as the output.
//!
//! [`key_groups`] divides the state among a pipeline's tasks;
//! [`store`] is the database and its epoch protocol (atomic commit with a
//! marker, undo of an uncommitted epoch, snapshots); [`epoch`] is what one
//! epoch reads and writes before it is committed; [`scan`], [`lists`] and
//! [`timers`] are range scans, append-only lists and event-time timers on
//! top of it.

pub mod epoch;
pub mod key_groups;
pub mod lists;
pub mod scan;
pub mod store;
pub mod timers;
pub mod verify;

pub use epoch::{namespace_prefix, Changes, EpochState};
pub use key_groups::{group_of_key, key_group, KeyGroups, GROUPED_KEY, KEY_GROUPS};
pub use lists::ListSpace;
pub use scan::prefix_end;
pub use store::{
    Opened, SnapshotPolicy, StateReader, StateStore, StoreOptions, DEFAULT_STATE_MEMORY,
    MIN_STATE_MEMORY,
};
pub use timers::{Fired, TimerSpace};
