//! The operator host: loads user components into wasmtime and runs them under
//! a CPU deadline and a memory cap, with no ambient authority.
//!
//! Ownership follows wasmtime's embedding model: one [`WasmHost`] per process
//! owns the `Engine` (shared compiled code, the deadline clock); each loaded
//! operator keeps an `InstancePre` (linking done once); and every epoch gets a
//! fresh `Store` and instance ([`OperatorInstance`]). A fresh instance per
//! epoch is what makes replay deterministic: no memory survives from one
//! epoch to the next, and a guest that trapped can never poison the next one.
//!
//! The host is usable on its own (it knows nothing of checkpoints, Kafka or
//! RocksDB): load a component, run it over Arrow batches, get validated
//! Arrow batches back.
//!
//! ```no_run
//! use arrow_array::{Float64Array, RecordBatch, StringArray};
//! use arrow_schema::{DataType, Field, Schema};
//! use std::sync::Arc;
//! use weir_host::{EpochCall, EpochEnv, Grants, Limits, WasmHost};
//!
//! # fn main() -> anyhow::Result<()> {
//! let host = WasmHost::new(None)?; // no on-disk compile cache
//! let wasm = std::fs::read("fraud_rules.wasm")?;
//! let operator = host.load(&wasm, Grants::default())?; // no clocks, no randomness
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("txn_id", DataType::Utf8, false),
//!     Field::new("amount", DataType::Float64, false),
//! ]));
//! let batch = RecordBatch::try_new(
//!     schema,
//!     vec![
//!         Arc::new(StringArray::from(vec!["t-1", "t-2"])),
//!         Arc::new(Float64Array::from(vec![12.5, 9_000.0])),
//!     ],
//! )?;
//! let call = EpochCall {
//!     pipeline: "example",
//!     epoch: 0,
//!     epoch_time_ms: 1_700_000_000_000, // the only clock the guest sees
//!     limits: Limits::default(),        // deadline and memory cap
//!     config: r#"{"alert_threshold": 0.5}"#,
//!     migrate_from: None,
//! };
//! // No keyed state and no watermark: EpochEnv::default().
//! let ran = operator.run(&call, &[batch], EpochEnv::default())?;
//! for batch in &ran.batches {
//!     println!("{} alert rows", batch.num_rows());
//! }
//! # Ok(())
//! # }
//! ```

mod artifacts_host;
mod bindings;
mod cache;
mod columns;
mod error;
mod lookup_host;
mod lowering;
mod sandbox;
mod state_host;
mod store;
mod typed;

pub use cache::default_cache_root;
pub use columns::wit_type;
pub use error::{HostFault, KeyNotOwned, OperatorFailure};
pub use sandbox::Grants;
pub use state_host::KeyedState;

use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use bindings::{EpochContext, InputBatch, OperatorError, OperatorPre, WitOutput, WitTimer};
use cache::{ComponentCache, FunctionCache};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use store::{HostState, Limiter, Tags};
use wasmtime::component::Component;
use wasmtime::{Engine, Store, Trap};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::WasiCtxBuilder;
use weir_core::Digest;

/// `.context()` for wasmtime's own error type, which is not a `std::error::Error`.
pub(crate) trait WasmResultExt<T> {
    fn wasm_context(self, what: &'static str) -> Result<T>;
}

impl<T> WasmResultExt<T> for std::result::Result<T, wasmtime::Error> {
    fn wasm_context(self, what: &'static str) -> Result<T> {
        self.map_err(anyhow::Error::from).context(what)
    }
}

/// Granularity of the CPU deadline: the deadline clock ticks this often.
///
/// The clock is what wasmtime calls the engine's "epoch" (epoch
/// interruption: a store traps once the counter passes its deadline). In
/// Weir an epoch is a micro-batch; this file says "tick" for wasmtime's and
/// keeps wasmtime's method names.
const TICK: Duration = Duration::from_millis(5);
/// Guest stdout/stderr kept per call, for error reports.
const CAPTURED_OUTPUT: usize = 16 * 1024;
/// Seed behind `wasi:random/insecure-seed`: fixed so that hash maps iterate
/// in the same order on every replay.
const FIXED_HASH_SEED: u128 = 0x5745_4952_5745_4952_5745_4952_5745_4952;
/// Most fired timers handed to one `on-timers` call, so that a watermark
/// jump over millions of timers does not need one giant guest allocation.
pub const TIMERS_PER_CALL: usize = 4096;
/// Name of the optional export the host calls with fired timers.
const ON_TIMERS: &str = "on-timers";

/// Resource limits for each operator call, configurable per pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// CPU time one call (`init` or `process`) may take before it is stopped.
    pub deadline: Duration,
    /// Largest linear memory an instance may grow to, in bytes.
    pub memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_secs(10),
            memory_bytes: 512 << 20,
        }
    }
}

