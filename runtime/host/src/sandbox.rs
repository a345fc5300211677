//! What an operator may touch. Only the `weir:operator` host interfaces and
//! the inert parts of WASI that every language runtime imports (stdio, exit,
//! an empty environment, a fixed hash seed) are linked by default; clocks and
//! randomness only when the pipeline grants them. Filesystem and sockets are
//! never linked, so a component that imports them is refused at load time —
//! unless the pipeline sets `inert_wasi`: then all of WASI is linked, and
//! what the pipeline does not grant is an inert, deterministic stand-in: a
//! filesystem with no directories, sockets that may reach no address, a
//! clock stopped at the Unix epoch, random bytes from a fixed seed. That is
//! for components built with libraries (an inference engine) that
//! *reference* files, clocks or randomness on paths the operator never
//! takes: nothing is reachable, and a replay sees what the first run saw.

use super::store::HostState;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime::Engine;
use wasmtime_wasi::cli::{WasiCli, WasiCliView};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
use wasmtime_wasi::random::WasiRandom;
use wasmtime_wasi::WasiView;

/// Capabilities a pipeline grants to its operator beyond the default sandbox.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    /// Real wall and monotonic clocks. Breaks replay determinism unless the
    /// operator only uses them for diagnostics.
    #[serde(default)]
    pub clocks: bool,
    /// Cryptographic and insecure random numbers. Breaks replay determinism.
    #[serde(default)]
    pub random: bool,
    /// Link the WASI interfaces not granted above as inert stand-ins (no
    /// directories, no reachable address, a stopped clock, seeded random
    /// bytes) instead of refusing a component that imports them. Grants
    /// nothing, and keeps replays exact.
    #[serde(default)]
    pub inert_wasi: bool,
}

/// Interfaces linked for every operator, by name without version.
const ALWAYS: &[&str] = &[
    "weir:operator/types",
    "weir:operator/host",
    "weir:operator/state",
    "weir:operator/timers",
    "weir:operator/event-time",
    "weir:operator/outputs",
    "weir:operator/lookup",
    "weir:operator/artifacts",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    // Returns a fixed seed: hash maps work and stay deterministic.
    "wasi:random/insecure-seed",
];

const CLOCKS: &[&str] = &["wasi:clocks/wall-clock", "wasi:clocks/monotonic-clock"];
const RANDOM: &[&str] = &["wasi:random/random", "wasi:random/insecure"];

/// Strips `@version` from an import name.
fn unversioned(name: &str) -> &str {
    name.split('@').next().unwrap_or(name)
}

/// Checks every import of a component against the grants. The error lists
/// each import that is not allowed, with the grant (if any) that allows it.
pub fn check_imports<'a>(
    imports: impl IntoIterator<Item = &'a str>,
    grants: &Grants,
) -> Result<()> {
    let mut refused = Vec::new();
    for name in imports {
        let bare = unversioned(name);
        if (grants.inert_wasi && bare.starts_with("wasi:"))
            || ALWAYS.contains(&bare)
            || (grants.clocks && CLOCKS.contains(&bare))
            || (grants.random && RANDOM.contains(&bare))
        {
            continue;
        }
        let hint = if CLOCKS.contains(&bare) {
            "grant it with `[operator.grants] clocks = true` (replays may then differ)"
        } else if RANDOM.contains(&bare) {
            "grant it with `[operator.grants] random = true` (replays may then differ)"
        } else if bare.starts_with("wasi:filesystem") || bare.starts_with("wasi:sockets") {
            "operators get no filesystem or network: read through sources, write through sinks"
        } else {
            "the host does not provide it"
        };
        refused.push(format!("`{name}` ({hint})"));
    }
    if !refused.is_empty() {
        bail!(
            "the operator imports what this pipeline does not grant: {}",
            refused.join(", ")
        );
    }
    Ok(())
}

struct HasTable;

impl HasData for HasTable {
    type Data<'a> = &'a mut ResourceTable;
}

