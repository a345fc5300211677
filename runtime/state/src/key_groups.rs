//! Key groups: how a pipeline's keyed state is divided among its tasks,
//! after Flink's max parallelism.
//!
//! Every state key falls in one of [`KEY_GROUPS`] groups by a fixed hash of
//! its bytes ([`key_group`]); task `t` of `n` owns one contiguous range of
//! groups ([`KeyGroups::of_task`]). Rows reach the task that owns the
//! group of their routing key, so a task only ever touches its own groups,
//! and changing the number of tasks moves whole ranges of groups between
//! tasks — no key is rehashed and nothing stored moves.
//!
//! The hash decides where stored state belongs, so it is part of the
//! checkpoint format: `xxh3_64` of the key's bytes, modulo [`KEY_GROUPS`],
//! never to change for a checkpoint once written.

use std::fmt;
pub use weir_core::key_group::{key_group, KEY_GROUPS};

/// The first bytes of a state, list or timer key that names its key group
/// in the two bytes after them (big-endian). An operator whose key holds
/// many routing keys — a window SDK's list of every card's window ending
/// at one time — keeps one such key per group instead, and each task
/// touches the one of its own group.
pub const GROUPED_KEY: &[u8; 3] = b"\xffkg";

/// The key group a state, list or timer key is in: the group it names
/// after [`GROUPED_KEY`], else the group of its bytes ([`key_group`]), so
/// that state keyed by the routing key itself is where its rows go.
pub fn group_of_key(key: &[u8]) -> u16 {
    match key.strip_prefix(GROUPED_KEY.as_slice()) {
        Some([hi, lo, ..]) => u16::from_be_bytes([*hi, *lo]) % KEY_GROUPS,
        _ => key_group(key),
    }
}

/// The key groups one task owns: `start..end` of [`KEY_GROUPS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyGroups {
    /// This task's index, from 0.
    pub task: u16,
    /// How many tasks share the state.
    pub tasks: u16,
    /// First group owned.
    pub start: u16,
    /// One past the last group owned.
    pub end: u16,
}

impl KeyGroups {
    /// The groups task `task` of `tasks` owns (Flink's assignment:
    /// contiguous ranges of nearly equal size, in task order). `tasks` must
    /// be between 1 and [`KEY_GROUPS`] and `task` below it.
    pub fn of_task(task: u16, tasks: u16) -> Self {
        let tasks = tasks.clamp(1, KEY_GROUPS);
        let task = task.min(tasks - 1);
        let g = u32::from(KEY_GROUPS);
        let (t, n) = (u32::from(task), u32::from(tasks));
        KeyGroups {
            task,
            tasks,
            start: (t * g).div_ceil(n) as u16,
            end: ((t + 1) * g).div_ceil(n) as u16,
        }
    }

    /// The task of `tasks` that owns `group`.
    pub fn owner(group: u16, tasks: u16) -> u16 {
        let tasks = tasks.clamp(1, KEY_GROUPS);
        (u32::from(group) * u32::from(tasks) / u32::from(KEY_GROUPS)) as u16
    }

    /// Whether this task owns `group`.
    pub fn owns(&self, group: u16) -> bool {
        (self.start..self.end).contains(&group)
    }

    /// Whether this task owns the group of the state key `key`
    /// ([`group_of_key`]).
    pub fn owns_key(&self, key: &[u8]) -> bool {
        self.owns(group_of_key(key))
    }
}

impl fmt::Display for KeyGroups {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "key groups {}–{}",
            self.start,
            self.end.saturating_sub(1)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_group_has_exactly_one_owner_at_every_task_count() {
        for tasks in 1..=KEY_GROUPS {
            let ranges: Vec<_> = (0..tasks).map(|t| KeyGroups::of_task(t, tasks)).collect();
            assert_eq!(ranges[0].start, 0);
            assert_eq!(ranges[tasks as usize - 1].end, KEY_GROUPS);
            for pair in ranges.windows(2) {
                assert_eq!(pair[0].end, pair[1].start, "contiguous at {tasks} tasks");
            }
            for g in 0..KEY_GROUPS {
                let owner = KeyGroups::owner(g, tasks);
                assert!(ranges[owner as usize].owns(g), "group {g} at {tasks} tasks");
                assert_eq!(ranges.iter().filter(|r| r.owns(g)).count(), 1);
            }
        }
    }

    #[test]
    fn the_hash_is_fixed_because_stored_state_depends_on_it() {
        // Changing these breaks every checkpoint written with more than one
        // task: the groups below are part of the format.
        let groups: Vec<u16> = ["", "card-1", "card-2", "4111-1111"]
            .iter()
            .map(|k| key_group(k.as_bytes()))
            .collect();
        assert_eq!(groups, [66, 113, 14, 8]);
        let spread: std::collections::HashSet<u16> = (0..10_000)
            .map(|i| key_group(format!("c{i}").as_bytes()))
            .collect();
        assert_eq!(
            spread.len(),
            KEY_GROUPS as usize,
            "10k keys reach every group"
        );
    }

    #[test]
    fn a_grouped_key_is_in_the_group_it_names() {
        let key = |g: u16, rest: &[u8]| [&GROUPED_KEY[..], &g.to_be_bytes(), rest].concat();
        assert_eq!(group_of_key(&key(5, b"w:1000")), 5);
        assert_eq!(group_of_key(&key(127, b"")), 127);
        assert_eq!(
            group_of_key(&key(128 + 3, b"x")),
            3,
            "taken modulo the groups"
        );
        assert_eq!(group_of_key(b"card-1"), 113, "other keys by their hash");
        assert_eq!(
            group_of_key(b"\xffkg"),
            key_group(b"\xffkg"),
            "too short to name one"
        );
    }
}
