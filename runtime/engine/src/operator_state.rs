//! The operator's keyed state for one epoch: the state store's overlay
//! ([`EpochState`]) scoped to the operator's namespace, handed to the Wasm
//! host as its [`KeyedState`] and taken back after the run to be committed.
//! Every [`EpochEnv`] the engine builds (epoch, shadow, `init` and golden
//! checks) comes from [`epoch_env`]; a task of a parallel epoch gets its
//! own from [`task_envs`], limited to the task's key groups.

use anyhow::Result;
use std::any::Any;
use weir_core::wal::OffsetEntry;
use weir_host::{EpochEnv, KeyNotOwned, KeyedState};
use weir_state::{
    group_of_key, namespace_prefix, Changes, EpochState, KeyGroups, ListSpace, TimerSpace,
};

/// What one task of a parallel epoch may touch: the key groups it owns,
/// and how its rows were routed (for the error when it strays).
#[derive(Debug, Clone)]
pub struct TaskScope {
    pub groups: KeyGroups,
    /// The routing key column (`key` in the pipeline file), if rows were
    /// routed by one rather than split evenly.
    pub routing: Option<String>,
}

impl TaskScope {
    /// Refuses `key` (a state key, list key or timer key) if another
    /// task's group holds it.
    fn check(&self, what: &str, key: &[u8]) -> Result<()> {
        let group = group_of_key(key);
        if self.groups.owns(group) {
            return Ok(());
        }
        Err(KeyNotOwned(self.refusal(what, key, group)).into())
    }

    fn refusal(&self, what: &str, key: &[u8], group: u16) -> String {
        let g = &self.groups;
        let owner = KeyGroups::owner(group, g.tasks);
        let rows = match &self.routing {
            Some(column) => format!("the rows whose `{column}` is in {g}"),
            None => "an even share of the rows, which no `key` routes".to_string(),
        };
        let fix = match &self.routing {
            Some(column) => format!(
                "key the operator's state by `{column}` (the same bytes), or keep a key that \
                 gathers many `{column}` values once per key group (`weir_sdk::state::grouped_key`), \
                 or set `parallelism = 1`"
            ),
            None => "set `key` to the column the state is keyed by, or `parallelism = 1`".into(),
        };
        format!(
            "{what} {} is in key group {group}, which task {owner} of {} owns; this task \
             ({}) runs {rows}. Fix: {fix} (docs/pipelines.md, \"Parallel tasks\")",
            show_key(key),
            g.tasks,
            g.task,
        )
    }
}

/// A key as an error message shows it: quoted text if it is printable
/// UTF-8, else hex.
fn show_key(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(text) if !text.chars().any(char::is_control) => format!("{text:?}"),
        _ => format!("0x{}", hex::encode(key)),
    }
}

/// An [`EpochState`] as one operator namespace sees it: its keys, its
/// lists and its timers; for a task of a parallel epoch, only those of its
/// key groups.
struct OperatorState {
    state: EpochState,
    prefix: Vec<u8>,
    lists: ListSpace,
    timers: TimerSpace,
    /// The task's key groups; `None` when one task runs the whole epoch.
    scope: Option<TaskScope>,
    /// Changes of the epoch's other tasks, committed with this state's.
    merged: Changes,
}

impl OperatorState {
    fn check(&self, what: &str, key: &[u8]) -> Result<()> {
        match &self.scope {
            Some(scope) => scope.check(what, key),
            None => Ok(()),
        }
    }
}

/// Whether the task of `scope` owns `key` (every key when one task runs
/// the epoch): the filter of its scans and due timers. A free function so
/// that it borrows the scope alone, beside the state being scanned.
fn in_scope(scope: &Option<TaskScope>, key: &[u8]) -> bool {
    scope.as_ref().is_none_or(|s| s.groups.owns_key(key))
}

