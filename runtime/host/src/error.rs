//! Why a guest call failed, typed so the engine can tell a bad configuration
//! (refuse to start) from a failed epoch (report, keep the host up).

use std::time::Duration;
use thiserror::Error;

/// A failure of one operator call. The engine adds pipeline, epoch and
/// operator digest when it reports it.
#[derive(Debug, Error)]
pub enum OperatorFailure {
    /// The call ran past its CPU deadline and was interrupted.
    #[error("exceeded its deadline of {0:?} and was stopped")]
    Deadline(Duration),
    /// The guest tried to grow its memory past the cap.
    #[error("tried to grow its memory to {requested} bytes, over the limit of {limit} bytes")]
    MemoryLimit { requested: usize, limit: usize },
    /// The guest trapped (panic, `unreachable`, out-of-bounds access, ...).
    #[error("trapped: {message}{}", stderr_suffix(.stderr))]
    Trap { message: String, stderr: String },
    /// `init` refused the configuration.
    #[error("rejected its configuration: {0}")]
    InvalidConfig(String),
    /// `process` returned an error for this batch.
    #[error("failed: {0}")]
    Failed(String),
    /// The guest returned output that breaks the contract.
    #[error("returned invalid output: {0}")]
    InvalidOutput(String),
    /// The guest used a state key that belongs to another task of a
    /// parallel pipeline ([`KeyNotOwned`]). It depends on how rows are
    /// routed, not on one record, so no record is isolated for it.
    #[error("used keyed state another task owns: {0}")]
    KeyNotOwned(String),
    /// A host service the guest called failed on the host's side (the
    /// state store could not be read: an I/O error, corruption). Not the
    /// operator's fault nor any record's: the engine fails the epoch as a
    /// storage fault, and neither rolls the version back nor isolates
    /// records for it.
    #[error("stopped because the host failed under it: {0}")]
    Host(String),
}

impl OperatorFailure {
    /// Whether the failure is the host's ([`OperatorFailure::Host`]), not
    /// the operator's.
    pub fn is_host_fault(&self) -> bool {
        matches!(self, OperatorFailure::Host(_))
    }
}

/// An embedder's service failing on the host's side during a guest call
/// (a state read that hit an I/O error): the guest traps with it, and the
/// failure becomes [`OperatorFailure::Host`].
#[derive(Debug, Clone, Error)]
#[error("{0}")]
pub struct HostFault(pub String);

/// A state call an embedder refuses because the key is another task's: a
/// [`crate::KeyedState`] returns it, the host passes it through the guest
/// as it is, and the failure becomes [`OperatorFailure::KeyNotOwned`].
#[derive(Debug, Clone, Error)]
#[error("{0}")]
pub struct KeyNotOwned(pub String);

fn stderr_suffix(stderr: &str) -> String {
    let trimmed = stderr.trim();
    if trimmed.is_empty() {
        String::new()
    } else {
        format!(" (guest stderr: {trimmed})")
    }
}
