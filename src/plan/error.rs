//! Why a run is refused before anything starts. Each error is one line that names what to
//! change; its kind says what was wrong, for callers and tests that act on it.

use crate::transport::UnknownName;

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The run names nothing to do: no workload, or no transport.
    #[error("{0}")]
    Missing(&'static str),
    /// A workload or transport this build does not know.
    #[error(transparent)]
    Unknown(#[from] UnknownName),
    /// A flag or scenario key with a value msgperf cannot use (a count, a size, a duration,
    /// an `--opt` value, a CPU).
    #[error("{0}")]
    BadValue(String),
    /// Settings that contradict each other.
    #[error("{0}")]
    Conflict(String),
    /// What the workload or transport cannot do with these settings (a delivery, a number of
    /// roles, a --connect).
    #[error("{0}")]
    Unsupported(String),
    /// What this machine does not allow (the CPUs this process may use).
    #[error("{0}")]
    Machine(String),
    /// A scenario file that does not parse: where, and what was expected.
    #[error("{origin}: {why}")]
    Scenario { origin: String, why: String },
}
