//! The operator's keyed state for one epoch: the state store's overlay
//! ([`EpochState`]) scoped to the operator's namespace, handed to the Wasm
//! host as its [`KeyedState`] and taken back after the run to be committed.
//! Every [`EpochEnv`] the engine builds (epoch, shadow, `init` and golden
//! checks) comes from [`epoch_env`].

use anyhow::Result;
use std::any::Any;
use weir_core::wal::OffsetEntry;
use weir_host::{EpochEnv, KeyedState};
use weir_state::{namespace_prefix, Changes, EpochState, ListSpace, TimerSpace};

/// An [`EpochState`] as one operator namespace sees it: its keys, its
/// lists and its timers.
struct OperatorState {
    state: EpochState,
    prefix: Vec<u8>,
    lists: ListSpace,
    timers: TimerSpace,
}

impl KeyedState for OperatorState {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.state.get(&self.prefix, key)
    }

    fn get_many(&mut self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        self.state.get_many(&self.prefix, keys)
    }

    fn put(&mut self, key: &[u8], value: &[u8], ttl_ms: Option<u64>) {
        self.state.put(&self.prefix, key, value, ttl_ms)
    }

    fn delete(&mut self, key: &[u8]) {
        self.state.delete(&self.prefix, key)
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.state.scan(&self.prefix, start, end, limit)
    }

    fn append(&mut self, key: &[u8], value: &[u8]) {
        self.state.append(&self.lists, key, value)
    }

    fn list(&mut self, key: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.state.list(&self.lists, key)
    }

    fn clear(&mut self, key: &[u8]) -> Result<()> {
        self.state.clear(&self.lists, key).map(drop)
    }

    fn set_timer(&mut self, key: &[u8], at_ms: i64) {
        self.state.set_timer(&self.timers, key, at_ms)
    }

    fn delete_timer(&mut self, key: &[u8], at_ms: i64) {
        self.state.delete_timer(&self.timers, key, at_ms)
    }

    fn timers(&mut self, key: &[u8]) -> Result<Vec<i64>> {
        self.state.timers_of(&self.timers, key)
    }

    fn take_due_timers(&mut self, watermark: i64, limit: usize) -> Result<Vec<(Vec<u8>, i64)>> {
        self.state.take_due_timers(&self.timers, watermark, limit)
    }

    fn next_timer(&mut self) -> Result<Option<i64>> {
        self.state.next_timer(&self.timers)
    }

    fn pending_bytes(&self) -> usize {
        self.state.pending_bytes()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// The state epoch `entry` of the operator starts from: a fresh overlay
/// over `reader`, with the list elements that committed epochs cleared
/// deleted for good (see `weir_state::lists`).
pub fn epoch_state(
    reader: weir_state::StateReader,
    namespace: &str,
    entry: &OffsetEntry,
) -> Result<EpochState> {
    let mut state = EpochState::new(reader, entry.epoch, entry.epoch_time_ms);
    state.forget_cleared_lists(&ListSpace::of(namespace))?;
    Ok(state)
}

/// What an operator instance sees of one epoch: `state` under the
/// operator's `namespace`, and the watermarks `entry` records.
pub fn epoch_env(state: EpochState, namespace: &str, entry: &OffsetEntry) -> EpochEnv {
    EpochEnv {
        watermark: entry.watermark_ms,
        previous_watermark: entry.previous_watermark_ms,
        ..state_env(state, namespace)
    }
}

/// Like [`epoch_env`] outside any epoch (deploy checks): no watermark.
pub fn state_env(state: EpochState, namespace: &str) -> EpochEnv {
    EpochEnv {
        state: Some(Box::new(OperatorState {
            state,
            prefix: namespace_prefix(namespace),
            lists: ListSpace::of(namespace),
            timers: TimerSpace::of(namespace),
        })),
        watermark: None,
        previous_watermark: None,
    }
}

/// The epoch's state inside `env` (none if it has no state from
/// [`epoch_env`]), for the host's dedup between real-time batches.
pub fn epoch_state_mut(env: &mut EpochEnv) -> Option<&mut EpochState> {
    let state = env.state.as_mut()?;
    let ours = state.as_any_mut().downcast_mut::<OperatorState>()?;
    Some(&mut ours.state)
}

/// The state changes an operator made through `env` (none if it had no
/// state, or state from elsewhere).
pub fn changes(env: EpochEnv) -> Changes {
    env.state
        .and_then(|s| s.into_any().downcast::<OperatorState>().ok())
        .map(|s| s.state.into_changes())
        .unwrap_or_default()
}