/// The process-wide wasmtime engine, its compile cache and deadline clock.
/// Clones share all three (the admin API validates uploads on the same
/// engine the pipeline runs them on); the clock stops with the last clone.
#[derive(Clone)]
pub struct WasmHost {
    engine: Engine,
    /// Same settings, one compiler thread: for compiling uploads while
    /// epochs run (see [`WasmHost::load_in_background`]).
    background: Engine,
    cache: Option<Arc<ComponentCache>>,
    functions: Option<Arc<FunctionCache>>,
    _clock: Arc<DeadlineClock>,
}

/// The thread that ticks every [`TICK`] (`Engine::increment_epoch`).
struct DeadlineClock {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for DeadlineClock {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl WasmHost {
    /// Creates the engine. `cache_root` stores compiled components and
    /// functions; `None` compiles every time.
    pub fn new(cache_root: Option<PathBuf>) -> Result<Self> {
        let mut config = wasmtime::Config::new();
        let functions = cache_root
            .as_deref()
            .map(|root| Arc::new(FunctionCache::new(root)));
        if let Some(functions) = &functions {
            config
                .enable_incremental_compilation(functions.clone())
                .wasm_context("enabling the function cache")?;
        }
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        config.cranelift_opt_level(wasmtime::OptLevel::Speed);
        // For profiling guests: `perf` then names their functions (from
        // the component's name section, if the build kept it).
        if std::env::var_os("WEIR_WASM_PERFMAP").is_some() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config).wasm_context("creating the wasmtime engine")?;
        config.parallel_compilation(false);
        let background =
            Engine::new(&config).wasm_context("creating the background wasmtime engine")?;
        let cache = cache_root.map(|root| Arc::new(ComponentCache::new(&engine, &root)));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (engine, stop) = (engine.clone(), stop.clone());
            std::thread::Builder::new()
                .name("weir-deadline-clock".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(TICK);
                        engine.increment_epoch();
                    }
                })
                .context("starting the deadline clock")?
        };
        Ok(WasmHost {
            engine,
            background,
            cache,
            functions,
            _clock: Arc::new(DeadlineClock {
                stop,
                thread: Some(thread),
            }),
        })
    }

    /// How many functions compiles found in the function cache and how many
    /// they compiled, since this host was made (`None` without a cache).
    pub fn function_cache_hits_and_misses(&self) -> Option<(u64, u64)> {
        self.functions.as_ref().map(|f| f.hits_and_misses())
    }

    /// Compiles (or loads from cache) a component, checks that it implements
    /// the `weir:operator` world and imports nothing beyond `grants`.
    pub fn load(&self, wasm: &[u8], grants: Grants) -> Result<LoadedOperator> {
        self.load_with(wasm, grants, || {
            Component::new(&self.engine, wasm).wasm_context("compiling the operator")
        })
    }

    /// Like [`WasmHost::load`], but compiles on one thread at low CPU
    /// priority instead of on every core: an upload validated while the
    /// pipeline runs must not slow its epochs down. The machine code is
    /// then moved into the main engine (same settings, so the artifact is
    /// compatible).
    #[allow(unsafe_code)] // loading the artifact just compiled (see SAFETY below)
    pub fn load_in_background(&self, wasm: &[u8], grants: Grants) -> Result<LoadedOperator> {
        self.load_with(wasm, grants, || {
            let compiled = std::thread::scope(|s| {
                s.spawn(|| {
                    lower_thread_priority();
                    Component::new(&self.background, wasm).wasm_context("compiling the operator")
                })
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the compiler thread panicked")))
            })?;
            let bytes = compiled
                .serialize()
                .wasm_context("moving the compiled operator")?;
            // SAFETY: `bytes` was produced just now, in this process, by an
            // engine with the same settings as `self.engine` (only the
            // number of compiler threads differs, which the artifact does
            // not depend on); wasmtime checks the header as well.
            unsafe { Component::deserialize(&self.engine, &bytes) }
                .wasm_context("moving the compiled operator")
        })
    }

    fn load_with(
        &self,
        wasm: &[u8],
        grants: Grants,
        compile: impl FnOnce() -> Result<Component>,
    ) -> Result<LoadedOperator> {
        let digest = Digest::of(wasm);
        let started = Instant::now();
        let (component, cached) = match &self.cache {
            Some(cache) => cache.load_or_compile(&self.engine, &digest, compile)?,
            None => (compile()?, false),
        };
        let imports = import_names(&self.engine, &component);
        sandbox::check_imports(imports.iter().map(String::as_str), &grants)?;
        let linker = sandbox::linker(&self.engine, &grants)?;
        let pre = linker
            .instantiate_pre(&component)
            .wasm_context("linking the operator")?;
        let pre = OperatorPre::new(pre).wasm_context(
            "the component does not implement the `weir:operator/operator@0.1.0` world \
             (it must export `init` and `process` with the signatures in wit/operator.wit)",
        )?;
        tracing::debug!(%digest, cached, elapsed = ?started.elapsed(), functions_cached_and_compiled = ?self.function_cache_hits_and_misses(), "operator loaded");
        let on_timers = component
            .component_type()
            .exports(&self.engine)
            .any(|(name, _)| name == ON_TIMERS);
        let reads_every_type = imports_function(
            &self.engine,
            &component,
            "weir:operator/types@0.1.0",
            "[method]batch.typed-schema",
        );
        Ok(LoadedOperator {
            on_timers,
            reads_every_type,
            digest,
            pre,
            engine: self.engine.clone(),
            grants,
            imports,
            size: wasm.len(),
        })
    }

    /// Describes a component without running it: what it imports and exports
    /// and whether it fits the world. Used by `weir operator check`.
    pub fn inspect(&self, wasm: &[u8], grants: Grants) -> Result<ComponentReport> {
        let component = Component::new(&self.engine, wasm).wasm_context("not a valid component")?;
        let ty = component.component_type();
        let imports = import_names(&self.engine, &component);
        let exports = ty
            .exports(&self.engine)
            .map(|(n, _)| n.to_string())
            .collect();
        let verdict = self
            .load(wasm, grants)
            .map(|_| ())
            .map_err(|e| format!("{e:#}"));
        Ok(ComponentReport {
            digest: Digest::of(wasm),
            size: wasm.len(),
            imports,
            exports,
            verdict,
        })
    }
}