impl KeyedState for OperatorState {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check("state key", key)?;
        self.state.get(&self.prefix, key)
    }

    fn get_many(&mut self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        for key in keys {
            self.check("state key", key)?;
        }
        self.state.get_many(&self.prefix, keys)
    }

    fn put(&mut self, key: &[u8], value: &[u8], ttl_ms: Option<u64>) -> Result<()> {
        self.check("state key", key)?;
        self.state.put(&self.prefix, key, value, ttl_ms);
        Ok(())
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.check("state key", key)?;
        self.state.delete(&self.prefix, key);
        Ok(())
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let scope = &self.scope;
        self.state
            .scan_where(&self.prefix, start, end, limit, |k| in_scope(scope, k))
    }

    fn append(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check("list key", key)?;
        self.state.append(&self.lists, key, value);
        Ok(())
    }

    fn list(&mut self, key: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.check("list key", key)?;
        self.state.list(&self.lists, key)
    }

    fn clear(&mut self, key: &[u8]) -> Result<()> {
        self.check("list key", key)?;
        self.state.clear(&self.lists, key).map(drop)
    }

    fn set_timer(&mut self, key: &[u8], at_ms: i64) -> Result<()> {
        self.check("timer key", key)?;
        self.state.set_timer(&self.timers, key, at_ms);
        Ok(())
    }

    fn delete_timer(&mut self, key: &[u8], at_ms: i64) -> Result<()> {
        self.check("timer key", key)?;
        self.state.delete_timer(&self.timers, key, at_ms);
        Ok(())
    }

    fn timers(&mut self, key: &[u8]) -> Result<Vec<i64>> {
        self.check("timer key", key)?;
        self.state.timers_of(&self.timers, key)
    }

    fn take_due_timers(&mut self, watermark: i64, limit: usize) -> Result<Vec<(Vec<u8>, i64)>> {
        let scope = &self.scope;
        self.state
            .take_due_timers_where(&self.timers, watermark, limit, |k| in_scope(scope, k))
    }

    fn next_timer(&mut self) -> Result<Option<i64>> {
        let scope = &self.scope;
        self.state
            .next_timer_where(&self.timers, |k| in_scope(scope, k))
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
            scope: None,
            merged: Changes::default(),
        })),
        watermark: None,
        previous_watermark: None,
        lookups: Default::default(),
        artifacts: Default::default(),
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
/// state, or state from elsewhere), with those of the tasks merged in.
pub fn changes(env: EpochEnv) -> Changes {
    env.state
        .and_then(|s| s.into_any().downcast::<OperatorState>().ok())
        .map(|s| {
            let mut all = s.state.into_changes();
            all.merge(s.merged);
            all
        })
        .unwrap_or_default()
}

/// One environment per task of a parallel epoch, beside `env` (the
/// epoch's, which keeps the host's own changes such as dedup): each a
/// fresh view of the same committed state at the same epoch and time,
/// limited to task `t`'s key groups; without state, the watermarks alone.
pub fn task_envs(env: &mut EpochEnv, tasks: u16, routing: Option<&str>) -> Vec<EpochEnv> {
    let (watermark, previous_watermark) = (env.watermark, env.previous_watermark);
    let (lookups, artifacts) = (env.lookups.clone(), env.artifacts.clone());
    let ours = env
        .state
        .as_mut()
        .and_then(|s| s.as_any_mut().downcast_mut::<OperatorState>());
    (0..tasks)
        .map(|t| EpochEnv {
            state: ours.as_ref().map(|ours| -> Box<dyn KeyedState> {
                Box::new(OperatorState {
                    state: ours.state.sibling(),
                    prefix: ours.prefix.clone(),
                    lists: ours.lists.clone(),
                    timers: ours.timers.clone(),
                    scope: Some(TaskScope {
                        groups: KeyGroups::of_task(t, tasks),
                        routing: routing.map(str::to_string),
                    }),
                    merged: Changes::default(),
                })
            }),
            watermark,
            previous_watermark,
            lookups: lookups.clone(),
            artifacts: artifacts.clone(),
        })
        .collect()
}

/// Adds a finished task's state changes to the epoch's `env`, to be
/// committed together ([`changes`]).
pub fn absorb(env: &mut EpochEnv, task: EpochEnv) {
    let task_changes = changes(task);
    if let Some(ours) = env
        .state
        .as_mut()
        .and_then(|s| s.as_any_mut().downcast_mut::<OperatorState>())
    {
        ours.merged.merge(task_changes);
    }
}