/// Builds the linker for the granted capabilities.
pub fn linker(engine: &Engine, grants: &Grants) -> Result<Linker<HostState>> {
    use wasmtime_wasi::p2::bindings::sync as wasi;
    let mut l = Linker::<HostState>::new(engine);
    super::bindings::Operator::add_to_linker::<HostState, wasmtime::component::HasSelf<HostState>>(
        &mut l,
        |s| s,
    )?;
    super::lowering::add_to_linker(&mut l)?;
    wasi::io::error::add_to_linker::<HostState, HasTable>(&mut l, |t| t.ctx().table)?;
    wasi::io::poll::add_to_linker::<HostState, HasTable>(&mut l, |t| t.ctx().table)?;
    wasi::io::streams::add_to_linker::<HostState, HasTable>(&mut l, |t| t.ctx().table)?;
    wasi::cli::exit::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::environment::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::stdin::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::stdout::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::stderr::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::terminal_input::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::terminal_output::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::terminal_stdin::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::terminal_stdout::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::terminal_stderr::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::random::insecure_seed::add_to_linker::<HostState, WasiRandom>(&mut l, |t| {
        t.ctx().ctx.random()
    })?;
    if grants.clocks {
        wasi::clocks::wall_clock::add_to_linker::<HostState, WasiClocks>(
            &mut l,
            HostState::clocks,
        )?;
        wasi::clocks::monotonic_clock::add_to_linker::<HostState, WasiClocks>(
            &mut l,
            HostState::clocks,
        )?;
    }
    if grants.random {
        wasi::random::random::add_to_linker::<HostState, WasiRandom>(&mut l, |t| {
            t.ctx().ctx.random()
        })?;
        wasi::random::insecure::add_to_linker::<HostState, WasiRandom>(&mut l, |t| {
            t.ctx().ctx.random()
        })?;
    }
    if grants.inert_wasi {
        // The rest of WASI, over the instance's context: no preopened
        // directories, no allowed address, and (unless granted) the
        // stopped clock and seeded random bytes `HostState` is built with.
        l.allow_shadowing(true);
        wasmtime_wasi::p2::add_to_linker_sync(&mut l)?;
    }
    Ok(l)
}

/// The clock an operator without the `clocks` grant reads when the
/// pipeline links WASI as inert stand-ins: stopped at the Unix epoch.
pub(crate) struct StoppedClock;

impl wasmtime_wasi::HostWallClock for StoppedClock {
    fn resolution(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(1)
    }

    fn now(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
}

impl wasmtime_wasi::HostMonotonicClock for StoppedClock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_sandbox_refuses_filesystem_clocks_and_random() {
        let none = Grants::default();
        assert!(
            check_imports(["wasi:io/streams@0.2.6", "weir:operator/host@0.1.0"], &none).is_ok()
        );
        let err = check_imports(["wasi:filesystem/types@0.2.6"], &none).unwrap_err();
        assert!(
            err.to_string().contains("wasi:filesystem/types@0.2.6"),
            "{err}"
        );
        let err = check_imports(["wasi:clocks/wall-clock@0.2.6"], &none).unwrap_err();
        assert!(err.to_string().contains("clocks = true"), "{err}");
        assert!(check_imports(["wasi:random/random@0.2.6"], &none).is_err());
        assert!(check_imports(["wasi:sockets/tcp@0.2.6"], &none).is_err());
    }

    #[test]
    fn grants_open_exactly_their_interfaces() {
        let clocks = Grants {
            clocks: true,
            ..Grants::default()
        };
        assert!(check_imports(["wasi:clocks/monotonic-clock@0.2.0"], &clocks).is_ok());
        assert!(check_imports(["wasi:random/random@0.2.0"], &clocks).is_err());
        let random = Grants {
            random: true,
            ..Grants::default()
        };
        assert!(check_imports(["wasi:random/insecure@0.2.0"], &random).is_ok());
        assert!(check_imports(["wasi:filesystem/preopens@0.2.0"], &random).is_err());
    }
}