/// Makes the calling thread yield the CPU to the epoch loop (Linux: thread
/// niceness 10). Best effort: failure only costs speed.
#[allow(unsafe_code)] // thread niceness has no safe wrapper in std
fn lower_thread_priority() {
    // SAFETY: plain syscalls on the calling thread.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        if libc::getpriority(libc::PRIO_PROCESS, tid) < 10 {
            libc::setpriority(libc::PRIO_PROCESS, tid, 10);
        }
    }
}

/// Names of the instances and functions a component imports. Type imports
/// (the world's `use` of resource and record types) grant nothing and are
/// left out.
fn import_names(engine: &Engine, component: &Component) -> Vec<String> {
    use wasmtime::component::types::ComponentItem;
    component
        .component_type()
        .imports(engine)
        .filter(|(_, item)| !matches!(item.ty, ComponentItem::Type(_) | ComponentItem::Resource(_)))
        .map(|(n, _)| n.to_string())
        .collect()
}

/// Whether `component` imports function `func` of instance `instance`.
fn imports_function(engine: &Engine, component: &Component, instance: &str, func: &str) -> bool {
    use wasmtime::component::types::ComponentItem;
    component
        .component_type()
        .imports(engine)
        .any(|(name, item)| match item.ty {
            ComponentItem::ComponentInstance(i) if name == instance => {
                i.exports(engine).any(|(f, _)| f == func)
            }
            _ => false,
        })
}

