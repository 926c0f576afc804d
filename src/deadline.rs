//! Leaf: `Deadline`, the only way msgperf waits. Every blocking call takes one (or the idle
//! timeout derived from one), so no wait in the tool is unbounded.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set by Ctrl-C, SIGTERM or SIGHUP: the running case ends early, no further case starts, and
/// any wait that can end early (a broker's start) gives up at once.
pub static STOP: AtomicBool = AtomicBool::new(false);

pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// A role process's stop flag, which its runner raises with SIGUSR1 (see `exec::role`). A
/// blocking read that the signal interrupts gives up at once rather than waiting out its
/// timeout again: the runner stops a role only when the case is ending (a peer or a broker
/// died or hung, Ctrl-C). Never set in the runner's own process.
pub static ROLE_STOP: std::sync::OnceLock<std::sync::Arc<AtomicBool>> = std::sync::OnceLock::new();

/// Whether this process is a role its runner told to stop.
pub fn role_told_to_stop() -> bool {
    ROLE_STOP.get().is_some_and(|f| f.load(Ordering::Relaxed))
}

/// A point in time after which a wait gives up.
#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    at: Instant,
}

impl Deadline {
    pub fn after(d: Duration) -> Self {
        Deadline {
            at: Instant::now() + d,
        }
    }

    /// Time left, zero once passed.
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    pub fn expired(&self) -> bool {
        Instant::now() >= self.at
    }

    /// Time left, at least one millisecond: for APIs where zero means "forever".
    pub fn remaining_nonzero(&self) -> Duration {
        self.remaining().max(Duration::from_millis(1))
    }
}
