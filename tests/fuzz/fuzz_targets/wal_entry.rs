//! Offset and commit log entries read back from disk, on arbitrary bytes
//! (a damaged or hand-edited checkpoint): never a panic, and an entry that
//! reads writes back to the same entry.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_core::wal::{decode_entry, CommitEntry, Compacted, OffsetEntry};

fuzz_target!(|data: &[u8]| {
    if let Ok(entry) = decode_entry::<OffsetEntry>(data) {
        let again = serde_json::to_vec(&entry).expect("an entry serializes");
        assert_eq!(decode_entry::<OffsetEntry>(&again).ok(), Some(entry));
    }
    if let Ok(entry) = decode_entry::<CommitEntry>(data) {
        let again = serde_json::to_vec(&entry).expect("an entry serializes");
        assert_eq!(decode_entry::<CommitEntry>(&again).ok(), Some(entry));
    }
    let _ = decode_entry::<Compacted>(data);
});