/// What `weir operator check` prints.
#[derive(Debug, Clone, Serialize)]
pub struct ComponentReport {
    pub digest: Digest,
    pub size: usize,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    /// `Ok` if the host would run it; else why not.
    pub verdict: std::result::Result<(), String>,
}

/// What an instance sees beyond its batch: the epoch's keyed state (in the
/// operator's namespace) and the watermark. The default has neither: state
/// calls then trap.
#[derive(Default)]
pub struct EpochEnv {
    /// The operator's keyed state for this epoch, already scoped to its
    /// namespace; the embedder takes it back after the run
    /// ([`KeyedState::into_any`]) to commit what the operator changed.
    pub state: Option<Box<dyn KeyedState>>,
    /// The epoch's watermark (Unix ms), as recorded in `offsets/N`.
    pub watermark: Option<i64>,
    /// The watermark of the epoch before, as recorded in `offsets/N`.
    pub previous_watermark: Option<i64>,
    /// The reference tables the epoch reads (`weir:operator/lookup`), at
    /// the versions its `offsets/N` records.
    pub lookups: Arc<weir_core::lookup::EpochTables>,
    /// The named files of the operator version that runs
    /// (`weir:operator/artifacts`), as its `offsets/N` entry records them.
    pub artifacts: Arc<weir_core::artifacts::Artifacts>,
}

/// A compiled, linked operator version, ready to be instantiated per epoch.
pub struct LoadedOperator {
    digest: Digest,
    /// Whether the component exports `on-timers` (world `timer-operator`).
    on_timers: bool,
    /// Whether it reads columns through `batch.typed-schema`, and so
    /// takes columns of every type.
    reads_every_type: bool,
    pre: OperatorPre<HostState>,
    engine: Engine,
    grants: Grants,
    imports: Vec<String>,
    size: usize,
}

impl LoadedOperator {
    /// The content digest recorded in `offsets/<epoch>`.
    pub fn digest(&self) -> Digest {
        self.digest
    }

    /// Whether the component handles timers (exports `on-timers`): only
    /// then do due timers make the host call it, or the engine run an
    /// epoch without input to fire them.
    pub fn handles_timers(&self) -> bool {
        self.on_timers
    }

    /// Whether the component can receive columns of every type (decimal,
    /// timestamp, date, binary, list, struct): it reads its input through
    /// `batch.typed-schema`, as every current SDK does. A component built
    /// before those types existed gets only int64, float64, boolean and
    /// utf8 columns, and is refused an input with others.
    pub fn reads_every_type(&self) -> bool {
        self.reads_every_type
    }

    /// The component's imports (for reports).
    pub fn imports(&self) -> &[String] {
        &self.imports
    }

    /// Size of the component in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// A fresh instance with `config` passed to `init`, seeing `env`.
    pub fn instantiate(
        &self,
        pipeline: &str,
        epoch: u64,
        limits: Limits,
        config: &str,
        env: EpochEnv,
    ) -> Result<OperatorInstance, OperatorFailure> {
        let stdout = MemoryOutputPipe::new(CAPTURED_OUTPUT);
        let stderr = MemoryOutputPipe::new(CAPTURED_OUTPUT);
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .insecure_random_seed(FIXED_HASH_SEED);
        if !self.grants.random {
            // Not linked, or linked inert (`inert_wasi`): deterministic.
            wasi.insecure_random(wasmtime_wasi::Deterministic::new(vec![0x5a]))
                .secure_random(wasmtime_wasi::Deterministic::new(vec![0xa5]));
        }
        if !self.grants.clocks {
            wasi.wall_clock(sandbox::StoppedClock)
                .monotonic_clock(sandbox::StoppedClock);
        }
        let state = HostState {
            table: wasmtime::component::ResourceTable::new(),
            wasi: wasi.build(),
            limiter: Limiter::new(limits.memory_bytes),
            tags: Tags {
                pipeline: pipeline.to_string(),
                epoch,
                digest: self.digest,
            },
            env,
            state_budget: limits.memory_bytes,
            emitted: Vec::new(),
            emitted_bytes: 0,
            emit_error: None,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_trap();
        let mut instance = OperatorInstance {
            store,
            bindings: None,
            instance: None,
            limits,
            stderr,
        };
        instance.arm();
        let raw = self
            .pre
            .instance_pre()
            .instantiate(&mut instance.store)
            .map_err(|e| instance.classify(e))?;
        let bindings =
            bindings::Operator::new(&mut instance.store, &raw).map_err(|e| instance.classify(e))?;
        instance.instance = Some(raw);
        instance.arm();
        let init = bindings
            .call_init(&mut instance.store, config)
            .map_err(|e| instance.classify(e))?;
        match init {
            Ok(()) => {}
            Err(OperatorError::InvalidConfig(m)) => return Err(OperatorFailure::InvalidConfig(m)),
            Err(OperatorError::Failed(m)) => return Err(OperatorFailure::InvalidConfig(m)),
        }
        instance.bindings = Some(bindings);
        Ok(instance)
    }
}

impl LoadedOperator {
    /// Runs this version over an epoch's batches in one fresh instance:
    /// `init`, then `migrate(from)` when `migrate_from` is given, then
    /// `process` per batch, then `on-timers` with the timers the epoch's
    /// watermark reached. Without rows, a migration or due timers no
    /// instance is created.
    pub fn run(
        &self,
        call: &EpochCall<'_>,
        batches: &[RecordBatch],
        mut env: EpochEnv,
    ) -> Result<RunOutput, OperatorFailure> {
        let timers_due = self.on_timers && timers_due(&mut env)?;
        if call.migrate_from.is_none() && !timers_due && batches.iter().all(|b| b.num_rows() == 0) {
            return Ok(RunOutput {
                batches: Vec::new(),
                env,
                migrated: false,
            });
        }
        let mut instance =
            self.instantiate(call.pipeline, call.epoch, call.limits, call.config, env)?;
        let migrated = match call.migrate_from {
            Some(from) => instance.migrate(&from.to_string())?,
            None => false,
        };
        let mut outputs = Vec::new();
        for batch in batches {
            outputs.extend(instance.process(
                call.pipeline,
                call.epoch,
                call.epoch_time_ms,
                batch.clone(),
            )?);
        }
        if timers_due {
            outputs.extend(instance.fire_timers(call.pipeline, call.epoch, call.epoch_time_ms)?);
        }
        Ok(RunOutput {
            batches: outputs,
            env: instance.into_env(),
            migrated,
        })
    }
}

/// Whether `env`'s state has a timer its watermark reached.
fn timers_due(env: &mut EpochEnv) -> Result<bool, OperatorFailure> {
    let (Some(watermark), Some(state)) = (env.watermark, env.state.as_deref_mut()) else {
        return Ok(false);
    };
    let next = state
        .next_timer()
        .map_err(|e| OperatorFailure::Host(format!("state store: {e:#}")))?;
    Ok(next.is_some_and(|at| at <= watermark))
}

/// What [`LoadedOperator::run`] gives back.
pub struct RunOutput {
    /// The non-empty output batches, validated, in order; rows emitted to
    /// named outputs are marked with their output (`weir_core::outputs`).
    pub batches: Vec<RecordBatch>,
    /// The environment it was given, holding the state changes to commit.
    pub env: EpochEnv,
    /// Whether the version's `migrate` hook ran.
    pub migrated: bool,
}

/// What [`LoadedOperator::run`] needs to know about the epoch.
pub struct EpochCall<'a> {
    pub pipeline: &'a str,
    pub epoch: u64,
    pub epoch_time_ms: i64,
    pub limits: Limits,
    /// The JSON config passed to `init`.
    pub config: &'a str,
    /// Previous component digest, on the first epoch after a swap.
    pub migrate_from: Option<Digest>,
}

/// One live instance: a `Store` plus the instance's exports.
pub struct OperatorInstance {
    store: Store<HostState>,
    bindings: Option<bindings::Operator>,
    /// The raw instance, for optional exports outside the world (`migrate`).
    instance: Option<wasmtime::component::Instance>,
    limits: Limits,
    stderr: MemoryOutputPipe,
}

impl OperatorInstance {
    /// Starts the deadline for the next call.
    fn arm(&mut self) {
        let ticks = self
            .limits
            .deadline
            .as_nanos()
            .div_ceil(TICK.as_nanos())
            .max(1) as u64;
        self.store.set_epoch_deadline(ticks);
    }

    fn classify(&mut self, err: wasmtime::Error) -> OperatorFailure {
        if let Some(message) = self.store.data_mut().emit_error.take() {
            return OperatorFailure::InvalidOutput(message);
        }
        if let Some(requested) = self.store.data().limiter.denied_request() {
            return OperatorFailure::MemoryLimit {
                requested,
                limit: self.limits.memory_bytes,
            };
        }
        if let Some(refused) = err.downcast_ref::<KeyNotOwned>() {
            return OperatorFailure::KeyNotOwned(refused.0.clone());
        }
        if let Some(fault) = err.downcast_ref::<HostFault>() {
            return OperatorFailure::Host(fault.0.clone());
        }
        if matches!(err.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
            return OperatorFailure::Deadline(self.limits.deadline);
        }
        let stderr = String::from_utf8_lossy(&self.stderr.contents()).into_owned();
        OperatorFailure::Trap {
            message: format!("{err:#}").replace('\n', " "),
            stderr,
        }
    }

    /// Calls the optional `migrate(from-version)` export, if the component
    /// has one: a new version's chance to convert state written by the
    /// version before it (`from` is that version's digest). Returns whether
    /// it was called; an error fails the epoch like a failing `process`.
    pub fn migrate(&mut self, from: &str) -> Result<bool, OperatorFailure> {
        let Some(instance) = self.instance else {
            return Ok(false);
        };
        let Ok(func) = instance
            .get_typed_func::<(&str,), (Result<(), OperatorError>,)>(&mut self.store, "migrate")
        else {
            return Ok(false);
        };
        self.arm();
        let (result,) = func
            .call(&mut self.store, (from,))
            .map_err(|e| self.classify(e))?;
        match result {
            Ok(()) => Ok(true),
            Err(OperatorError::Failed(m)) | Err(OperatorError::InvalidConfig(m)) => {
                Err(OperatorFailure::Failed(format!("`migrate` failed: {m}")))
            }
        }
    }

    /// Fires the timers the epoch's watermark reached: takes them from the
    /// state (at most [`TIMERS_PER_CALL`] at a time, in time order) and
    /// calls `on-timers` with them, until none is due, so timers that
    /// `on-timers` sets at or before the watermark fire too. Returns the
    /// non-empty outputs. Does nothing without a watermark, without state
    /// or in a component that does not export `on-timers` (its timers stay
    /// set, for a version that handles them).
    pub fn fire_timers(
        &mut self,
        pipeline: &str,
        epoch: u64,
        epoch_time_ms: i64,
    ) -> Result<Vec<RecordBatch>, OperatorFailure> {
        let mut outputs = Vec::new();
        let Some(watermark) = self.store.data().env.watermark else {
            return Ok(outputs);
        };
        let Some(instance) = self.instance else {
            return Ok(outputs);
        };
        type Args<'a> = (&'a EpochContext, &'a [WitTimer]);
        type Returns = (std::result::Result<WitOutput, OperatorError>,);
        let Ok(func) = instance.get_typed_func::<Args<'_>, Returns>(&mut self.store, ON_TIMERS)
        else {
            return Ok(outputs);
        };
        let ctx = EpochContext {
            pipeline: pipeline.to_string(),
            epoch,
            epoch_time_ms,
        };
        loop {
            let Some(state) = self.store.data_mut().env.state.as_deref_mut() else {
                return Ok(outputs);
            };
            let due = state
                .take_due_timers(watermark, TIMERS_PER_CALL)
                .map_err(|e| OperatorFailure::Host(format!("state store: {e:#}")))?;
            if due.is_empty() {
                return Ok(outputs);
            }
            let fired: Vec<WitTimer> = due
                .into_iter()
                .map(|(key, at_ms)| WitTimer { key, at_ms })
                .collect();
            self.arm();
            self.store.data_mut().take_emitted();
            let (result,) = func
                .call(&mut self.store, (&ctx, &fired))
                .map_err(|e| self.classify(e))?;
            let output = match result {
                Ok(output) => output,
                Err(OperatorError::Failed(m)) | Err(OperatorError::InvalidConfig(m)) => {
                    return Err(OperatorFailure::Failed(format!("`on-timers` failed: {m}")))
                }
            };
            let batch = columns::output_to_batch(output)
                .map_err(|e| OperatorFailure::InvalidOutput(format!("{e:#}")))?;
            if batch.num_rows() > 0 {
                outputs.push(batch);
            }
            outputs.extend(self.store.data_mut().take_emitted());
        }
    }

    /// The environment between calls (a real-time epoch's embedder adds its
    /// own state writes to it).
    pub fn env_mut(&mut self) -> &mut EpochEnv {
        &mut self.store.data_mut().env
    }

    /// Ends the instance and hands back what it saw, with the state changes
    /// its calls made.
    pub fn into_env(mut self) -> EpochEnv {
        std::mem::take(&mut self.store.data_mut().env)
    }

    /// Runs `process` over one batch and validates what comes back: the
    /// returned rows (if any), then the rows the call emitted to named
    /// outputs, in the order emitted.
    pub fn process(
        &mut self,
        pipeline: &str,
        epoch: u64,
        epoch_time_ms: i64,
        batch: RecordBatch,
    ) -> Result<Vec<RecordBatch>, OperatorFailure> {
        let bindings = self
            .bindings
            .take()
            .ok_or_else(|| OperatorFailure::Failed("instance was not initialised".into()))?;
        self.store.data_mut().tags.epoch = epoch;
        let handle = self
            .store
            .data_mut()
            .table
            .push(InputBatch { batch })
            .map_err(|e| OperatorFailure::Failed(format!("resource table: {e}")))?;
        let ctx = EpochContext {
            pipeline: pipeline.to_string(),
            epoch,
            epoch_time_ms,
        };
        self.arm();
        self.store.data_mut().take_emitted();
        let borrowed = wasmtime::component::Resource::<InputBatch>::new_borrow(handle.rep());
        let result = bindings.call_process(&mut self.store, &ctx, borrowed);
        let _ = self.store.data_mut().table.delete(handle);
        let output = match result {
            Err(e) => return Err(self.classify(e)),
            Ok(Err(OperatorError::Failed(m))) => return Err(OperatorFailure::Failed(m)),
            Ok(Err(OperatorError::InvalidConfig(m))) => {
                return Err(OperatorFailure::InvalidConfig(m))
            }
            Ok(Ok(output)) => output,
        };
        self.bindings = Some(bindings);
        let returned = columns::output_to_batch(output)
            .map_err(|e| OperatorFailure::InvalidOutput(format!("{e:#}")))?;
        let mut out = Vec::new();
        if returned.num_rows() > 0 {
            out.push(returned);
        }
        out.extend(self.store.data_mut().take_emitted());
        Ok(out)
    }
}
